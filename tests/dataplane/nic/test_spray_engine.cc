#include "dataplane/nic/spray_engine.h"

#include <catch2/catch.hpp>

#include <rte_mbuf.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <random>
#include <stdexcept>
#include <vector>

#include "dataplane/wire/icrc.h"
#include "dataplane/wire/packet_builder.h"
#include "dataplane/wire/packet_parser.h"
#include "tests/support/dpdk_test.h"

using namespace spraynet;
using spraynet::test::TestPool;

namespace {

constexpr uint16_t kNo = SprayEngine::kNoUplink;

SprayEngineConfig config(SprayMode mode, std::vector<uint8_t> path_ids,
                         PpcidLayout layout = PpcidLayout::kTsHigh) {
  SprayEngineConfig c;
  c.mode = mode;
  c.path_ids = std::move(path_ids);
  c.layout = layout;
  return c;
}

std::unique_ptr<const SprayWeights> weights(std::vector<uint32_t> w, uint64_t updated_ns = 0) {
  return std::make_unique<const SprayWeights>(SprayWeights{std::move(w), updated_ns});
}

std::vector<PathLoad> idle(size_t n) {
  return std::vector<PathLoad>(n);
}

// Picks `n` packets with loads fixed; returns the uplink of each.
std::vector<uint16_t> picks(SprayEngine& e, size_t n, std::span<const PathLoad> loads) {
  std::vector<uint16_t> out;
  for (size_t i = 0; i < n; ++i) out.push_back(e.pick(0x1234, i * 100, loads));
  return out;
}

// Checks the smooth-WRR property: after every prefix of k packets, each uplink's count is
// within one packet of k * w_i / W. Returns the largest deviation seen.
double check_smooth(SprayEngine& e, const std::vector<uint32_t>& w, size_t rounds) {
  const double total = std::accumulate(w.begin(), w.end(), 0.0);
  const auto loads = idle(w.size());
  std::vector<uint64_t> count(w.size(), 0);
  double worst = 0;
  const size_t n = static_cast<size_t>(total) * rounds;
  for (size_t k = 1; k <= n; ++k) {
    const uint16_t u = e.pick(0, k, loads);
    REQUIRE(u < w.size());
    REQUIRE(w[u] > 0);
    ++count[u];
    for (size_t i = 0; i < w.size(); ++i) {
      worst = std::max(worst, std::abs(double(count[i]) - double(k) * w[i] / total));
    }
  }
  // Whole rounds: exact shares.
  for (size_t i = 0; i < w.size(); ++i) CHECK(count[i] == w[i] * rounds);
  return worst;
}

}  // namespace

TEST_CASE("spray mode names parse and print") {
  for (SprayMode m :
       {SprayMode::kFlow, SprayMode::kRoundRobin, SprayMode::kWeighted, SprayMode::kAdaptive}) {
    CHECK(parse_spray_mode(to_string(m)) == m);
  }
  CHECK(to_string(SprayMode::kRoundRobin) == "rr");
  CHECK(parse_spray_mode("adaptive") == SprayMode::kAdaptive);
  CHECK_FALSE(parse_spray_mode("round-robin").has_value());
  CHECK_FALSE(parse_spray_mode("RR").has_value());
  CHECK(SprayEngineConfig{}.mode == SprayMode::kRoundRobin);
}

TEST_CASE("bad spray configs are refused with the reason") {
  CHECK_THROWS_AS(SprayEngine(config(SprayMode::kFlow, {})), std::invalid_argument);
  CHECK_THROWS_WITH(SprayEngine(config(SprayMode::kFlow, {})), Catch::Contains("no uplinks"));
  std::vector<uint8_t> seventeen(17);
  std::iota(seventeen.begin(), seventeen.end(), uint8_t{0});
  CHECK_THROWS_WITH(SprayEngine(config(SprayMode::kRoundRobin, seventeen, PpcidLayout::kPathHigh)),
                    Catch::Contains("17 uplinks, at most 16"));
  CHECK_THROWS_WITH(SprayEngine(config(SprayMode::kRoundRobin, {1, 2, 1})),
                    Catch::Contains("path id 1 given to uplinks 0 and 2"));
  CHECK_THROWS_WITH(
      SprayEngine(config(SprayMode::kRoundRobin, {1, 16})),
      Catch::Contains("path id 16 of uplink 1 does not fit the ts-high layout (0..15)"));
  CHECK(config(SprayMode::kRoundRobin, {1, 16}, PpcidLayout::kPathHigh).check().empty());
  CHECK(config(SprayMode::kRoundRobin, {0, 15}).check().empty());  // 0 is a path id like any
  std::vector<uint8_t> sixteen(16);
  std::iota(sixteen.begin(), sixteen.end(), uint8_t{0});
  CHECK_NOTHROW(SprayEngine(config(SprayMode::kRoundRobin, sixteen)));
}

TEST_CASE("rr: exactly even, in turn") {
  SprayEngine e(config(SprayMode::kRoundRobin, {1, 2, 3, 4}));
  const auto loads = idle(4);
  const auto seq = picks(e, 4000, loads);
  // One flow: its own turn, from wherever its flow slot starts.
  for (size_t i = 0; i < seq.size(); ++i) REQUIRE(seq[i] == (seq[0] + i) % 4);
  for (uint64_t n : e.uplink_packets()) CHECK(n == 1000);
  CHECK(e.counters().picked == 4000);
  CHECK(e.counters().no_eligible == 0);
  CHECK(e.counters().flow_picks == 0);
}

TEST_CASE("rr and weighted keep a turn per flow: 4 QPs interleaved one by one over 4 uplinks") {
  // With one turn for the whole NIC, QP i would always land on uplink i: every uplink busy and
  // no QP sprayed at all. Each QP must instead use every uplink equally.
  for (SprayMode mode : {SprayMode::kRoundRobin, SprayMode::kWeighted}) {
    INFO(to_string(mode));
    SprayEngine e(config(mode, {1, 2, 3, 4}));
    const auto loads = idle(4);
    const uint32_t qp_hash[4] = {0x9E3779B1u, 0x85EBCA77u, 0xC2B2AE3Du, 0x27D4EB2Fu};
    std::array<std::array<uint64_t, 4>, 4> per_qp{};
    for (int round = 0; round < 1000; ++round) {
      for (int q = 0; q < 4; ++q) ++per_qp[q][e.pick(qp_hash[q], 0, loads)];
    }
    for (const auto& q : per_qp) {
      for (uint64_t n : q) CHECK(n == 250);
    }
  }
}

TEST_CASE("an ineligible uplink is excluded at once and rejoins; none eligible gives kNoUplink") {
  for (SprayMode mode :
       {SprayMode::kFlow, SprayMode::kRoundRobin, SprayMode::kWeighted, SprayMode::kAdaptive}) {
    INFO(to_string(mode));
    SprayEngine e(config(mode, {1, 2, 3, 4}));
    auto loads = idle(4);
    e.pick(7, 0, loads);
    loads[2].eligible = false;  // down or paused
    std::vector<uint64_t> count(4, 0);
    for (uint32_t h = 0; h < 3000; ++h) {
      const uint16_t u = e.pick(h * 2654435761u, h, loads);
      REQUIRE(u < 4);
      REQUIRE(u != 2);
      ++count[u];
    }
    CHECK(count[0] > 800);
    CHECK(count[1] > 800);
    CHECK(count[3] > 800);

    loads[2].eligible = true;  // back: it takes traffic again from the next packets
    std::fill(count.begin(), count.end(), 0);
    for (uint32_t h = 0; h < 4000; ++h) ++count[e.pick(h * 2654435761u, h, loads)];
    for (uint64_t c : count) CHECK(c > 800);

    for (auto& l : loads) l.eligible = false;
    const uint64_t picked = e.counters().picked;
    CHECK(e.pick(1, 0, loads) == kNo);
    CHECK(e.pick_flow(1, loads) == kNo);
    CHECK(e.counters().no_eligible == 2);
    CHECK(e.counters().picked == picked);
  }
}

TEST_CASE("rr: a flow cycles through the eligible uplinks, evenly, as they come and go") {
  SprayEngine e(config(SprayMode::kRoundRobin, {1, 2, 3, 4}));
  auto loads = idle(4);
  loads[1].eligible = false;
  std::vector<uint64_t> count(4, 0);
  for (int i = 0; i < 300; ++i) ++count[e.pick(0x77, 0, loads)];
  CHECK(count == std::vector<uint64_t>{100, 0, 100, 100});
  loads[1].eligible = true;
  std::fill(count.begin(), count.end(), 0);
  for (int i = 0; i < 400; ++i) ++count[e.pick(0x77, 0, loads)];
  CHECK(count == std::vector<uint64_t>{100, 100, 100, 100});
}

TEST_CASE("loads shorter than the uplinks: the missing ones are ineligible") {
  SprayEngine e(config(SprayMode::kRoundRobin, {1, 2, 3}));
  const auto loads = idle(2);
  std::vector<uint64_t> count(3, 0);
  for (int i = 0; i < 10; ++i) ++count[e.pick(0, 0, loads)];
  CHECK(count == std::vector<uint64_t>{5, 5, 0});
  CHECK(e.counters().missing_load == 10);
  CHECK(e.pick(0, 0, {}) == kNo);
}

TEST_CASE("weighted: equal weights before any publish") {
  SprayEngine e(config(SprayMode::kWeighted, {1, 2, 3}));
  CHECK(e.weights().weights == std::vector<uint32_t>{1, 1, 1});
  CHECK(e.weights().updated_ns == 0);
  CHECK(check_smooth(e, {1, 1, 1}, 100) < 1.0);
}

TEST_CASE("weighted: smooth WRR, every prefix within one packet of the exact share") {
  // Weights as the control loop produces them (bucket counts out of 32), and nginx's example.
  const std::vector<std::vector<uint32_t>> cases = {
      {5, 1, 1},       {32, 12, 32, 32}, {3, 1},       {1, 0, 2},
      {32, 32, 32, 0}, {7, 11, 13},      {1, 2, 3, 4}, {32, 1, 1, 1},
  };
  for (const auto& w : cases) {
    INFO("weights " << Catch::Detail::stringify(w));
    std::vector<uint8_t> ids(w.size());
    std::iota(ids.begin(), ids.end(), uint8_t{1});
    SprayEngine engine(config(SprayMode::kWeighted, ids));
    engine.publish_weights(weights(w));
    CHECK(check_smooth(engine, w, 50) <= 1.0);
  }
}

TEST_CASE("weighted: nginx's sequence for 5:1:1") {
  SprayEngine e(config(SprayMode::kWeighted, {1, 2, 3}));
  e.publish_weights(weights({5, 1, 1}));
  const auto seq = picks(e, 7, idle(3));
  CHECK(seq == std::vector<uint16_t>{0, 0, 1, 0, 2, 0, 0});  // a a b a c a a
}

TEST_CASE("weighted: ineligible uplinks leave, zero weights fall back to rr") {
  SprayEngine e(config(SprayMode::kWeighted, {1, 2, 3, 4}));
  e.publish_weights(weights({3, 1, 0, 2}));
  auto loads = idle(4);
  std::vector<uint64_t> count(4, 0);
  for (int i = 0; i < 600; ++i) ++count[e.pick(0, 0, loads)];
  CHECK(count == std::vector<uint64_t>{300, 100, 0, 200});

  // Uplink 0 goes down: the others share by their weights from the next packet on.
  loads[0].eligible = false;
  std::fill(count.begin(), count.end(), 0);
  for (int i = 0; i < 300; ++i) ++count[e.pick(0, 0, loads)];
  CHECK(count == std::vector<uint64_t>{0, 100, 0, 200});

  // Only the weight-0 uplink is left: still forward, round robin over what is eligible.
  loads[1].eligible = false;
  loads[3].eligible = false;
  const uint64_t before = e.counters().weighted_rr_fallback;
  for (int i = 0; i < 10; ++i) CHECK(e.pick(0, 0, loads) == 2);
  CHECK(e.counters().weighted_rr_fallback == before + 10);

  e.publish_weights(weights({0, 0, 0, 0}));
  loads = idle(4);
  std::fill(count.begin(), count.end(), 0);
  for (int i = 0; i < 400; ++i) ++count[e.pick(0, 0, loads)];
  CHECK(count == std::vector<uint64_t>{100, 100, 100, 100});
}

TEST_CASE("weighted: a new table takes effect at the next packet") {
  SprayEngine e(config(SprayMode::kWeighted, {1, 2}));
  const auto loads = idle(2);
  e.publish_weights(weights({1, 0}));
  for (int i = 0; i < 5; ++i) CHECK(e.pick(0, 0, loads) == 0);
  e.publish_weights(weights({0, 1}));
  for (int i = 0; i < 5; ++i) CHECK(e.pick(0, 0, loads) == 1);
  CHECK(e.counters().weighted_restarts == 2);
}

TEST_CASE("publish_weights returns the previous table; a size mismatch throws") {
  SprayEngine e(config(SprayMode::kWeighted, {1, 2, 3}));
  const SprayWeights* initial = &e.weights();
  auto first = weights({1, 2, 3}, 1000);
  const SprayWeights* first_ptr = first.get();
  auto old = e.publish_weights(std::move(first));
  REQUIRE(old != nullptr);
  CHECK(old.get() == initial);
  CHECK(old->weights == std::vector<uint32_t>{1, 1, 1});
  CHECK(&e.weights() == first_ptr);

  auto old2 = e.publish_weights(weights({4, 5, 6}, 2000));
  CHECK(old2.get() == first_ptr);
  CHECK(old2->updated_ns == 1000);
  CHECK(e.weights().weights == std::vector<uint32_t>{4, 5, 6});

  CHECK_THROWS_AS(e.publish_weights(weights({1, 2})), std::invalid_argument);
  CHECK_THROWS_WITH(e.publish_weights(weights({1, 2, 3, 4})),
                    Catch::Contains("4 weights for 3 uplinks"));
  CHECK_THROWS_AS(e.publish_weights(nullptr), std::invalid_argument);
  CHECK(e.weights().weights == std::vector<uint32_t>{4, 5, 6});  // unchanged by the refusals
}

TEST_CASE("adaptive: the least queued uplink; equal loads spread in turn") {
  SprayEngine e(config(SprayMode::kAdaptive, {1, 2, 3, 4}));
  auto loads = idle(4);
  const auto seq = picks(e, 8, loads);
  CHECK(seq == std::vector<uint16_t>{0, 1, 2, 3, 0, 1, 2, 3});

  loads[0].queued_bytes = 5000;
  loads[1].queued_bytes = 3000;
  loads[2].queued_bytes = 100;
  loads[3].queued_bytes = 4000;
  for (int i = 0; i < 10; ++i) CHECK(e.pick(0, 0, loads) == 2);
  loads[2].eligible = false;  // the emptiest, but paused: the next least
  CHECK(e.pick(0, 0, loads) == 1);

  // Ties between two of four: each gets half, whichever the cursor.
  loads = idle(4);
  loads[0].queued_bytes = loads[3].queued_bytes = 9000;
  std::vector<uint64_t> count(4, 0);
  for (int i = 0; i < 1000; ++i) ++count[e.pick(0, 0, loads)];
  CHECK(count == std::vector<uint64_t>{0, 500, 500, 0});
}

TEST_CASE("adaptive: traffic follows queue depth (a slow uplink gets less)") {
  // Four uplinks draining at 4:2:1:1 units per step; each packet adds 1000 bytes where it goes.
  SprayEngine e(config(SprayMode::kAdaptive, {1, 2, 3, 4}));
  auto loads = idle(4);
  const uint64_t drain[4] = {4000, 2000, 1000, 1000};
  std::vector<uint64_t> count(4, 0);
  for (int step = 0; step < 2000; ++step) {
    for (int k = 0; k < 8; ++k) {  // 8 packets per step: the fabric is exactly full
      const uint16_t u = e.pick(0, 0, loads);
      loads[u].queued_bytes += 1000;
      ++count[u];
    }
    for (int i = 0; i < 4; ++i) loads[i].queued_bytes -= std::min(loads[i].queued_bytes, drain[i]);
  }
  const double total = 16000;
  CHECK(count[0] / total == Approx(0.5).margin(0.01));
  CHECK(count[1] / total == Approx(0.25).margin(0.01));
  CHECK(count[2] / total == Approx(0.125).margin(0.01));
  CHECK(count[3] / total == Approx(0.125).margin(0.01));
  for (const auto& l : loads) CHECK(l.queued_bytes <= 8000);  // no queue runs away
}

TEST_CASE("flow: stable per hash, even over many hashes, stable while the set is unchanged") {
  SprayEngine e(config(SprayMode::kFlow, {1, 2, 3, 4, 5, 6, 7, 8}));
  auto loads = idle(8);
  std::mt19937 rng(3);
  std::vector<uint32_t> hashes(40000);
  for (auto& h : hashes) h = rng();
  std::vector<uint16_t> first;
  std::vector<uint64_t> count(8, 0);
  for (uint32_t h : hashes) {
    first.push_back(e.pick(h, 0, loads));
    ++count[first.back()];
  }
  for (uint64_t c : count) CHECK(std::abs(double(c) - 5000.0) < 250.0);  // within 5%
  for (size_t i = 0; i < hashes.size(); ++i) REQUIRE(e.pick(hashes[i], i, loads) == first[i]);

  // Sequential hashes (QP numbers, ports) spread too.
  std::fill(count.begin(), count.end(), 0);
  for (uint32_t h = 0; h < 8000; ++h) ++count[e.pick(h, 0, loads)];
  for (uint64_t c : count) CHECK(std::abs(double(c) - 1000.0) < 100.0);

  // One uplink down: no flow goes there, and the survivors share evenly.
  loads[5].eligible = false;
  std::fill(count.begin(), count.end(), 0);
  for (uint32_t h : hashes) ++count[e.pick(h, 0, loads)];
  CHECK(count[5] == 0);
  for (int i = 0; i < 8; ++i) {
    if (i != 5) CHECK(std::abs(double(count[i]) - 40000.0 / 7) < 300.0);
  }
  // It comes back: every flow returns to where it was.
  loads[5].eligible = true;
  for (size_t i = 0; i < hashes.size(); ++i) REQUIRE(e.pick(hashes[i], i, loads) == first[i]);
}

TEST_CASE("pick_flow is by flow hash in every mode, and the seed salts it") {
  SprayEngineConfig c = config(SprayMode::kRoundRobin, {1, 2, 3, 4});
  SprayEngine rr(c);
  c.mode = SprayMode::kFlow;
  SprayEngine flow(c);
  c.seed = 99;
  SprayEngine other_seed(c);
  const auto loads = idle(4);
  int differ = 0;
  for (uint32_t h = 0; h < 1000; ++h) {
    const uint32_t hash = h * 0x01000193u;
    const uint16_t u = rr.pick_flow(hash, loads);
    CHECK(u == rr.pick_flow(hash, loads));
    CHECK(u == flow.pick(hash, 0, loads));
    differ += other_seed.pick(hash, 0, loads) != u;
  }
  CHECK(differ > 500);  // about 3/4 move under another seed
  CHECK(rr.counters().flow_picks == 2000);
  CHECK(rr.counters().picked == 0);
  uint64_t sum = 0;
  for (uint64_t n : rr.uplink_packets()) sum += n;
  CHECK(sum == 2000);
}

TEST_CASE("the mode can change at run time") {
  SprayEngine e(config(SprayMode::kFlow, {1, 2, 3}));
  const auto loads = idle(3);
  const uint16_t u = e.pick(42, 0, loads);
  for (int i = 0; i < 6; ++i) CHECK(e.pick(42, 0, loads) == u);
  e.set_mode(SprayMode::kRoundRobin);
  CHECK(e.mode() == SprayMode::kRoundRobin);
  std::vector<uint64_t> count(3, 0);
  for (int i = 0; i < 6; ++i) ++count[e.pick(42, 0, loads)];
  CHECK(count == std::vector<uint64_t>{2, 2, 2});
}

TEST_CASE("write_ppcid: round trip in both layouts, never 0, ICRC still valid") {
  TestPool pool(255);
  for (PpcidLayout layout : {PpcidLayout::kTsHigh, PpcidLayout::kPathHigh}) {
    INFO(to_string(layout));
    const std::vector<uint8_t> ids = layout == PpcidLayout::kTsHigh
                                         ? std::vector<uint8_t>{0, 5, 10, 15}
                                         : std::vector<uint8_t>{0, 17, 128, 255};
    SprayEngine e(config(SprayMode::kRoundRobin, ids, layout));
    e.publish_weights(weights({1, 1, 1, 1}, 5'000'000));
    PathIdSet known;
    for (uint8_t id : ids) known.set(id);
    const PacketParser verifying(ParseOptions{true, true});
    std::mt19937 rng(11);
    const std::vector<uint8_t> payload(256, 0xA5);
    for (int i = 0; i < 200; ++i) {
      FrameSpec fs;
      fs.ip.src = 0x0A000001;
      fs.ip.dst = 0x0A000002;
      fs.ip.tos = 26 << 2;
      fs.udp.src_port = static_cast<uint16_t>(0xC000 | (rng() & 0x3FFF));
      fs.eth.vlan = (i % 3 == 0);  // the field moves with the tag
      fs.payload = payload;
      RoceSpec rs;
      rs.opcode = (i % 2) ? opcode::kRcWriteOnly : opcode::kRcSendOnly;
      rs.dest_qp = (i % 5 == 0) ? 0x11 : (rng() & 0xFFFFFF);
      rs.psn = (i % 5 == 0) ? 0x11 : (rng() & 0xFFFFFF);  // DestQP == PSN: check nibble 0
      rs.ack_req = true;
      rs.dma_length = static_cast<uint32_t>(payload.size());
      rte_mbuf* m = build_roce_mbuf(pool.get(), fs, rs);
      REQUIRE(m != nullptr);
      ParsedPacket p;
      REQUIRE(verifying.parse(m, p) == ParseStatus::kOk);
      REQUIRE(p.udp_checksum == 0);

      const uint16_t uplink = e.pick(0, 0, idle(4));
      // Times before and at the update too: the timestamp hash is then 0 and the value must still
      // not be 0x0000 (path id 0 and check nibble 0 happen above).
      const uint64_t now = (i % 7 == 0) ? 4'000'000 : 5'000'000 + rng() % 1'000'000'000;
      const uint16_t v = e.write_ppcid(m, p, uplink, now);
      REQUIRE(v != 0);

      ParsedPacket q;
      REQUIRE(verifying.parse(m, q) == ParseStatus::kOk);  // the ICRC still verifies
      const uint8_t* data = rte_pktmbuf_mtod(m, const uint8_t*);
      CHECK(verify_icrc(data + q.l3_offset, q.ip_total_length));
      CHECK(q.udp_checksum == v);

      const PpcidFields f = ppcid_decode(v, layout);
      CHECK(f.path_id == ids[uplink]);
      CHECK(f.check == ppcid_check_nibble(rs.dest_qp, rs.psn));
      const uint64_t since = now > 5'000'000 ? now - 5'000'000 : 0;
      const uint8_t ts = ppcid_timestamp_hash(since, layout == PpcidLayout::kTsHigh ? 8 : 4);
      if (v != ppcid_encode(layout, 0, 0, 0, 0)) CHECK(f.timestamp == ts);
      CHECK(v == ppcid_encode(layout, ids[uplink], ts, rs.dest_qp, rs.psn));
      const PpcidReading r = ppcid_read(v, layout, q.dest_qp, q.psn, known);
      CHECK(r.verdict == PpcidVerdict::kOk);
      CHECK(r.path_id == ids[uplink]);
      rte_pktmbuf_free(m);
    }
    CHECK(e.counters().ppcid_written == 200);
    CHECK(e.counters().ppcid_refused == 0);
  }
  CHECK(pool.whole());
}

TEST_CASE("write_ppcid refuses what is not a sprayable RoCE packet") {
  TestPool pool(63);
  SprayEngine e(config(SprayMode::kRoundRobin, {1, 2}));
  const std::vector<uint8_t> payload(32, 1);
  FrameSpec fs;
  fs.ip.src = 0x0A000001;
  fs.ip.dst = 0x0A000002;
  fs.udp.src_port = 1000;
  fs.udp.dst_port = 53;
  fs.payload = payload;
  rte_mbuf* udp = build_udp_mbuf(pool.get(), fs);
  REQUIRE(udp != nullptr);
  ParsedPacket p;
  REQUIRE(PacketParser().parse(udp, p) == ParseStatus::kOk);
  REQUIRE(p.kind == PacketKind::kUdp);
  CHECK(e.write_ppcid(udp, p, 0, 0) == 0);
  CHECK(rte_pktmbuf_mtod(udp, const uint8_t*)[p.l4_offset + 6] == 0);  // untouched
  CHECK(rte_pktmbuf_mtod(udp, const uint8_t*)[p.l4_offset + 7] == 0);

  RoceSpec rs;
  rs.opcode = opcode::kRcSendOnly;
  rs.dest_qp = 0x11;
  rte_mbuf* roce = build_roce_mbuf(pool.get(), fs, rs);
  REQUIRE(roce != nullptr);
  REQUIRE(PacketParser().parse(roce, p) == ParseStatus::kOk);
  CHECK(e.write_ppcid(roce, p, 2, 0) == 0);  // not one of our uplinks
  CHECK(e.write_ppcid(roce, p, SprayEngine::kNoUplink, 0) == 0);
  ParsedPacket beyond = p;
  beyond.l4_offset = static_cast<uint16_t>(rte_pktmbuf_data_len(roce) - 4);
  CHECK(e.write_ppcid(roce, beyond, 0, 0) == 0);  // the field would lie past the data
  CHECK(e.counters().ppcid_refused == 4);
  CHECK(e.counters().ppcid_written == 0);
  CHECK(e.write_ppcid(roce, p, 1, 0) != 0);
  CHECK(e.counters().ppcid_written == 1);
  rte_pktmbuf_free(udp);
  rte_pktmbuf_free(roce);
  CHECK(pool.whole());
}

TEST_CASE("fabric_paths: one uplink, the PPCID cycles each flow through every fabric path") {
  TestPool pool(255);
  SprayEngineConfig c = config(SprayMode::kRoundRobin, {0}, PpcidLayout::kTsHigh);
  c.fabric_paths = 17;  // ts-high holds 16 path ids
  CHECK_THROWS_AS(SprayEngine(c), std::invalid_argument);
  c.fabric_paths = 16;
  SprayEngine e(c);
  const PacketParser parser;
  const std::vector<uint8_t> payload(64, 1);
  std::map<uint32_t, std::vector<int>> per_flow;  // flow hash -> packets per path id
  for (uint32_t flow : {7u, 1234567u}) {
    per_flow[flow].assign(16, 0);
    for (int i = 0; i < 64; ++i) {
      FrameSpec fs;
      fs.payload = payload;
      RoceSpec rs;
      rs.opcode = opcode::kRcWriteMiddle;
      rs.dest_qp = 0x11;
      rs.psn = static_cast<uint32_t>(i);
      rte_mbuf* m = build_roce_mbuf(pool.get(), fs, rs);
      REQUIRE(m != nullptr);
      ParsedPacket p;
      REQUIRE(parser.parse(m, p) == ParseStatus::kOk);
      const uint16_t v = e.write_ppcid(m, p, 0, flow, 1000);
      REQUIRE(v != 0);
      const PpcidFields f = ppcid_decode(v, PpcidLayout::kTsHigh);
      CHECK(f.check == ppcid_check_nibble(rs.dest_qp, rs.psn));
      ++per_flow[flow][f.path_id];
      rte_pktmbuf_free(m);
    }
  }
  for (const auto& [flow, counts] : per_flow) {
    INFO("flow " << flow);
    CHECK(counts == std::vector<int>(16, 4));  // 64 packets: each of the 16 paths 4 times
  }
  CHECK(pool.whole());
}
