// The link-state table from plain per-port samples (no node): utilisation and its EWMA, BER and
// its floor and window, health, pauses, counter resets, link-down events, and the link
// fingerprint that becomes the PPCID path id (stable under renumbering, collisions reported).
#include "control/link_state_table.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

using namespace spraynet::control;
using Catch::Detail::Approx;

namespace {

constexpr uint64_t kPeriod = 200'000'000;  // 200 ms

std::vector<LinkIdentity> named_links(size_t n, const std::string& node = "leaf1") {
  std::vector<LinkIdentity> ids;
  for (size_t i = 0; i < n; ++i) ids.push_back({node, "p" + std::to_string(i), std::nullopt});
  return ids;
}

// Adds one period of traffic at utilisation u to a 10 Gbit/s sample: 1000-byte frames, so each
// takes (1000 + 24) * 8 bits of wire.
void add_load(PortSample& s, double u) {
  const double capacity_bits = 10.0 * kPeriod;
  const auto frames = static_cast<uint64_t>(u * capacity_bits / (1024 * 8) + 0.5);
  s.tx_packets += frames;
  s.tx_bytes += frames * 1000;
}

PortSample idle_10g() {
  PortSample s;
  s.rate_gbps = 10.0;
  return s;
}

}  // namespace

TEST_CASE("link state: the first update is a baseline; then wire utilisation per interval") {
  LinkStateTableConfig cfg;
  cfg.utilisation_weight = 1.0;  // no smoothing: the interval's own value
  LinkStateTable t(named_links(2), cfg);
  std::vector<PortSample> s = {idle_10g(), idle_10g()};
  s[0].tx_bytes = 123456789;  // history before the control loop started: not counted
  s[0].tx_packets = 1000;
  t.update(s, 5 * kPeriod);
  CHECK(t.at(0).utilisation == 0.0);
  CHECK(t.at(0).health == 255);
  CHECK(t.updates() == 1);

  add_load(s[0], 0.85);
  add_load(s[1], 0.10);
  t.update(s, 6 * kPeriod);
  CHECK(t.at(0).last_utilisation == Approx(0.85).epsilon(1e-4));
  CHECK(t.at(0).utilisation == Approx(0.85).epsilon(1e-4));
  CHECK(t.at(1).utilisation == Approx(0.10).epsilon(1e-3));
  CHECK(t.at(0).health == 147);  // 255 * (1 - 0.85 / 2)
  CHECK(t.at(0).updated_ns == 6 * kPeriod);

  // The interval is whatever elapsed: the same bytes over two periods read half.
  add_load(s[0], 0.85);
  t.update(s, 8 * kPeriod);
  CHECK(t.at(0).utilisation == Approx(0.425).epsilon(1e-4));
}

TEST_CASE("link state: utilisation EWMA, default weight 0.5 per period") {
  LinkStateTable t(named_links(1));
  CHECK(t.config().utilisation_weight == 0.5);
  std::vector<PortSample> s = {idle_10g()};
  t.update(s, 0);
  const double expected[] = {0.5, 0.75, 0.875, 0.9375};  // a step from idle to 100%
  for (int k = 0; k < 4; ++k) {
    add_load(s[0], 1.0);
    t.update(s, (k + 1) * kPeriod);
    CHECK(t.at(0).last_utilisation == Approx(1.0).epsilon(1e-4));
    CHECK(t.at(0).utilisation == Approx(expected[k]).epsilon(1e-4));
  }
  t.update(s, 5 * kPeriod);  // idle again: halves
  CHECK(t.at(0).utilisation == Approx(0.46875).epsilon(1e-4));
}

TEST_CASE("link state: BER never reads as perfect, and a new error is not diluted by history") {
  LinkStateTable t(named_links(1));
  CHECK(t.config().ber_floor == 1e-12);
  std::vector<PortSample> s = {idle_10g()};
  CHECK(t.at(0).ber == 1e-12);  // before any sample: the floor, not 0
  t.update(s, 0);
  for (int k = 1; k <= 100; ++k) {  // 20 s of clean traffic at 50%
    add_load(s[0], 0.5);
    t.update(s, k * kPeriod);
    REQUIRE(t.at(0).ber == 1e-12);
  }
  const double bits_per_period =
      8.0 * (static_cast<double>(s[0].tx_bytes) + 4.0 * static_cast<double>(s[0].tx_packets)) /
      100.0;
  // One frame lost to bit errors in the next period.
  add_load(s[0], 0.5);
  s[0].bit_error_frames += 1;
  t.update(s, 101 * kPeriod);
  // The window holds about 1 / (1 - 0.9) = 10 periods of bits, not all 101.
  const double window_bits = bits_per_period * (1 - std::pow(0.9, 101)) / (1 - 0.9);
  CHECK(t.at(0).ber == Approx(1.0 / window_bits).epsilon(1e-6));
  CHECK(t.at(0).ber > 8.0 / (101 * bits_per_period));  // a lifetime ratio would be 10x smaller
  CHECK(t.at(0).frame_loss_ratio > 0.0);
  // Then it fades as clean traffic follows, down to the floor again, never below.
  const double after_one = t.at(0).ber;
  add_load(s[0], 0.5);
  t.update(s, 102 * kPeriod);
  CHECK(t.at(0).ber < after_one);
  for (int k = 103; k < 500; ++k) {
    add_load(s[0], 0.5);
    t.update(s, k * kPeriod);
  }
  CHECK(t.at(0).ber == 1e-12);
}

TEST_CASE("link state: health from loss, pause and load; 0 when down, not in watchdog drop") {
  CHECK(link_health(true, false, 0.0, 0.0, 0.0) == 255);
  CHECK(link_health(true, false, 0.0, 0.0, 0.85) == 147);
  CHECK(link_health(true, false, 0.0, 1.0, 0.85) == 73);
  CHECK(link_health(true, false, 0.0, 0.5, 0.0) == 191);   // 255 * 0.75
  CHECK(link_health(true, false, 0.05, 0.0, 0.0) == 128);  // 255 * 0.5 = 127.5
  CHECK(link_health(true, false, 0.10, 0.0, 0.0) == 0);    // 10% loss: dead for RoCE
  CHECK(link_health(true, false, 0.0, 0.0, 3.0) == 128);   // utilisation clamps at 1
  CHECK(link_health(false, false, 0.0, 0.0, 0.0) == 0);
  CHECK(link_health(true, true, 0.0, 0.0, 0.0) == 0);

  // Through the table: a lossless class paused for half the period, loss and flags.
  LinkStateTableConfig cfg;
  cfg.utilisation_weight = 1.0;
  LinkStateTable t(named_links(3), cfg);
  std::vector<PortSample> s = {idle_10g(), idle_10g(), idle_10g()};
  t.update(s, 0);
  s[0].paused_ns += kPeriod / 2;
  s[0].paused = true;
  add_load(s[1], 0.5);
  s[1].lost_frames += s[1].tx_packets / 20;  // 5% plain loss
  s[2].watchdog_dropping = true;
  s[2].watchdog_classes = 1u << 3;
  s[2].queued_bytes = 4096;
  t.update(s, kPeriod);
  CHECK(t.at(0).paused);
  CHECK(t.at(0).paused_fraction == Approx(0.5));
  CHECK(t.at(0).health == 191);
  CHECK(t.at(1).frame_loss_ratio == Approx(0.05).epsilon(1e-3));
  CHECK(t.at(1).ber == 1e-12);  // plain loss is not bit errors
  CHECK(t.at(1).health ==
        link_health(true, false, t.at(1).frame_loss_ratio, 0.0, t.at(1).utilisation));
  CHECK(t.at(1).health < 100);
  CHECK(t.at(2).watchdog_dropping);
  CHECK(t.at(2).watchdog_classes == 0x08);
  CHECK(t.at(2).queued_bytes == 4096);
  // The watchdog is per (port, class): the link stays healthy for the other classes.
  CHECK(t.at(2).health == 255);
}

TEST_CASE("link state: mark_down is an event; the next sample decides again") {
  LinkStateTable t(named_links(2));
  std::vector<PortSample> s = {idle_10g(), idle_10g()};
  t.update(s, 0);
  t.mark_down(1, 1234);
  CHECK_FALSE(t.at(1).up);
  CHECK(t.at(1).health == 0);
  CHECK(t.at(1).updated_ns == 1234);
  CHECK(t.at(0).up);
  s[1].up = false;
  t.update(s, kPeriod);
  CHECK_FALSE(t.at(1).up);
  s[1].up = true;
  t.update(s, 2 * kPeriod);
  CHECK(t.at(1).up);
  CHECK(t.at(1).health == 255);
  CHECK_THROWS_AS(t.mark_down(2, 0), std::out_of_range);
}

TEST_CASE("link state: counters that go backwards read as idle, not as a wrap; bad input") {
  LinkStateTableConfig cfg;
  cfg.utilisation_weight = 1.0;
  LinkStateTable t(named_links(1), cfg);
  std::vector<PortSample> s = {idle_10g()};
  add_load(s[0], 5.0);
  t.update(s, 0);
  s[0].tx_bytes = 100;  // the port was re-created
  s[0].tx_packets = 1;
  t.update(s, kPeriod);
  CHECK(t.at(0).utilisation == 0.0);
  t.update(s, kPeriod);  // no time elapsed: baseline only
  CHECK(t.updates() == 3);

  std::vector<PortSample> wrong(2);
  CHECK_THROWS_AS(t.update(wrong, 3 * kPeriod), std::invalid_argument);
  LinkStateTableConfig bad;
  bad.utilisation_weight = 0.0;
  CHECK_THROWS_AS(LinkStateTable(named_links(1), bad), std::invalid_argument);
  bad = {};
  bad.path_id_bits = 9;
  CHECK_THROWS_AS(LinkStateTable(named_links(1), bad), std::invalid_argument);
  bad = {};
  bad.ber_floor = 1.0;
  CHECK_THROWS_AS(LinkStateTable(named_links(1), bad), std::invalid_argument);
}

TEST_CASE("fingerprint: FNV-1a of the identity, folded to the path-id width") {
  CHECK(link_fingerprint("") == 0xcbf29ce484222325ull);
  CHECK(link_fingerprint("a") == 0xaf63dc4c8601ec8cull);
  CHECK(fold_path_id(0x0123456789abcdefull, 4) == 0);  // nibbles 0..f xor to 0
  CHECK(fold_path_id(0xf1, 4) == 0xe);
  CHECK(fold_path_id(0xf1, 8) == 0xf1);
  CHECK(fold_path_id(0x8000000000000000ull, 4) == 0x8);

  CHECK(identity_string({"leaf1", "p3", std::nullopt}) == "leaf1/p3");
  CHECK(identity_string({"leaf1", "p3", std::array<uint8_t, 6>{2, 0, 0, 0, 1, 0xa7}}) ==
        "leaf1>02:00:00:00:01:a7");
  // The peer MAC names the cable: renaming the local port does not change the identity.
  CHECK(identity_string({"leaf1", "uplink7", std::array<uint8_t, 6>{2, 0, 0, 0, 1, 0xa7}}) ==
        "leaf1>02:00:00:00:01:a7");
}

TEST_CASE("fingerprint: path ids survive port renumbering") {
  auto ids = named_links(8);
  ids[5].peer_mac = std::array<uint8_t, 6>{2, 0, 0, 0, 9, 9};
  LinkStateTable a(ids);
  std::vector<LinkIdentity> renumbered(ids.rbegin(), ids.rend());
  std::rotate(renumbered.begin(), renumbered.begin() + 3, renumbered.end());
  LinkStateTable b(renumbered);
  for (const LinkState& l : a.links()) {
    const auto it = std::find_if(b.links().begin(), b.links().end(),
                                 [&](const LinkState& m) { return m.identity == l.identity; });
    REQUIRE(it != b.links().end());
    CHECK(it->path_id == l.path_id);
    CHECK(it->fingerprint == l.fingerprint);
  }
  // 8 links in 16 ids: all distinct after probing.
  std::set<uint8_t> distinct;
  for (const LinkState& l : a.links()) distinct.insert(l.path_id);
  CHECK(distinct.size() == 8);
  CHECK(a.collisions().size() == b.collisions().size());
}

TEST_CASE("fingerprint: collisions are detected, resolved to a free id and reported") {
  // Find two port names of one node that fold to the same 4-bit id.
  std::vector<LinkIdentity> ids;
  std::vector<int> by_id(16, -1);
  for (int i = 0; ids.empty(); ++i) {
    const LinkIdentity id{"leaf1", "p" + std::to_string(i), std::nullopt};
    const uint8_t pid = fold_path_id(link_fingerprint(identity_string(id)), 4);
    if (by_id[pid] >= 0) {
      ids = {{"leaf1", "p" + std::to_string(by_id[pid]), std::nullopt}, id};
    }
    by_id[pid] = i;
  }
  LinkStateTable t(ids);
  REQUIRE(t.collisions().size() == 1);
  const PathIdCollision& c = t.collisions()[0];
  CHECK_FALSE(c.shared());
  CHECK(c.folded_id == fold_path_id(t.at(0).fingerprint, 4));
  CHECK(t.at(c.other).path_id == c.folded_id);
  CHECK(t.at(c.link).path_id == c.assigned_id);
  CHECK(t.at(0).path_id != t.at(1).path_id);

  // 8 bits (path-high layout): plenty of room, usually no collision for two links.
  LinkStateTableConfig wide;
  wide.path_id_bits = 8;
  LinkStateTable w(ids, wide);
  CHECK(w.at(0).path_id == fold_path_id(w.at(0).fingerprint, 8));

  // 17 links in 16 ids: at least one must share, and says so.
  LinkStateTable crowded(named_links(17));
  const auto shared = std::count_if(crowded.collisions().begin(), crowded.collisions().end(),
                                    [](const PathIdCollision& x) { return x.shared(); });
  CHECK(shared == 1);
  std::set<uint8_t> used;
  for (const LinkState& l : crowded.links()) used.insert(l.path_id);
  CHECK(used.size() == 16);

  // The same identity twice (a copy-pasted peer_mac) is a collision too.
  auto dup = named_links(2);
  dup[0].peer_mac = dup[1].peer_mac = std::array<uint8_t, 6>{2, 0, 0, 0, 0, 1};
  LinkStateTable d(dup);
  CHECK(d.collisions().size() == 1);
}

TEST_CASE("fingerprint: path ids fixed by the config are kept; the others fold around them") {
  auto links = named_links(4);
  LinkStateTable folded(links);
  // Fix link 3 on the id link 0 folds to: link 0 must move, link 3 keeps it.
  const uint8_t taken = folded.at(0).path_id;
  links[3].path_id = taken;
  links[1].path_id = static_cast<uint8_t>((taken + 5) % 16);
  LinkStateTable t(links);
  CHECK(t.at(3).path_id == taken);
  CHECK(t.at(1).path_id == (taken + 5) % 16);
  CHECK(t.at(0).path_id != taken);
  std::set<uint8_t> used;
  for (const LinkState& l : t.links()) used.insert(l.path_id);
  CHECK(used.size() == 4);
  // Every link fixed: no fold, no collision to report.
  for (size_t i = 0; i < links.size(); ++i) links[i].path_id = static_cast<uint8_t>(i + 1);
  LinkStateTable all(links);
  for (size_t i = 0; i < links.size(); ++i) CHECK(all.at(i).path_id == i + 1);
  CHECK(all.collisions().empty());
}

TEST_CASE("fingerprint: identities and path-id width from a switch config") {
  const SwitchConfig cfg = parse_switch_config(ConfigNode::load_string(
      "name: leaf9\nppcid_layout: path-high\nports:\n"
      "  - {name: a, device: x, peer_mac: '02:00:00:00:00:aa'}\n  - {name: b, device: x}\n",
      "t.yaml"));
  const auto ids = link_identities(cfg);
  REQUIRE(ids.size() == 2);
  CHECK(identity_string(ids[0]) == "leaf9>02:00:00:00:00:aa");
  CHECK(identity_string(ids[1]) == "leaf9/b");
  CHECK(path_id_bits(cfg) == 8);
  SwitchConfig ts = cfg;
  ts.ppcid_layout = "ts-high";
  CHECK(path_id_bits(ts) == 4);
}
