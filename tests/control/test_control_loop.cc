// The control loop on a real SwitchNode in virtual time: traffic built with the packet builder
// goes in through SwitchNode::receive, egress releases it through transmit, and the loop samples
// the ports and publishes bucket weights. Tables change exactly at each 200 ms boundary and at
// once on link down; after a link goes down no packet leaves on it once the table is published.
#include "control/control_loop.h"

#include <catch2/catch.hpp>

#include <array>
#include <set>
#include <vector>

#include "control/switch_config.h"
#include "dataplane/egress/link_emulator.h"
#include "dataplane/wire/packet_builder.h"
#include "switch_emu/switch_node.h"
#include "tests/support/dpdk_test.h"

using namespace spraynet;
using namespace spraynet::control;
using Catch::Detail::Approx;
using spraynet::switch_emu::SwitchNode;
using spraynet::test::TestPool;

namespace {

constexpr uint64_t kMs = 1'000'000;
constexpr uint64_t kPeriod = 200 * kMs;

// Node ports: in0 (0), p0..p3 (1..4). Group 0 `g` spreads 0.0.0.0/0 over p0..p3 by weighted
// buckets; group 1 is the route 10.1.0.0/16 pinned to p0, which loads p0 alone. The uplinks run
// at 100 Mbit/s so that a period at 85% is about 2,000 frames.
const char* kYaml = R"(
name: leaf1
ports:
  - {name: in0, device: x}
  - {name: p0, device: x, link: {rate_gbps: 0.1}, queue_bytes: 67108864}
  - {name: p1, device: x, link: {rate_gbps: 0.1}, queue_bytes: 67108864}
  - {name: p2, device: x, link: {rate_gbps: 0.1}, queue_bytes: 67108864}
  - {name: p3, device: x, link: {rate_gbps: 0.1}, queue_bytes: 67108864, peer_mac: '02:00:00:00:09:03'}
groups:
  - {name: g, mode: weighted, ports: [p0, p1, p2, p3]}
routes:
  - {prefix: 10.1.0.0/16, port: p0}
  - {prefix: 0.0.0.0/0, group: g}
hash: {algorithm: crc32c, seed: 0x1234}
)";

constexpr uint16_t kIn = 0;
constexpr uint16_t kP0 = 1;
constexpr size_t kFrameBytes = 1000;  // 14 + 20 + 8 + 958
constexpr uint64_t kWireBits = (kFrameBytes + LinkEmulator::kWireOverheadBytes) * 8;  // 8192

SwitchConfig config() {
  return parse_switch_config(ConfigNode::load_string(kYaml, "t.yaml"));
}

// A node, its pool, and a virtual clock with a helper to feed and drain it.
struct Rig {
  TestPool pool{8191};
  SwitchNode node{config(), pool.get()};
  std::array<uint64_t, 5> delivered{};  // frames that left each port
  uint64_t next_load_ns = 0;            // next frame of the p0 load
  uint64_t load_frames = 0;

  void send(uint32_t dst, uint16_t sport, uint64_t now_ns) {
    static const std::vector<uint8_t> payload(kFrameBytes - 42, 0x5A);
    FrameSpec fs;
    fs.ip.src = 0x0A000001;
    fs.ip.dst = dst;
    fs.udp.src_port = sport;
    fs.udp.dst_port = 5000;
    fs.payload = payload;
    rte_mbuf* m = build_udp_mbuf(pool.get(), fs);
    REQUIRE(m != nullptr);
    node.receive(kIn, &m, 1, now_ns);
  }
  // Runs the node up to now_ns: frames due start, frames arrived leave and are freed.
  void drain(uint64_t now_ns) {
    node.poll(now_ns);
    rte_mbuf* out[64];
    for (uint16_t p = 0; p < node.port_count(); ++p) {
      uint16_t n;
      while ((n = node.transmit(p, now_ns, out, 64)) > 0) {
        delivered[p] += n;
        rte_pktmbuf_free_bulk(out, n);
      }
    }
  }
  // Loads p0 at utilisation u from `from_ns` (or where the load left off) up to, not including,
  // until_ns: frame k of the load is received at from + k * wire time / u.
  void load_p0(double u, uint64_t from_ns, uint64_t until_ns) {
    const double gap_ns = kWireBits / (0.1 * u);  // 0.1 Gbit/s = 0.1 bit/ns
    for (uint64_t k = 0;; ++k) {
      const auto t = from_ns + static_cast<uint64_t>(k * gap_ns);
      if (t >= until_ns) break;
      send(0x0A010000 + static_cast<uint32_t>(k & 0xFF), static_cast<uint16_t>(k), t);
      if (k % 16 == 0) drain(t);
      ++load_frames;
    }
    drain(until_ns - 1);
  }
  // Every buckets array of group g, for "did the table change" checks.
  std::vector<uint16_t> table_of(size_t group) {
    const auto b = node.group(group).bucket_table().buckets();
    return {b.begin(), b.end()};
  }
  void finish() {
    node.free_all();
    CHECK(pool.whole());
  }
};

}  // namespace

TEST_CASE("control loop: the target built from a SwitchNode") {
  Rig rig;
  const ControlTarget t = control_target_of(rig.node);
  REQUIRE(t.ports.size() == 5);
  REQUIRE(t.links.size() == 5);
  CHECK(t.groups.size() == 2);  // g and the pinned route's group of one
  CHECK(t.pfc == nullptr);
  CHECK(t.path_id_bits == 4);
  CHECK(identity_string(t.links[1]) == "leaf1/p0");
  CHECK(identity_string(t.links[4]) == "leaf1>02:00:00:00:09:03");
  ControlLoop loop(t, 0);
  std::set<uint8_t> ids;
  for (const LinkState& l : loop.table().links()) ids.insert(l.path_id);
  CHECK(ids.size() == 5);            // distinct, collisions resolved
  CHECK(loop.current() == nullptr);  // nothing published before the first tick
  CHECK(loop.next_event_ns() == kPeriod);
  CHECK_THROWS_AS(ControlLoop(t, 0, ControlLoopConfig{0, {}, {}}), std::invalid_argument);
  rig.finish();
}

TEST_CASE("control loop: tables change exactly at each 200 ms tick, not at 199.999999 ms") {
  Rig rig;
  ControlLoopConfig cfg;
  cfg.links.utilisation_weight = 1.0;  // the period's own utilisation: exact formula points
  ControlLoop loop(control_target_of(rig.node), 0, cfg);
  const auto initial = rig.table_of(0);

  // Period 1: p0 at 85%.
  rig.load_p0(0.85, 0, kPeriod);
  rig.drain(kPeriod - 1);
  CHECK_FALSE(loop.tick(kPeriod - 1));
  CHECK(loop.counters().ticks == 0);
  CHECK(loop.counters().publications == 0);
  CHECK(rig.table_of(0) == initial);

  rig.drain(kPeriod);
  CHECK(loop.tick(kPeriod));
  CHECK(loop.counters().ticks == 1);
  CHECK(loop.counters().publications == 1);
  REQUIRE(loop.current() != nullptr);
  CHECK(loop.current()->sequence == 1);
  CHECK(loop.current()->computed_ns == kPeriod);
  CHECK_FALSE(loop.current()->immediate);
  CHECK(loop.table().at(kP0).utilisation == Approx(0.85).epsilon(0.002));
  // DESIGN.md's vector through the whole loop: 85% keeps 12 of 32.
  CHECK(loop.current()->group_weights[0] == std::vector<uint32_t>{12, 32, 32, 32});
  CHECK(loop.current()->group_weights[1] == std::vector<uint32_t>{12});
  const auto after_first = rig.table_of(0);
  CHECK(after_first != initial);
  const BucketTable& bt = rig.node.group(0).bucket_table();
  CHECK(double(bt.buckets_of(0)) / bt.size() == Approx(12.0 / 108).epsilon(0.02));
  CHECK(loop.next_event_ns() == 2 * kPeriod);
  CHECK_FALSE(loop.tick(kPeriod + 1));  // a second call in the same period does nothing

  // Period 2: idle. The table stays until 400 ms exactly, then p0 has all its buckets back.
  rig.drain(2 * kPeriod - 1);
  CHECK_FALSE(loop.tick(2 * kPeriod - 1));
  CHECK(rig.table_of(0) == after_first);
  CHECK(loop.current()->sequence == 1);
  rig.drain(2 * kPeriod);
  CHECK(loop.tick(2 * kPeriod));
  CHECK(loop.current()->group_weights[0] == std::vector<uint32_t>{32, 32, 32, 32});
  CHECK(rig.table_of(0) != after_first);
  CHECK(loop.counters().ticks == 2);
  CHECK(loop.counters().publications == 2);
  CHECK(loop.counters().immediate_publications == 0);
  CHECK(loop.next_event_ns() == 3 * kPeriod);
  rig.finish();
}

TEST_CASE("control loop: a loaded link's buckets shrink per the formula as its EWMA rises") {
  Rig rig;
  ControlLoop loop(control_target_of(rig.node), 0);  // defaults: EWMA weight 0.5
  double ewma = 0.0;
  std::vector<uint32_t> p0_weights;
  for (uint64_t k = 1; k <= 5; ++k) {
    rig.load_p0(0.85, (k - 1) * kPeriod, k * kPeriod);
    rig.drain(k * kPeriod);
    REQUIRE(loop.tick(k * kPeriod));
    const LinkState& l = loop.table().at(kP0);
    ewma = 0.5 * l.last_utilisation + 0.5 * ewma;
    CHECK(l.utilisation == Approx(ewma));
    CHECK(l.last_utilisation == Approx(0.85).epsilon(0.002));
    const auto& w = loop.current()->group_weights[0];
    CHECK(w[0] == reweighted_buckets(l.utilisation, true, ReweightConfig{}));
    CHECK(w[1] == 32);  // idle links keep all their buckets
    CHECK(l.health == link_health(true, false, 0.0, 0.0, l.utilisation));
    p0_weights.push_back(w[0]);
  }
  // EWMA 0.425, 0.64, 0.74, 0.80, 0.82: 32, 29, 20, 16, 14 — shrinking toward 12.
  CHECK(p0_weights.front() == 32);
  CHECK(std::is_sorted(p0_weights.rbegin(), p0_weights.rend()));
  CHECK(p0_weights.back() < 16);
  CHECK(p0_weights.back() > 12);
  CHECK(loop.counters().ticks == 5);
  rig.finish();
}

TEST_CASE("control loop: link down is published at once; no packet leaves on it afterwards") {
  Rig rig;
  ControlLoop loop(control_target_of(rig.node), 0);
  constexpr uint16_t kDown = 3;  // p2: member 2 of g
  auto burst = [&rig](uint64_t now_ns) {
    for (uint16_t f = 0; f < 256; ++f)
      rig.send(0x0A020000 + f, static_cast<uint16_t>(f * 7), now_ns);
  };

  burst(10 * kMs);
  rig.drain(40 * kMs);
  const uint64_t before = rig.delivered[kDown];
  CHECK(before > 30);  // about a quarter of 256 went to p2 while it was up

  const uint64_t down_ns = 50 * kMs;
  burst(down_ns - 1);  // queued and in flight when it goes down: dropped, never delivered
  rig.node.set_link_up(kDown, false, down_ns);
  loop.on_link_down(kDown, down_ns);
  CHECK(loop.counters().publications == 1);
  CHECK(loop.counters().immediate_publications == 1);
  CHECK(loop.counters().ticks == 0);
  CHECK(loop.next_event_ns() == kPeriod);  // the tick schedule did not move
  REQUIRE(loop.current() != nullptr);
  CHECK(loop.current()->immediate);
  CHECK(loop.current()->computed_ns == down_ns);
  CHECK(loop.current()->group_weights[0] == std::vector<uint32_t>{32, 32, 0, 32});
  CHECK(rig.node.group(0).bucket_table().buckets_of(2) == 0);
  CHECK_FALSE(loop.table().at(kDown).up);
  CHECK(loop.table().at(kDown).health == 0);

  // From here on nothing leaves on p2, and it is the table that keeps flows off it: the
  // selector never had to rehash away from an ineligible bucket.
  const uint64_t tx_at_down = rig.node.egress(kDown).counters(0, down_ns).transmitted_packets;
  const uint64_t rehashed = rig.node.group(0).counters().rehashed_ineligible;
  const uint64_t forwarded_at_down = rig.node.port_counters(kDown).forwarded_packets;
  CHECK(rig.node.egress(kDown).counters(0, down_ns).drops_link_down > 0);  // the queued ones
  rig.delivered[kDown] = 0;
  for (uint64_t t = down_ns; t < down_ns + 100 * kMs; t += 10 * kMs) {
    burst(t);
    rig.drain(t + 5 * kMs);
  }
  rig.drain(down_ns + 150 * kMs);
  CHECK(rig.delivered[kDown] == 0);
  CHECK(rig.node.egress(kDown).counters(0, down_ns + 150 * kMs).transmitted_packets == tx_at_down);
  CHECK(rig.node.group(0).counters().rehashed_ineligible == rehashed);
  CHECK(rig.node.drops().no_eligible_port == 0);
  CHECK(rig.node.port_counters(kDown).forwarded_packets == forwarded_at_down);
  // Every packet forwarded to the other uplinks left on them: the flows of p2 moved, none lost.
  for (uint16_t p : {uint16_t{1}, uint16_t{2}, uint16_t{4}}) {
    CHECK(rig.delivered[p] == rig.node.port_counters(p).forwarded_packets);
  }

  // The tick sees it down too; a link coming back up waits for the next tick's sample.
  rig.drain(kPeriod);
  CHECK(loop.tick(kPeriod));
  CHECK(loop.current()->group_weights[0][2] == 0);
  rig.node.set_link_up(kDown, true, 300 * kMs);
  CHECK_FALSE(loop.tick(300 * kMs));
  CHECK(rig.node.group(0).bucket_table().buckets_of(2) == 0);
  rig.drain(2 * kPeriod);
  CHECK(loop.tick(2 * kPeriod));
  CHECK(loop.current()->group_weights[0] == std::vector<uint32_t>{32, 32, 32, 32});
  CHECK(loop.counters().publications == 3);
  CHECK(loop.counters().immediate_publications == 1);
  CHECK_THROWS_AS(loop.on_link_down(5, 0), std::out_of_range);
  rig.finish();
}

TEST_CASE("control loop: without the immediate publication the selector must rehash") {
  // The contrast to the test above: the dataplane alone keeps traffic off a down link only by
  // rehashing each packet whose bucket points at it, until the next tick publishes.
  Rig rig;
  ControlLoop loop(control_target_of(rig.node), 0);
  rig.node.set_link_up(3, false, 10 * kMs);
  for (uint16_t f = 0; f < 256; ++f)
    rig.send(0x0A020000 + f, static_cast<uint16_t>(f * 7), 20 * kMs);
  CHECK(rig.node.group(0).counters().rehashed_ineligible > 30);
  rig.drain(kPeriod);
  REQUIRE(loop.tick(kPeriod));
  const uint64_t rehashed = rig.node.group(0).counters().rehashed_ineligible;
  for (uint16_t f = 0; f < 256; ++f)
    rig.send(0x0A020000 + f, static_cast<uint16_t>(f * 7), kPeriod + kMs);
  CHECK(rig.node.group(0).counters().rehashed_ineligible == rehashed);
  rig.drain(kPeriod + 100 * kMs);
  CHECK(rig.delivered[3] == 0);
  rig.finish();
}

TEST_CASE("control loop: a late driver gets one tick and the missed boundaries are counted") {
  Rig rig;
  ControlLoop loop(control_target_of(rig.node), 5 * kMs);  // boundaries at 205, 405, ... ms
  CHECK(loop.next_event_ns() == 205 * kMs);
  CHECK_FALSE(loop.tick(204 * kMs));
  rig.drain(1055 * kMs);
  CHECK(loop.tick(1055 * kMs));  // 205 ... 1005 passed: one tick, four missed
  CHECK(loop.counters().ticks == 1);
  CHECK(loop.counters().missed_periods == 4);
  CHECK(loop.next_event_ns() == 1205 * kMs);
  CHECK_FALSE(loop.tick(1204 * kMs));
  CHECK(loop.tick(1205 * kMs));
  CHECK(loop.counters().missed_periods == 4);
  rig.finish();
}

TEST_CASE("control loop: queued bytes reach the table") {
  Rig rig;
  ControlLoop loop(control_target_of(rig.node), 0);
  // 200 frames at once to p0: 100 Mbit/s drains one every 81.92 us, so most are still queued
  // 1 ms later when the link state is sampled.
  for (uint16_t k = 0; k < 200; ++k) rig.send(0x0A010000 + k, k, kPeriod - kMs);
  rig.drain(kPeriod);
  REQUIRE(loop.tick(kPeriod));
  const LinkState& l = loop.table().at(kP0);
  CHECK(l.queued_bytes > 150 * kFrameBytes);
  CHECK(l.queued_bytes < 200 * kFrameBytes);
  CHECK(loop.current()->links[kP0].queued_bytes == l.queued_bytes);
  rig.finish();
}

TEST_CASE("control loop: adjust_sample adds traffic the dataplane does not carry") {
  // fabric_emu's background load: the port carries only the experiment's frames, at the rate
  // the background leaves, and the hook completes the sample as the real port counters would.
  // Here p0 is idle in the dataplane and the hook says 85% of its 100 Mbit/s went by.
  Rig rig;
  ControlTarget t = control_target_of(rig.node);
  t.adjust_sample = [](uint16_t port, uint64_t now_ns, PortSample& s) {
    if (port != kP0) return;
    // 85% of 0.1 Gbit/s since 0, as whole 1000-byte frames with their wire overhead.
    const uint64_t frames = static_cast<uint64_t>(0.85 * 0.1 * static_cast<double>(now_ns) /
                                                  static_cast<double>(kWireBits));
    s.tx_packets += frames;
    s.tx_bytes += frames * kFrameBytes;
  };
  ControlLoopConfig cc;
  cc.links.utilisation_weight = 1.0;  // the latest period alone
  ControlLoop loop(t, 0, cc);
  rig.drain(kPeriod);
  REQUIRE(loop.tick(kPeriod));
  CHECK(loop.table().at(kP0).utilisation == Approx(0.85).margin(0.001));
  CHECK(loop.table().at(kP0 + 1).utilisation == 0.0);
  // The formula: 12 of 32 buckets at 85%, the idle members keep 32.
  CHECK(loop.current()->group_weights[0] == std::vector<uint32_t>{12, 32, 32, 32});
  rig.finish();
}

TEST_CASE("control loop: configured weights stay in force, scaled by the link state") {
  // Before: weights [1, 1, 2, 4] were replaced by [32, 32, 32, 32] at the first tick.
  std::string yaml = kYaml;
  const std::string from = "{name: g, mode: weighted, ports: [p0, p1, p2, p3]}";
  yaml.replace(yaml.find(from), from.size(), "{name: g, mode: weighted, ports: [p0, p1, p2, p3], weights: [1, 1, 2, 4]}");
  TestPool pool{1023};
  SwitchNode node(parse_switch_config(ConfigNode::load_string(yaml, "t.yaml")), pool.get());
  const auto buckets = [&] {
    const BucketTable& t = node.group(0).bucket_table();
    std::array<size_t, 4> b{};
    for (uint16_t m = 0; m < 4; ++m) b[m] = t.buckets_of(m);
    return b;
  };
  const auto before = buckets();
  CHECK(before[1] == before[0]);
  CHECK(before[2] == 2 * before[0]);
  CHECK(before[3] == 4 * before[0]);
  ControlLoop loop(control_target_of(node), 0);
  REQUIRE(loop.tick(kPeriod));  // idle links: every path keeps its full share
  REQUIRE(loop.current() != nullptr);
  CHECK(loop.current()->group_weights[0] == std::vector<uint32_t>{8, 8, 16, 32});
  const auto after = buckets();
  CHECK(after[2] == 2 * after[0]);
  CHECK(after[3] == 4 * after[0]);
  // A link down keeps 0 whatever its configured weight; the others keep their ratio.
  node.set_link_up(4, false, kPeriod + 1);
  loop.on_link_down(4, kPeriod + 1);
  CHECK(loop.current()->group_weights[0] == std::vector<uint32_t>{8, 8, 16, 0});
  node.free_all();
  CHECK(pool.whole());
}
