#include "dataplane/forwarding/path_selector.h"

#include <catch2/catch.hpp>

#include "tests/support/reference_crc.h"

#include <cmath>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <stdexcept>
#include <vector>

#include "dataplane/forwarding/flow_hasher.h"

using namespace spraynet;

namespace {

constexpr uint64_t kUs = 1000;

// Bit-at-a-time CRC-32C with rte_hash_crc's conventions (register starts at the seed, no final
// XOR), over the canonical 13-byte key: the test's own idea of the ECMP hash.
uint32_t reference_flow_hash(const FlowKey& k, uint32_t seed) {
  const uint8_t bytes[13] = {uint8_t(k.src_ip >> 24),      uint8_t(k.src_ip >> 16),
                             uint8_t(k.src_ip >> 8),       uint8_t(k.src_ip),
                             uint8_t(k.dst_ip >> 24),      uint8_t(k.dst_ip >> 16),
                             uint8_t(k.dst_ip >> 8),       uint8_t(k.dst_ip),
                             uint8_t(k.src_port >> 8),     uint8_t(k.src_port),
                             uint8_t(k.dst_port >> 8),     uint8_t(k.dst_port),
                             uint8_t(k.proto_and_qp >> 24)};
  return test::reference_crc32c_dpdk(bytes, seed);
}

FlowKey random_udp_key(std::mt19937& rng) {
  FlowKey k;
  k.src_ip = rng();
  k.dst_ip = rng();
  k.src_port = static_cast<uint16_t>(rng());
  k.dst_port = static_cast<uint16_t>(rng());
  k.proto_and_qp = uint32_t{17} << 24;
  return k;
}

// Loads indexed by port id for a node with `ports` ports.
std::vector<PathLoad> port_loads(size_t ports) {
  return std::vector<PathLoad>(ports);
}

PathGroupConfig group(LbMode mode, std::vector<uint16_t> ports) {
  PathGroupConfig c;
  c.mode = mode;
  c.member_ports = std::move(ports);
  return c;
}

const std::vector<uint16_t> kEight = {10, 11, 12, 13, 14, 15, 16, 17};

}  // namespace

TEST_CASE("mode names parse and print") {
  for (LbMode m : {LbMode::kEcmp, LbMode::kWeighted, LbMode::kDlb, LbMode::kDrill}) {
    CHECK(parse_lb_mode(to_string(m)) == m);
  }
  CHECK(to_string(LbMode::kDlb) == "dlb");
  CHECK(parse_lb_mode("weighted") == LbMode::kWeighted);
  CHECK_FALSE(parse_lb_mode("ECMP").has_value());
  CHECK_FALSE(parse_lb_mode("spray").has_value());
}

TEST_CASE("bad group configs are refused with the reason") {
  CHECK_THROWS_WITH(PathSelector(group(LbMode::kEcmp, {})), Catch::Contains("no member"));
  CHECK_THROWS_WITH(PathSelector(group(LbMode::kEcmp, {1, 2, 1})),
                    Catch::Contains("port 1 is a member twice"));
  CHECK_THROWS_WITH(PathSelector(group(LbMode::kEcmp, {1, 0xFFFF})), Catch::Contains("65535"));
  CHECK_THROWS_WITH(PathSelector(group(LbMode::kEcmp, std::vector<uint16_t>(5000, 1))),
                    Catch::Contains("at most 4096"));
  PathGroupConfig bad_dlb = group(LbMode::kDlb, {1, 2});
  bad_dlb.dlb_table_entries = 1000;
  CHECK_THROWS_AS(PathSelector(bad_dlb), std::invalid_argument);
  PathSelector ok(group(LbMode::kWeighted, {1, 2}));
  CHECK_THROWS_WITH(ok.set_weights(std::vector<uint32_t>{1, 2, 3}),
                    Catch::Contains("3 weights for 2 members"));
}

TEST_CASE("ECMP spreads 100,000 flows over 8 ports within 3%, agreeing with hash % N") {
  const uint32_t seed = 0x5EED;
  const FlowHasher hasher({HashAlgorithm::kCrc32c, seed, false});
  PathSelector ecmp(group(LbMode::kEcmp, kEight));
  const auto loads = port_loads(20);
  std::mt19937 rng(11);
  std::map<uint16_t, int> per_port;
  std::vector<std::pair<FlowKey, uint16_t>> flows;
  constexpr int kFlows = 100'000;
  for (int i = 0; i < kFlows; ++i) {
    const FlowKey k = random_udp_key(rng);
    const uint16_t port = ecmp.select(hasher.hash(k), i, loads);
    REQUIRE(port == kEight[reference_flow_hash(k, seed) % 8]);
    ++per_port[port];
    if (i % 100 == 0) flows.emplace_back(k, port);
  }
  REQUIRE(per_port.size() == 8);
  for (const auto& [port, count] : per_port) {
    INFO("port " << port);
    CHECK(std::abs(count - kFlows / 8) <= 0.03 * kFlows / 8);
  }
  // Every flow stays on its port, later and however often it is asked.
  for (const auto& [k, port] : flows) {
    for (uint64_t t : {uint64_t{1}, 500 * kUs, 10'000'000 * kUs}) {
      REQUIRE(ecmp.select(hasher.hash(k), t, loads) == port);
    }
  }
  CHECK(ecmp.counters().selected == kFlows + 3 * flows.size());
  CHECK(std::accumulate(ecmp.member_packets().begin(), ecmp.member_packets().end(), 0ull) ==
        ecmp.counters().selected);
}

TEST_CASE("ECMP failover: one port down rehashes as 8 -> 7 paths and never uses it") {
  const FlowHasher hasher({HashAlgorithm::kCrc32c, 1, false});
  PathSelector ecmp(group(LbMode::kEcmp, kEight));
  auto loads = port_loads(20);
  loads[13].eligible = false;  // member 3
  const std::vector<uint16_t> up = {10, 11, 12, 14, 15, 16, 17};
  std::mt19937 rng(12);
  std::map<uint16_t, int> per_port;
  for (int i = 0; i < 70'000; ++i) {
    const FlowKey k = random_udp_key(rng);
    const uint16_t port = ecmp.select(hasher.hash(k), 0, loads);
    REQUIRE(port == up[reference_flow_hash(k, 1) % 7]);
    ++per_port[port];
  }
  CHECK(per_port.count(13) == 0);
  CHECK(per_port.size() == 7);
  for (const auto& [port, count] : per_port) CHECK(std::abs(count - 10'000) <= 300);
  // All down: no port, counted.
  for (uint16_t p : kEight) loads[p].eligible = false;
  CHECK(ecmp.select(123, 0, loads) == PathSelector::kNoPort);
  CHECK(ecmp.counters().no_eligible_port == 1);
}

TEST_CASE("weighted groups follow their weights within 2%") {
  const FlowHasher hasher({HashAlgorithm::kCrc32c, 2, false});
  const std::vector<std::vector<uint32_t>> vectors = {
      {1, 1, 1, 1, 1, 1, 1, 1},          // before the control loop publishes anything
      {32, 32, 32, 32, 32, 32, 32, 12},  // one path at 85%
      {32, 12, 32, 12, 0, 32, 20, 32},   // two hot, one down
      {32, 32, 32, 32, 32, 32, 32, 32},  // back to idle
  };
  PathSelector weighted(group(LbMode::kWeighted, kEight));
  const auto loads = port_loads(18);
  std::mt19937 rng(13);
  bool first = true;
  for (const auto& w : vectors) {
    if (!first) weighted.set_weights(w);  // the first vector is the default
    first = false;
    std::map<uint16_t, int> per_port;
    constexpr int kFlows = 200'000;
    for (int i = 0; i < kFlows; ++i)
      ++per_port[weighted.select(hasher.hash(random_udp_key(rng)), 0, loads)];
    const double total = std::accumulate(w.begin(), w.end(), 0.0);
    for (size_t m = 0; m < w.size(); ++m) {
      INFO("member " << m << " weight " << w[m] << " table " << weighted.bucket_table().size());
      const double expected = kFlows * w[m] / total;
      if (w[m] == 0) {
        CHECK(per_port[kEight[m]] == 0);
      } else {
        CHECK(std::fabs(per_port[kEight[m]] - expected) <= 0.02 * expected);
      }
    }
  }
  CHECK(weighted.counters().rehashed_ineligible == 0);
}

TEST_CASE("weighted: an ineligible bucket member rehashes over the eligible ones") {
  PathSelector weighted(group(LbMode::kWeighted, {1, 2, 3}));
  weighted.set_weights(std::vector<uint32_t>{10, 10, 10});
  auto loads = port_loads(4);
  loads[2].eligible = false;
  std::mt19937 rng(14);
  std::map<uint16_t, int> per_port;
  for (int i = 0; i < 30'000; ++i) {
    const uint32_t h = rng();
    const uint16_t port = weighted.select(h, 0, loads);
    REQUIRE(port != 2);
    const uint16_t bucket_member = weighted.bucket_table().select(h);
    if (bucket_member != 1) REQUIRE(port == 1 + bucket_member);
    ++per_port[port];
  }
  CHECK(weighted.counters().rehashed_ineligible > 9000);
  CHECK(std::abs(per_port[1] - per_port[3]) < 1000);  // its share is split between the others

  // Every weight 0 (all paths saturated): still forwarded, by hash, and counted.
  weighted.set_weights(std::vector<uint32_t>{0, 0, 0});
  CHECK(weighted.bucket_table().empty());
  const uint16_t port = weighted.select(7, 0, loads);
  CHECK((port == 1 || port == 3));
  CHECK(weighted.counters().empty_table == 1);
}

TEST_CASE("DLB sends new flowlets away from a congested port and keeps active ones in place") {
  PathGroupConfig c = group(LbMode::kDlb, {4, 7, 2, 9});
  c.dlb_gap_ns = 100 * kUs;
  PathSelector dlb(c);
  auto loads = port_loads(10);
  loads[7].queued_bytes = 2'000'000;  // congested
  std::mt19937 rng(15);
  std::vector<uint32_t> hashes(3000);
  std::vector<uint16_t> placed(hashes.size());
  for (size_t i = 0; i < hashes.size(); ++i) {
    hashes[i] = rng();
    placed[i] = dlb.select(hashes[i], 0, loads);
    REQUIRE(placed[i] != 7);
    REQUIRE(placed[i] != PathSelector::kNoPort);
  }
  // Now port 2 congests. Flows that keep sending within the gap stay where they are...
  loads[2].queued_bytes = 5'000'000;
  loads[7].queued_bytes = 0;
  for (size_t i = 0; i < hashes.size(); ++i)
    REQUIRE(dlb.select(hashes[i], 80 * kUs, loads) == placed[i]);
  // ...and after a pause longer than the gap, their next flowlet avoids port 2.
  for (size_t i = 0; i < hashes.size(); ++i) REQUIRE(dlb.select(hashes[i], 181 * kUs, loads) != 2);
  CHECK(dlb.flowlet_table().counters().flowlets_moved > 0);
  CHECK(dlb.counters().selected == 3 * hashes.size());
}

TEST_CASE("DRILL prefers less-loaded members") {
  PathGroupConfig c = group(LbMode::kDrill, kEight);
  c.seed = 77;
  PathSelector drill(c);
  auto loads = port_loads(18);
  for (uint16_t p : kEight) loads[p].queued_bytes = 50'000;
  loads[15].queued_bytes = 1000;
  std::map<uint16_t, int> per_port;
  for (int i = 0; i < 2000; ++i) ++per_port[drill.select(0x1234, i * kUs, loads)];
  CHECK(per_port[15] > 1900);  // one flow, sprayed per packet onto the idle port
}

TEST_CASE("sprayed packets: a QP's path ids take the uplinks in proportion to the weights") {
  PathSelector spray(group(LbMode::kEcmp, kEight));
  const auto loads = port_loads(18);
  std::mt19937 rng(16);
  // Equal weights: path ids 0..15 of any QP land exactly twice on each of the eight uplinks.
  for (int qp = 0; qp < 1000; ++qp) {
    const uint32_t h = rng();
    std::map<uint16_t, int> per_port;
    for (uint8_t path = 0; path < 16; ++path) ++per_port[spray.select_sprayed(h, path, 0, loads)];
    REQUIRE(per_port.size() == 8);
    for (const auto& [port, n] : per_port) REQUIRE(n == 2);
  }
  CHECK(spray.counters().sprayed == 16000);
  CHECK(spray.counters().selected == 0);

  // 32:12 weights: over many QPs, packets split as the weights within 2%; each QP uses both.
  PathSelector two(group(LbMode::kDlb, {1, 2}));  // the mode does not matter for spraying
  two.set_weights(std::vector<uint32_t>{32, 12});
  std::map<uint16_t, int> per_port;
  constexpr int kQps = 10'000;
  for (int qp = 0; qp < kQps; ++qp) {
    const uint32_t h = rng();
    std::set<uint16_t> used;
    for (uint8_t path = 0; path < 16; ++path) {
      const uint16_t p = two.select_sprayed(h, path, 0, loads);
      ++per_port[p];
      used.insert(p);
    }
    REQUIRE(used.size() == 2);
  }
  const double expected_1 = kQps * 16 * 32.0 / 44, expected_2 = kQps * 16 * 12.0 / 44;
  CHECK(std::fabs(per_port[1] - expected_1) <= 0.02 * expected_1);
  CHECK(std::fabs(per_port[2] - expected_2) <= 0.02 * expected_2);

  // After a reweighting that grew the table by tiling (period 8), each QP still reaches
  // all eight uplinks: the stride is odd, so it does not alias with the tiling.
  PathSelector hot(group(LbMode::kEcmp, kEight));
  hot.set_weights(std::vector<uint32_t>{32, 32, 32, 32, 32, 32, 32, 12});
  REQUIRE(hot.bucket_table().size() > 8);
  std::map<uint16_t, int> hot_ports;
  constexpr int kHotQps = 20'000;
  for (int qp = 0; qp < kHotQps; ++qp) {
    const uint32_t h = rng();
    std::set<uint16_t> used;
    for (uint8_t path = 0; path < 16; ++path) {
      const uint16_t p = hot.select_sprayed(h, path, 0, loads);
      used.insert(p);
      ++hot_ports[p];
    }
    REQUIRE(used.size() >= 7);
  }
  const double hot_total = kHotQps * 16;
  CHECK(std::fabs(hot_ports[17] - hot_total * 12 / 236) <= 0.02 * hot_total * 12 / 236);
  CHECK(std::fabs(hot_ports[10] - hot_total * 32 / 236) <= 0.02 * hot_total * 32 / 236);

  // 8-bit path ids (path-high layout) spread just as well.
  std::map<uint16_t, int> wide;
  for (int path = 0; path < 256; ++path) ++wide[spray.select_sprayed(99, uint8_t(path), 0, loads)];
  for (const auto& [port, n] : wide) CHECK(n == 32);
}

TEST_CASE("sprayed packets: a divisor makes the group read the path id's next digit") {
  // A three-tier spine's up group: 4 super-spine links, the leaf below chose among 8 uplinks by
  // path id % 8, so the spine reads path id / 8.
  PathGroupConfig c = group(LbMode::kEcmp, {1, 2, 3, 4});
  c.spray_path_divisor = 8;
  PathSelector spine(c);
  PathSelector whole(group(LbMode::kEcmp, {1, 2, 3, 4}));
  const auto loads = port_loads(5);
  std::mt19937 rng(30);
  for (int qp = 0; qp < 1000; ++qp) {
    const uint32_t h = rng();
    // Ids 0..31, one per (leaf uplink, spine link): the ids of one leaf uplink (p % 8 fixed)
    // take the four links once each; ids with the same p / 8 take the same one.
    for (uint8_t low = 0; low < 8; ++low) {
      std::set<uint16_t> links, whole_links;
      for (uint8_t high = 0; high < 4; ++high) {
        const auto p = static_cast<uint8_t>(high * 8 + low);
        const uint16_t port = spine.select_sprayed(h, p, 0, loads);
        REQUIRE(port == spine.select_sprayed(h, static_cast<uint8_t>(high * 8), 0, loads));
        links.insert(port);
        whole_links.insert(whole.select_sprayed(h, p, 0, loads));
      }
      REQUIRE(links.size() == 4);
      // Without the divisor the group reads the same low bits the leaf chose by: the ids of
      // one leaf uplink all take one link (a relabelling of the leaf's choice).
      REQUIRE(whole_links.size() == 1);
    }
  }
  // 1 is the default and reads the whole id: the same choices as a group without it.
  PathGroupConfig one = group(LbMode::kEcmp, {1, 2, 3, 4});
  one.spray_path_divisor = 1;
  PathSelector same(one);
  for (int p = 0; p < 256; ++p) {
    REQUIRE(same.select_sprayed(77, uint8_t(p), 0, loads) ==
            whole.select_sprayed(77, uint8_t(p), 0, loads));
  }
  PathGroupConfig zero = group(LbMode::kEcmp, {1, 2});
  zero.spray_path_divisor = 0;
  CHECK_THROWS_WITH(PathSelector(zero), "path group: spray_path_divisor 0, allowed 1..256");
}

TEST_CASE("sprayed packets avoid ineligible uplinks and still spread") {
  PathSelector spray(group(LbMode::kEcmp, kEight));
  auto loads = port_loads(18);
  loads[12].eligible = false;
  loads[16].eligible = false;
  std::map<uint16_t, int> per_port;
  for (int qp = 0; qp < 500; ++qp) {
    for (uint8_t path = 0; path < 16; ++path) {
      const uint16_t p = spray.select_sprayed(qp * 2654435761u, path, 0, loads);
      REQUIRE(p != 12);
      REQUIRE(p != 16);
      ++per_port[p];
    }
  }
  CHECK(per_port.size() == 6);
  for (const auto& [port, n] : per_port) CHECK(std::abs(n - 8000 / 6) < 200);
  CHECK(spray.counters().rehashed_ineligible == 2000);  // two of the eight uplinks' share
}

TEST_CASE("ineligible ports are never chosen while an eligible one exists, in any mode") {
  std::mt19937 rng(17);
  for (LbMode mode : {LbMode::kEcmp, LbMode::kWeighted, LbMode::kDlb, LbMode::kDrill}) {
    PathGroupConfig c = group(mode, {0, 3, 5, 6, 8});
    c.dlb_table_entries = 64;
    PathSelector s(c);
    if (mode == LbMode::kWeighted) s.set_weights(std::vector<uint32_t>{32, 0, 12, 20, 32});
    auto loads = port_loads(9);
    uint64_t now = 0;
    for (int i = 0; i < 20'000; ++i) {
      now += rng() % (50 * kUs);
      bool any = false;
      for (uint16_t p : s.member_ports()) {
        loads[p].eligible = rng() % 3 == 0;
        loads[p].queued_bytes = rng() % 100'000;
        any |= loads[p].eligible;
      }
      const uint32_t h = rng() % 256;
      const uint16_t port = (i % 4 == 0) ? s.select_sprayed(h, uint8_t(rng() % 16), now, loads)
                                         : s.select(h, now, loads);
      INFO("mode " << to_string(mode));
      if (any) {
        REQUIRE(port < loads.size());
        REQUIRE(loads[port].eligible);
      } else {
        REQUIRE(port == PathSelector::kNoPort);
      }
    }
    CHECK(s.counters().no_eligible_port > 0);
  }
}

TEST_CASE("the mode changes at run time; a member beyond the loads is ineligible") {
  PathSelector s(group(LbMode::kEcmp, {0, 1}));
  auto loads = port_loads(2);
  loads[0].queued_bytes = 1'000'000;
  // A hash that ECMP puts on port 0 (0 % 2): DRILL moves it to the idle port.
  CHECK(s.select(0, 0, loads) == 0);
  s.set_mode(LbMode::kDrill);
  CHECK(s.mode() == LbMode::kDrill);
  CHECK(s.select(0, 1, loads) == 1);
  s.set_mode(LbMode::kEcmp);
  CHECK(s.select(0, 2, loads) == 0);

  // Port 5 has no entry in a 2-port loads array: counted and never chosen.
  PathSelector far(group(LbMode::kEcmp, {1, 5}));
  for (uint32_t h = 0; h < 10; ++h) CHECK(far.select(h, 0, loads) == 1);
  CHECK(far.counters().missing_load == 10);
  CHECK(far.select(0, 0, std::span<const PathLoad>{}) == PathSelector::kNoPort);
}

TEST_CASE("an excluded member takes nothing until it is let back, whatever its link says") {
  PathSelector ecmp(group(LbMode::kEcmp, kEight));
  const auto loads = port_loads(20);
  ecmp.set_member_excluded(3, true);
  CHECK(ecmp.member_excluded(3));
  std::mt19937 rng(5);
  std::map<uint16_t, int> per_port;
  for (int i = 0; i < 20000; ++i) ++per_port[ecmp.select(static_cast<uint32_t>(rng()), i, loads)];
  CHECK(per_port.count(kEight[3]) == 0);
  CHECK(per_port.size() == 7);
  ecmp.set_member_excluded(3, false);
  for (int i = 0; i < 20000; ++i) ++per_port[ecmp.select(static_cast<uint32_t>(rng()), i, loads)];
  CHECK(per_port.count(kEight[3]) == 1);
  CHECK_THROWS_AS(ecmp.set_member_excluded(8, true), std::out_of_range);
}

TEST_CASE("a replica follows its primary's bucket table and mode, and keeps its own counters") {
  PathSelector primary(group(LbMode::kEcmp, kEight)), replica(group(LbMode::kEcmp, kEight));
  CHECK_THROWS_AS(replica.follow(PathSelector(group(LbMode::kEcmp, {10, 11}))),
                  std::invalid_argument);
  replica.follow(primary);
  const auto loads = port_loads(18);
  // Weights published to the primary only: every bucket on member 5 (port 15).
  primary.set_mode(LbMode::kWeighted);
  primary.set_weights(std::vector<uint32_t>{0, 0, 0, 0, 0, 1, 0, 0});
  CHECK(replica.mode() == LbMode::kWeighted);
  CHECK(&replica.bucket_table() == &primary.bucket_table());
  std::mt19937 rng(3);
  for (int i = 0; i < 1000; ++i) CHECK(replica.select(rng(), 0, loads) == 15);
  CHECK(replica.counters().selected == 1000);
  CHECK(replica.member_packets()[5] == 1000);
  CHECK(primary.counters().selected == 0);  // the primary's counters are its own
  // A table published later is the replica's at once; a mode change too.
  primary.set_weights(std::vector<uint32_t>{1, 0, 0, 0, 0, 0, 0, 0});
  CHECK(replica.select(rng(), 1, loads) == 10);
  primary.set_mode(LbMode::kEcmp);
  CHECK(replica.mode() == LbMode::kEcmp);
  CHECK(replica.select(3, 2, loads) == kEight[3 % 8]);
}

TEST_CASE("ECMP by multiply-shift: (hash * N) >> 32 over the eligible members, spread within 3%") {
  const FlowHasher hasher({HashAlgorithm::kCrc32c, 7, false});
  PathGroupConfig c = group(LbMode::kEcmp, kEight);
  c.ecmp_multiply_shift = true;
  PathSelector ecmp(c);
  auto loads = port_loads(20);
  std::mt19937 rng(13);
  std::map<uint16_t, int> per_port;
  uint64_t differs_from_modulo = 0;
  constexpr int kFlows = 80'000;
  for (int i = 0; i < kFlows; ++i) {
    const FlowKey k = random_udp_key(rng);
    const uint32_t h = reference_flow_hash(k, 7);
    const uint16_t port = ecmp.select(hasher.hash(k), 0, loads);
    REQUIRE(port == kEight[(uint64_t{h} * 8) >> 32]);
    differs_from_modulo += port != kEight[h % 8];
    ++per_port[port];
  }
  for (const auto& [port, count] : per_port) CHECK(std::abs(count - kFlows / 8) <= 0.03 * kFlows / 8);
  CHECK(differs_from_modulo > kFlows / 2);  // another formula, not hash % N in disguise
  // One member down: the seven others by (hash * 7) >> 32, in member order.
  loads[13].eligible = false;
  const std::vector<uint16_t> up = {10, 11, 12, 14, 15, 16, 17};
  for (int i = 0; i < 10'000; ++i) {
    const FlowKey k = random_udp_key(rng);
    REQUIRE(ecmp.select(hasher.hash(k), 0, loads) == up[(uint64_t{reference_flow_hash(k, 7)} * 7) >> 32]);
  }
}
