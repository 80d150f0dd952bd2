// The NIC node: spraying with PPCIDs on TX, PPCID reading, reordering and checksum restore on
// RX; its accounting identity after every call of two long mixed scenarios; and two NIC nodes
// joined by four emulated paths of different delays, with the RC traffic engine at both ends, in
// virtual time: spraying with the reorder engine retransmits almost nothing, spraying without it
// retransmits a lot, flow mode never reorders, out-of-order placement retransmits nothing and waits
// for no hold, and resends exactly a lost packet.
#include "nic_emu/nic_node.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "control/nic_config.h"
#include "dataplane/wire/icrc.h"
#include "dataplane/wire/int_header.h"
#include "dataplane/wire/packet_builder.h"
#include "dataplane/wire/pfc_frame.h"
#include "dataplane/wire/ppcid.h"
#include "tests/support/dpdk_test.h"

using namespace spraynet;
using nic_emu::NicNode;

namespace {

// Four uplinks with the path ids 1..4 (both ends of a cable carry the same id) and delays
// 2, 4, 6, 8 us at 100 Gbit/s: consecutive packets sprayed round robin overtake one another.
// With equal_delays every path takes 8 us: spraying reorders nothing.
std::string pair_yaml(const std::string& name, const std::string& mode, const std::string& receive,
                      const std::string& role, uint32_t first_qp, uint32_t peer_qp,
                      uint64_t messages, double loss_on_path3 = 0, bool equal_delays = false,
                      const std::string& op = "write") {
  std::string y = "nic:\n  name: " + name + "\n  uplinks:\n";
  for (int i = 0; i < 4; ++i) {
    y += "    - {name: up" + std::to_string(i) + ", device: x, path_id: " + std::to_string(i + 1) +
         ", link: {rate_gbps: 100, delay_ns: " +
         std::to_string(equal_delays ? 8000 : 2000 * (i + 1)) +
         (i == 3 && loss_on_path3 > 0 ? ", loss: " + std::to_string(loss_on_path3) : "") + "}}\n";
  }
  y += "  spray: {mode: " + mode + "}\n";
  y += "  receive: " + receive + "\n";
  y += "  rc_engine: {qps: 4, role: " + role + ", op: " + op +
       ", message_bytes: 65536, mtu: 1024, " +
       "max_in_flight: 128, messages: " + std::to_string(messages) +
       ", first_qp: " + std::to_string(first_qp) + ", peer_first_qp: " + std::to_string(peer_qp) +
       (name == "a" ? ", local_ip: 10.0.0.1, peer_ip: 10.0.0.2"
                    : ", local_ip: 10.0.0.2, peer_ip: 10.0.0.1") +
       "}\n";
  return y;
}

control::NicConfig load(const std::string& yaml) {
  return control::parse_nic_config(control::ConfigNode::load_string(yaml, "nic.yaml"));
}

struct PairResult {
  uint64_t sent = 0;
  uint64_t retransmitted = 0;
  uint64_t naks = 0;
  uint64_t messages = 0;
  uint64_t out_of_order_dropped = 0;
  uint64_t reordered = 0;  // held then released by B's reorder engine (first-packet learning too)
  uint64_t ppcid_ok = 0;
  uint64_t ppcid_wrong_uplink = 0;
  uint64_t timeouts = 0;          // A's retransmit timer fired
  uint64_t gap_timeouts = 0;      // B's reorder engine gave up on a gap
  uint64_t lost = 0;              // frames the lossy path lost
  uint64_t resyncs = 0;           // B's reorder engine restarted a sequence at a retransmission
  uint64_t placed_out_of_order = 0;  // B's placement responders
  uint64_t holes_naked = 0;
  uint64_t window_overflows = 0;
  uint64_t completion_max_ns = 0;  // A's message completion times
  double completion_mean_ns = 0;
  // With drop_nth: the WRITE the test dropped (QP, PSN) and how often each (QP, PSN) crossed.
  std::pair<uint32_t, uint32_t> dropped{0, 0};
  std::map<std::pair<uint32_t, uint32_t>, uint32_t> sends;
  // READs: A's requesters and reorder engine (which orders the READ responses coming back).
  uint64_t read_requests = 0;
  uint64_t read_responses = 0;     // accepted by A's requesters
  uint64_t read_out_of_order = 0;  // dropped by A's requesters after a PSN gap
  uint64_t read_retries = 0;
  uint64_t read_ranges_noted = 0;         // A's TX told its reorder engine
  uint64_t read_responses_reordered = 0;  // held and released in order by A's reorder engine
  uint64_t a_gap_timeouts = 0;
  uint64_t b_read_requests_sequenced = 0;  // B's reorder engine: READ requests, N PSNs each
  bool done = false;
  std::vector<std::array<uint64_t, 4>> heat;  // B's arrivals per QP per uplink
};

// Runs A (requesters) and B (responders) until A's messages are all acknowledged or the
// virtual-time bound passes, carrying frames that crossed each path to the other node. With
// drop_nth > 0 the drop_nth-th WRITE from A to B is freed instead of delivered (one lost packet).
PairResult run_pair(const std::string& mode, const std::string& receive, uint64_t messages,
                    double loss = 0, bool equal_delays = false, uint64_t drop_nth = 0,
                    const std::string& op = "write") {
  test::TestPool pool(16383, 4096 + 512);
  PairResult r;
  {
    NicNode a(load(pair_yaml("a", mode, receive, "requester", 0x100, 0x200, messages, loss,
                             equal_delays, op)),
              pool.get());
    NicNode b(load(pair_yaml("b", mode, receive, "responder", 0x200, 0x100, messages, 0,
                             equal_delays, op)),
              pool.get());
    uint64_t writes = 0;
    const PacketParser parser;
    rte_mbuf* buf[64];
    uint64_t now = 0;
    const uint64_t bound = 2'000'000'000;  // 2 s of virtual time
    while (!a.rc_engine()->done() && now < bound) {
      a.poll(now);
      b.poll(now);
      for (uint16_t u = 0; u < 4; ++u) {
        while (uint16_t n = a.transmit(u, now, buf, 64)) {
          uint16_t kept = 0;
          for (uint16_t i = 0; i < n; ++i) {
            ParsedPacket p;
            if (parser.parse(buf[i], p) == ParseStatus::kOk && p.kind == PacketKind::kRoce &&
                p.bth_opcode != opcode::kRcAck) {
              const std::pair<uint32_t, uint32_t> key{p.dest_qp, p.psn};
              ++r.sends[key];
              if (++writes == drop_nth) {
                r.dropped = key;
                rte_pktmbuf_free(buf[i]);
                continue;
              }
            }
            buf[kept++] = buf[i];
          }
          if (kept > 0) b.receive(u, buf, kept, now);
        }
        while (uint16_t n = b.transmit(u, now, buf, 64)) a.receive(u, buf, n, now);
      }
      const uint64_t next = std::min(a.next_event_ns(now), b.next_event_ns(now));
      now = std::max(next, now + 1);
    }
    r.done = a.rc_engine()->done();
    const auto req = a.rc_engine()->requester_totals();
    r.timeouts = req.timeouts;
    r.read_requests = req.read_requests_sent;
    r.read_responses = req.read_responses_accepted;
    r.read_out_of_order = req.read_responses_out_of_order;
    r.read_retries = req.read_retries;
    r.read_ranges_noted = a.counters().read_ranges_noted;
    if (a.reorder()) {
      r.read_responses_reordered = a.reorder()->counters().read_responses_reordered;
      r.a_gap_timeouts = a.reorder()->counters().gap_timeouts;
    }
    if (b.reorder()) r.b_read_requests_sequenced = b.reorder()->counters().read_requests;
    if (b.reorder()) {
      r.gap_timeouts = b.reorder()->counters().gap_timeouts;
      r.resyncs = b.reorder()->counters().resyncs;
    }
    for (uint8_t tc = 0; tc < 8; ++tc) r.lost += a.egress(3).counters(tc, now).drops_loss;
    const auto resp = b.rc_engine()->responder_totals();
    const auto place = b.rc_engine()->placement_totals();
    r.placed_out_of_order = place.placed_out_of_order;
    r.holes_naked = place.holes_naked;
    r.window_overflows = place.window_overflows;
    r.completion_max_ns = a.rc_engine()->completion_times().max_ns();
    r.completion_mean_ns = a.rc_engine()->completion_times().mean_ns();
    r.sent = req.packets_sent;
    r.retransmitted = req.packets_retransmitted;
    r.naks = req.naks_received;
    r.messages = req.messages_completed;
    r.out_of_order_dropped = resp.out_of_order_dropped;
    if (b.reorder()) r.reordered = b.reorder()->counters().released_after_hold;
    r.ppcid_ok = b.ppcid_counters().ok;
    r.ppcid_wrong_uplink = b.ppcid_counters().wrong_uplink;
    const nic_emu::QpHeatMap& heat = b.heat_map();
    for (size_t i = 0; i < heat.size(); ++i) {
      const uint32_t qp = heat.entries()[i].dest_qp;
      const auto n = heat.per_uplink(i);
      if (qp >= 0x200 && qp < 0x204) r.heat.push_back({n[0], n[1], n[2], n[3]});
    }
    a.free_all();
    b.free_all();
  }
  CHECK(pool.whole());
  return r;
}

}  // namespace

TEST_CASE("two NICs, 4 paths of different delays: spraying with reorder retransmits < 0.1%") {
  const PairResult r = run_pair("rr", "reorder-buffer", 40);
  INFO("sent " << r.sent << " retransmitted " << r.retransmitted << " naks " << r.naks);
  REQUIRE(r.done);
  CHECK(r.messages == 4 * 40);
  CHECK(r.sent >= 4 * 40 * 64);
  CHECK(static_cast<double>(r.retransmitted) < 0.001 * static_cast<double>(r.sent));
  CHECK(r.reordered > 0);  // there was reordering to undo
  CHECK(r.ppcid_ok > 0);
  CHECK(r.ppcid_wrong_uplink == 0);
  // Every QP's packets arrived over all four paths, and the paths carried within 2% of even
  // (round robin is per NIC, so one QP's share per path varies a little with the interleaving).
  REQUIRE(r.heat.size() == 4);
  std::array<uint64_t, 4> per_path{};
  uint64_t total = 0;
  for (const auto& q : r.heat) {
    for (size_t u = 0; u < 4; ++u) {
      CHECK(q[u] > 0);
      per_path[u] += q[u];
      total += q[u];
    }
  }
  for (uint64_t v : per_path) CHECK(std::abs(static_cast<double>(v) - total / 4.0) <= 0.02 * total);
}

TEST_CASE("two NICs, 4 paths of different delays: spraying without reorder retransmits > 5%") {
  const PairResult r = run_pair("rr", "none", 40);
  INFO("sent " << r.sent << " retransmitted " << r.retransmitted << " naks " << r.naks);
  CHECK(r.messages > 0);
  CHECK(r.naks > 0);
  CHECK(r.out_of_order_dropped > 0);
  CHECK(static_cast<double>(r.retransmitted) > 0.05 * static_cast<double>(r.sent));
}

TEST_CASE("two NICs, a lossy path: the reorder engine gives up the gap, the retransmission "
          "is put in order, no QP waits for its retransmit timer") {
  // One path loses 1 frame in 500. Each loss is a gap the reorder engine holds for 100 us and
  // then gives up; the responder NAKs, and the go-back-N retransmission (sprayed again) must
  // reach it in order, or each loss cascades into a 67 ms retransmit timeout.
  const PairResult r = run_pair("rr", "reorder-buffer", 40, 0.002);
  INFO("sent " << r.sent << " retransmitted " << r.retransmitted << " naks " << r.naks
               << " timeouts " << r.timeouts << " gap timeouts " << r.gap_timeouts << " lost "
               << r.lost << " resyncs " << r.resyncs);
  REQUIRE(r.done);
  CHECK(r.lost > 0);
  CHECK(r.gap_timeouts > 0);
  CHECK(r.naks > 0);
  CHECK(r.timeouts == 0);  // before: 116 timeouts, and the run did not finish in 2 s
  CHECK(r.resyncs > 0);    // the retransmissions restarted the receiver's sequence
}

TEST_CASE("two NICs, 4 paths: sprayed READ responses are put in order at the requester's NIC") {
  // A reads 40 x 64 KiB per QP from B: one READ REQUEST (64 PSNs) per message, 64 READ
  // RESPONSE packets back, sprayed over the four paths. A's NIC notes each READ's PSN range as
  // it leaves, so the responses it receives are held and released in PSN order; B's NIC counts
  // each READ request as 64 PSNs, so the next request is never held as if 63 PSNs were missing.
  const PairResult r = run_pair("rr", "reorder-buffer", 40, 0, false, 0, "read");
  INFO("read requests " << r.read_requests << " responses " << r.read_responses << " out of order "
                        << r.read_out_of_order << " reordered " << r.read_responses_reordered
                        << " retransmitted " << r.retransmitted << " A gap timeouts "
                        << r.a_gap_timeouts << " B gap timeouts " << r.gap_timeouts);
  REQUIRE(r.done);
  CHECK(r.messages == 4 * 40);
  CHECK(r.read_requests == 4 * 40);
  CHECK(r.read_ranges_noted == 4 * 40);
  CHECK(r.read_responses == 4 * 40 * 64);
  CHECK(r.retransmitted == 0);
  CHECK(r.read_out_of_order == 0);
  CHECK(r.read_retries == 0);
  CHECK(r.timeouts == 0);
  CHECK(r.read_responses_reordered > 0);  // there was reordering to undo
  CHECK(r.a_gap_timeouts == 0);           // no response waited out a hold
  CHECK(r.gap_timeouts == 0);             // no request after a READ waited out a hold at B
  CHECK(r.b_read_requests_sequenced == 4 * 40);
}

TEST_CASE("two NICs, 4 paths: sprayed READs without reorder lose responses to rxe's completer") {
  const PairResult r = run_pair("rr", "none", 10, 0, false, 0, "read");
  INFO("responses " << r.read_responses << " out of order " << r.read_out_of_order << " retries "
                    << r.read_retries << " retransmitted " << r.retransmitted);
  CHECK(r.read_out_of_order > 0);
  CHECK(r.read_retries > 0);
  CHECK(r.retransmitted > 0);
}

TEST_CASE("two NICs, flow mode: each QP on one path, nothing reordered, nothing retransmitted") {
  const PairResult r = run_pair("flow", "none", 40);
  INFO("sent " << r.sent << " retransmitted " << r.retransmitted << " naks " << r.naks);
  REQUIRE(r.done);
  CHECK(r.retransmitted == 0);
  CHECK(r.naks == 0);
  CHECK(r.out_of_order_dropped == 0);
  for (const auto& q : r.heat) {
    CHECK(std::count_if(q.begin(), q.end(), [](uint64_t v) { return v > 0; }) == 1);
  }
}

TEST_CASE(
    "two NICs, 4 paths of different delays, ooo-placement: nothing retransmitted, no "
    "hold: messages complete as fast as over 4 equal paths that reorder nothing") {
  const PairResult r = run_pair("rr", "ooo-placement", 40);
  INFO("sent " << r.sent << " retransmitted " << r.retransmitted << " naks " << r.naks
               << " placed out of order " << r.placed_out_of_order << " completion max "
               << r.completion_max_ns << " mean " << r.completion_mean_ns);
  REQUIRE(r.done);
  CHECK(r.messages == 4 * 40);
  CHECK(r.retransmitted == 0);
  CHECK(r.naks == 0);
  CHECK(r.timeouts == 0);
  CHECK(r.holes_naked == 0);
  CHECK(r.window_overflows == 0);
  CHECK(r.placed_out_of_order > 0);  // the reordering was there, and placed as it came
  CHECK(r.reordered == 0);           // no reorder engine
  CHECK(r.out_of_order_dropped == 0);

  // The same traffic over four 8 us paths, placed the same way: its slowest path is as slow as
  // the reordering run's slowest, the others are faster, so if reordering cost placement any
  // waiting it would show here. The reorder engine instead holds each QP's first packet for its
  // 100 us hold time (it is not told the first PSNs here), and every gap until it fills.
  const PairResult flat = run_pair("rr", "ooo-placement", 40, 0, true);
  INFO("equal paths: completion max " << flat.completion_max_ns << " mean "
                                      << flat.completion_mean_ns << " retx " << flat.retransmitted);
  REQUIRE(flat.done);
  CHECK(flat.retransmitted == 0);
  CHECK(r.completion_mean_ns <= flat.completion_mean_ns);
  CHECK(r.completion_max_ns <= flat.completion_max_ns);
  const PairResult held = run_pair("rr", "reorder-buffer", 40);
  INFO("reorder-buffer: completion max " << held.completion_max_ns << " mean "
                                         << held.completion_mean_ns);
  CHECK(held.completion_max_ns >= 100'000);
  CHECK(r.completion_max_ns < 50'000);
  CHECK(r.completion_mean_ns < held.completion_mean_ns);
}

TEST_CASE("two NICs, ooo-placement, one lost packet: exactly the missing PSN is resent, once") {
  // The 1000th WRITE from A to B is lost: the 16th message of some QP is in flight. B places
  // everything after it, NAKs the hole after nak_delay (100 us), and A resends that PSN alone.
  const PairResult r = run_pair("rr", "ooo-placement", 40, 0, false, 1000);
  INFO("sent " << r.sent << " retransmitted " << r.retransmitted << " naks " << r.naks
               << " timeouts " << r.timeouts << " dropped qp " << r.dropped.first << " psn "
               << r.dropped.second);
  REQUIRE(r.done);
  CHECK(r.messages == 4 * 40);
  REQUIRE(r.dropped.first != 0);
  CHECK(r.retransmitted == 1);
  CHECK(r.naks == 1);
  CHECK(r.holes_naked == 1);
  CHECK(r.timeouts == 0);
  // Every (QP, PSN) crossed exactly once, the dropped one twice: its retransmission.
  uint64_t twice = 0;
  for (const auto& [key, n] : r.sends) {
    if (key == r.dropped) {
      CHECK(n == 2);
    } else {
      CHECK(n == 1);
    }
    twice += n == 2 ? 1 : 0;
  }
  CHECK(twice == 1);
  CHECK(r.sends.size() == 4 * 40 * 64);
}

TEST_CASE("two NICs, rxe (receive none), the same lost packet: go-back-N resends far more") {
  const PairResult r = run_pair("flow", "none", 40, 0, false, 1000);
  INFO("retransmitted " << r.retransmitted);
  REQUIRE(r.done);
  CHECK(r.retransmitted > 1);
}

namespace {

const char* kHostYaml = R"(
nic:
  name: h
  host: {name: host, device: x}
  uplinks:
    - {name: up0, device: x, path_id: 1}
    - {name: up1, device: x, path_id: 2}
    - {name: up2, device: x, path_id: 3}
    - {name: up3, device: x, path_id: 4}
  spray: {mode: rr}
)";

bool icrc_ok(const rte_mbuf* m) {
  ParsedPacket p;
  if (PacketParser().parse(m, p) != ParseStatus::kOk) return false;
  return verify_icrc(rte_pktmbuf_mtod(m, const uint8_t*) + p.l3_offset, p.ip_total_length);
}

rte_mbuf* roce_packet(const test::TestPool& pool, uint32_t qp, uint32_t psn) {
  static const std::vector<uint8_t> payload(256, 0x42);
  FrameSpec f;
  f.ip.src = 0x0A000001;
  f.ip.dst = 0x0A000002;
  f.ip.tos = 26 << 2;
  f.udp.src_port = 0xC000 | static_cast<uint16_t>(qp);
  f.payload = payload;
  RoceSpec r;
  r.opcode = opcode::kRcWriteMiddle;
  r.dest_qp = qp;
  r.psn = psn;
  rte_mbuf* m = build_roce_mbuf(pool.get(), f, r);
  REQUIRE(m != nullptr);
  return m;
}

// Which uplink each of `n` packets of one QP left by (drains every uplink after each packet).
std::vector<int> send_from_host(NicNode& nic, const test::TestPool& pool, int n, uint32_t& psn,
                                uint64_t now) {
  std::vector<int> out;
  rte_mbuf* buf[8];
  for (int i = 0; i < n; ++i) {
    rte_mbuf* m = roce_packet(pool, 0x33, psn++);
    nic.receive(nic.host_port(), &m, 1, now);
    for (uint16_t u = 0; u < 4; ++u) {
      while (uint16_t k = nic.transmit(u, now + 1'000'000, buf, 8)) {
        for (uint16_t j = 0; j < k; ++j) {
          ParsedPacket p;
          REQUIRE(PacketParser().parse(buf[j], p) == ParseStatus::kOk);
          // The PPCID names the uplink: ts-high, bits 7-4.
          CHECK(((p.udp_checksum >> 4) & 0xF) == u + 1);
          CHECK(icrc_ok(buf[j]));
          rte_pktmbuf_free(buf[j]);
          out.push_back(u);
        }
      }
    }
  }
  return out;
}

}  // namespace

TEST_CASE(
    "a PFC pause from the fabric takes an uplink out of spraying at once; XON brings it back") {
  test::TestPool pool(2047);
  {
    NicNode nic(load(kHostYaml), pool.get());
    uint32_t psn = 100;
    uint64_t now = 1'000'000;
    auto used = send_from_host(nic, pool, 8, psn, now);
    CHECK(std::count(used.begin(), used.end(), 1) == 2);

    // XOFF on every priority of uplink 1, as a leaf whose buffer is full sends it.
    PfcFrame pause;
    pause.class_enable = 0xFF;
    pause.quanta.fill(0xFFFF);
    const uint8_t src[6] = {0x02, 0, 0, 0, 0, 0x99};
    rte_mbuf* f = pool.alloc();
    REQUIRE(build_pfc_frame(f, src, pause));
    nic.receive(1, &f, 1, now);
    CHECK(nic.counters().pfc_received == 1);
    used = send_from_host(nic, pool, 30, psn, now + 10);
    CHECK(std::count(used.begin(), used.end(), 1) == 0);
    CHECK(used.size() == 30);

    // XON: back in the rotation.
    PfcFrame xon;
    xon.class_enable = 0xFF;
    f = pool.alloc();
    REQUIRE(build_pfc_frame(f, src, xon));
    nic.receive(1, &f, 1, now + 20);
    used = send_from_host(nic, pool, 8, psn, now + 30);
    CHECK(std::count(used.begin(), used.end(), 1) == 2);
    CHECK(nic.total_drops() == 0);
    CHECK(nic.port_counters(nic.host_port()).tx_packets == 0);  // PFC never reaches the host
  }
  CHECK(pool.whole());
}

TEST_CASE("RX: the PPCID is read and counted, the UDP checksum restored to 0, the host gets it") {
  test::TestPool pool(2047);
  {
    NicNode nic(load(kHostYaml), pool.get());
    // A packet sprayed over path 3 by a peer NIC: PPCID written as the peer would.
    rte_mbuf* m = roce_packet(pool, 0x44, 7);
    ParsedPacket p;
    REQUIRE(PacketParser().parse(m, p) == ParseStatus::kOk);
    const uint16_t ppcid = ppcid_encode(PpcidLayout::kTsHigh, 3, 0x5A, 0x44, 7);
    rte_pktmbuf_mtod_offset(m, uint8_t*, p.l4_offset)[6] = static_cast<uint8_t>(ppcid >> 8);
    rte_pktmbuf_mtod_offset(m, uint8_t*, p.l4_offset)[7] = static_cast<uint8_t>(ppcid);
    nic.receive(2, &m, 1, 0);  // up2 carries path 3
    // A new QP's first packet waits one hold time (the start PSN is learnt).
    nic.poll(nic.next_event_ns(0));
    rte_mbuf* out[4];
    const uint16_t n = nic.transmit(nic.host_port(), 1'000'000'000, out, 4);
    REQUIRE(n == 1);
    ParsedPacket q;
    REQUIRE(PacketParser().parse(out[0], q) == ParseStatus::kOk);
    CHECK(q.udp_checksum == 0);
    CHECK(icrc_ok(out[0]));
    rte_pktmbuf_free(out[0]);
    CHECK(nic.ppcid_counters().ok == 1);
    CHECK(nic.ppcid_counters().wrong_uplink == 0);
    CHECK(nic.path_arrivals()[3] == 1);
    CHECK(nic.heat_map().size() == 1);
    CHECK(nic.heat_map().per_uplink(0)[2] == 1);
  }
  CHECK(pool.whole());
}

namespace {

// The accounting terms each scenario reached, over every check.
struct TermsSeen {
  bool generated = false, consumed = false, pipeline_dropped = false, reorder_dropped = false,
       reorder_held = false, refused = false, lost = false, dequeued = false, queued = false;
  void see(const nic_emu::NicAccounting& a) {
    generated = generated || a.generated > 0;
    consumed = consumed || a.consumed > 0;
    pipeline_dropped = pipeline_dropped || a.pipeline_dropped > 0;
    reorder_dropped = reorder_dropped || a.reorder_dropped > 0;
    reorder_held = reorder_held || a.reorder_held > 0;
    refused = refused || a.egress.refused > 0;
    lost = lost || a.egress.lost > 0;
    dequeued = dequeued || a.egress.dequeued > 0;
    queued = queued || a.egress.queued + a.egress.in_flight > 0;
  }
};

void check_balanced(const NicNode& n, const char* what, uint64_t step, TermsSeen& seen) {
  const nic_emu::NicAccounting a = n.accounting();
  INFO(n.config().name << " " << what << " at step " << step << ": received " << a.received
                       << " generated " << a.generated << " consumed " << a.consumed << " dropped "
                       << a.pipeline_dropped << " reorder dropped " << a.reorder_dropped << " held "
                       << a.reorder_held << " freed " << a.freed_at_shutdown << " offered "
                       << a.egress.offered << " | refused " << a.egress.refused << " dequeued "
                       << a.egress.dequeued << " lost " << a.egress.lost << " queued "
                       << a.egress.queued << " in flight " << a.egress.in_flight << " | reorder in "
                       << a.reorder_in << " released " << a.reorder_released);
  REQUIRE(a.node_balanced());
  REQUIRE(a.reorder_balanced());
  REQUIRE(a.egress.balanced());
  REQUIRE(a.balanced());
  seen.see(a);
}

// Something hostile for `port`: a cut-short IPv4 header, a PFC frame (honoured, or malformed),
// an 802.3x PAUSE, a non-IPv4 frame, or a RoCE packet of a QP nobody has at a random PSN.
rte_mbuf* odd_frame(const test::TestPool& pool, std::mt19937& rng) {
  const unsigned kind = rng() % 5;
  rte_mbuf* m = roce_packet(pool, 0x700 + rng() % 4, rng() % 64);
  if (kind == 0) {
    rte_pktmbuf_trim(m, rte_pktmbuf_pkt_len(m) - 20);
  } else if (kind == 1 || kind == 2) {
    rte_pktmbuf_reset(m);
    PfcFrame f;
    f.class_enable = 0xFF;
    f.quanta.fill(static_cast<uint16_t>(rng() % 200));
    const uint8_t src[6] = {0x02, 0, 0, 0, 0, 0x77};
    REQUIRE(build_pfc_frame(m, src, f));
    if (kind == 2) rte_pktmbuf_mtod(m, uint8_t*)[rng() % 2 ? 16 : 15] = 0xFF;  // malformed/PAUSE
  } else if (kind == 3) {
    rte_pktmbuf_mtod(m, uint8_t*)[12] = 0x08;  // EtherType ARP
    rte_pktmbuf_mtod(m, uint8_t*)[13] = 0x06;
  }
  return m;
}

std::string accounting_pair_yaml(const std::string& name, const std::string& role,
                                 uint32_t first_qp, uint32_t peer_qp) {
  std::string y = "nic:\n  name: " + name + "\n  uplinks:\n";
  for (int i = 0; i < 4; ++i) {
    y += "    - {name: up" + std::to_string(i) + ", device: x, path_id: " + std::to_string(i + 1) +
         ", link: {rate_gbps: 25, delay_ns: " + std::to_string(2000 * (i + 1)) +
         (i == 2 ? ", ber: 0.000001" : "") + (i == 3 ? ", loss: 0.02" : "") + "}}\n";
  }
  y += "  spray: {mode: rr}\n  receive: reorder-buffer\n";
  y += "  reorder: {hold_timeout_us: 40, max_buffered: 64}\n";
  y += "  probe: {uplink: up0, rate_pps: 20000, dst_port: 9999}\n";
  y += "  rc_engine: {qps: 4, role: " + role +
       ", message_bytes: 16384, mtu: 1024, max_in_flight: 128, messages: 0, first_qp: " +
       std::to_string(first_qp) + ", peer_first_qp: " + std::to_string(peer_qp) +
       (name == "a" ? ", local_ip: 10.0.0.1, peer_ip: 10.0.0.2"
                    : ", local_ip: 10.0.0.2, peer_ip: 10.0.0.1") +
       "}\n";
  return y;
}

}  // namespace

TEST_CASE("accounting: two RC NICs, 6,000 mixed steps: balanced after every call") {
  // Sprayed RC traffic both ways (requests, ACKs, retransmissions) over 4 paths, one with bit
  // errors and one losing frames; the cables also drop and duplicate frames; probes; reorder
  // holds that time out and a small reorder buffer; hostile frames on every port and on ports
  // the node does not have; uplinks going down and up.
  test::TestPool pool(16383, 4096 + 512);
  std::mt19937 rng(11);
  uint64_t step = 0;
  TermsSeen seen;
  {
    NicNode a(load(accounting_pair_yaml("a", "requester", 0x100, 0x200)), pool.get());
    NicNode b(load(accounting_pair_yaml("b", "responder", 0x200, 0x100)), pool.get());
    NicNode* nodes[2] = {&a, &b};
    uint64_t now = 0;
    rte_mbuf* buf[64];
    for (; step < 6000; ++step) {
      now += rng() % 4000;
      NicNode& n = *nodes[rng() % 2];
      NicNode& peer = &n == &a ? b : a;
      const unsigned action = rng() % 20;
      if (action < 6) {
        n.poll(now);
        check_balanced(n, "poll", step, seen);
      } else if (action < 14) {  // a cable: what crossed, less some, with some twice
        const uint16_t u = static_cast<uint16_t>(rng() % 4);
        const uint16_t k = n.transmit(u, now, buf, 32);
        check_balanced(n, "transmit", step, seen);
        uint16_t kept = 0;
        for (uint16_t i = 0; i < k; ++i) {
          const unsigned fate = rng() % 40;
          if (fate == 0) {
            rte_pktmbuf_free(buf[i]);
            continue;
          }
          rte_mbuf* m = buf[i];
          buf[kept++] = m;
          if (fate == 1 && kept < 64) {
            rte_mbuf* copy = rte_pktmbuf_copy(m, pool.get(), 0, UINT32_MAX);
            if (copy != nullptr) buf[kept++] = copy;
          }
        }
        if (kept > 0) {
          peer.receive(u, buf, kept, now);
          check_balanced(peer, "receive", step, seen);
        }
      } else if (action < 17) {  // hostile frames, now and then on a port the node lacks
        const uint16_t k = static_cast<uint16_t>(1 + rng() % 8);
        for (uint16_t i = 0; i < k; ++i) buf[i] = odd_frame(pool, rng);
        const uint16_t port = static_cast<uint16_t>(rng() % 10 == 0 ? 9 : rng() % 4);
        n.receive(port, buf, k, now);
        check_balanced(n, "receive odd", step, seen);
      } else if (action < 18) {
        const uint16_t u = static_cast<uint16_t>(rng() % 4);
        n.set_link_up(u, !n.egress(u).link_up(), now);
        check_balanced(n, "link toggle", step, seen);
      } else {
        now = std::max(now, std::min(n.next_event_ns(now), now + 200'000));
        n.poll(now);
        check_balanced(n, "poll at next event", step, seen);
      }
    }
    for (NicNode* n : nodes) {
      n->free_all();
      check_balanced(*n, "free_all", step, seen);
    }
    CHECK(a.rc_engine()->requester_totals().packets_retransmitted > 0);
    CHECK(b.reorder()->counters().gap_timeouts > 0);
  }
  CHECK(seen.generated);
  CHECK(seen.consumed);
  CHECK(seen.pipeline_dropped);
  CHECK(seen.reorder_dropped);
  CHECK(seen.reorder_held);
  CHECK(seen.lost);
  CHECK(seen.dequeued);
  CHECK(seen.queued);
  CHECK(pool.whole());
}

TEST_CASE("accounting: a host NIC, 6,000 mixed steps: balanced after every call") {
  // The host side: bursts from the host onto slow uplinks that tail-drop, RoCE arriving from the
  // fabric out of PSN order with gaps the reorder engine times out, duplicates, hostile frames,
  // a host that filters non-zero UDP checksums, links going down and up.
  test::TestPool pool(16383);
  std::mt19937 rng(5);
  uint64_t step = 0;
  TermsSeen seen;
  {
    NicNode nic(load(R"(
nic:
  name: host-nic
  host: {name: host, device: x}
  uplinks:
    - {name: up0, device: x, path_id: 1, link: {rate_gbps: 0.1, delay_ns: 3000}}
    - {name: up1, device: x, path_id: 2, link: {rate_gbps: 0.1, delay_ns: 5000, loss: 0.05}}
  spray: {mode: adaptive}
  receive: reorder-buffer
  reorder: {hold_timeout_us: 30, window: 64, max_buffered: 128}
)"),
                pool.get());
    uint64_t now = 0;
    std::array<uint32_t, 4> next_psn{};
    rte_mbuf* buf[32];
    for (; step < 6000; ++step) {
      now += rng() % 3000;
      const unsigned action = rng() % 20;
      if (action < 5) {  // the host sends: RoCE mostly, some hostile
        const uint16_t k = static_cast<uint16_t>(1 + rng() % 32);
        for (uint16_t i = 0; i < k; ++i) {
          buf[i] = rng() % 8 == 0 ? odd_frame(pool, rng) : roce_packet(pool, 0x40, rng() % 1000);
        }
        nic.receive(nic.host_port(), buf, k, now);
        check_balanced(nic, "receive from host", step, seen);
      } else if (action < 10) {  // the fabric delivers, out of order, with gaps and duplicates
        const uint16_t k = static_cast<uint16_t>(1 + rng() % 16);
        for (uint16_t i = 0; i < k; ++i) {
          const uint32_t q = rng() % 4;
          const unsigned r = rng() % 10;
          uint32_t psn = next_psn[q];
          if (r < 6) {
            ++next_psn[q];
          } else if (r < 8) {
            psn = next_psn[q] + 1 + rng() % 4;  // ahead: a gap
          } else if (r < 9 && psn > 0) {
            psn = psn - 1 - rng() % std::min<uint32_t>(psn, 4);  // behind: a duplicate
          } else {
            next_psn[q] += 1 + rng() % 3;  // lost on the way
          }
          if (rng() % 10 == 0) {
            buf[i] = odd_frame(pool, rng);
            continue;
          }
          buf[i] = roce_packet(pool, 0x50 + q, psn);
          if (rng() % 2 == 0) {  // sprayed by a peer: a PPCID in the UDP checksum
            ParsedPacket p;
            REQUIRE(PacketParser().parse(buf[i], p) == ParseStatus::kOk);
            const uint16_t ppcid = ppcid_encode(PpcidLayout::kTsHigh, 1, 0x5A, 0x50 + q, psn);
            rte_pktmbuf_mtod_offset(buf[i], uint8_t*, p.l4_offset)[6] =
                static_cast<uint8_t>(ppcid >> 8);
            rte_pktmbuf_mtod_offset(buf[i], uint8_t*, p.l4_offset)[7] = static_cast<uint8_t>(ppcid);
          }
        }
        nic.receive(static_cast<uint16_t>(rng() % 2), buf, k, now);
        check_balanced(nic, "receive from uplink", step, seen);
      } else if (action < 12) {
        nic.poll(now);
        check_balanced(nic, "poll", step, seen);
      } else if (action < 17) {
        const uint16_t p = static_cast<uint16_t>(rng() % 3);
        const uint16_t k = nic.transmit(p, now, buf, static_cast<uint16_t>(1 + rng() % 32));
        rte_pktmbuf_free_bulk(buf, k);
        check_balanced(nic, "transmit", step, seen);
      } else if (action < 18) {
        // In the second half only, and rarely: a link going down loses what it queued, and
        // the queues must fill up first.
        if (step < 3000 || rng() % 8 != 0) continue;
        const uint16_t u = static_cast<uint16_t>(rng() % 2);
        nic.set_link_up(u, !nic.egress(u).link_up(), now);
        check_balanced(nic, "link toggle", step, seen);
      } else if (action < 19) {
        nic_emu::NicHostSide h;
        h.restore_checksum = rng() % 2 == 0;
        h.filter_nonzero_udp_checksum = rng() % 2 == 0;
        nic.set_host_side(h);
      } else {
        nic.flush(now);
        check_balanced(nic, "flush", step, seen);
      }
    }
    CHECK(nic.reorder()->counters().gap_timeouts > 0);
    CHECK(nic.drops().host_checksum_filter > 0);
    nic.free_all();
    check_balanced(nic, "free_all", step, seen);
  }
  CHECK(seen.consumed);
  CHECK(seen.pipeline_dropped);
  CHECK(seen.reorder_dropped);
  CHECK(seen.reorder_held);
  CHECK(seen.refused);
  CHECK(seen.lost);
  CHECK(seen.dequeued);
  CHECK(seen.queued);
  CHECK(pool.whole());
}

TEST_CASE("memory_usage: the parts a NIC has, the reorder engine growing with the QPs it holds") {
  test::TestPool pool(2047);
  {
    NicNode nic(load(kHostYaml), pool.get());
    const MemoryUsage before = nic.memory_usage();
    CHECK(before.queues > 0);   // the uplinks' and the host port's egress
    CHECK(before.reorder > 0);  // the engine and its lookup table
    CHECK(before.other > sizeof(NicNode) - 1);
    CHECK(before.rc == 0);  // a host port: no RC engine
    CHECK(before.tcam == 0);
    CHECK(before.routes == 0);
    CHECK(before.total() ==
          before.queues + before.reorder + before.other + before.rc + before.tcam + before.routes);

    // 20 QPs, each with PSNs 1..4 held behind a missing 0 (the start is known: expect()): the
    // engine makes 20 contexts with their rings and 80 hold records, nothing more.
    for (uint32_t q = 0; q < 20; ++q) {
      REQUIRE(nic.reorder()->expect(0x0A000001, 0x100 + q, 0));
      for (uint32_t psn = 1; psn <= 4; ++psn) {
        rte_mbuf* m = roce_packet(pool, 0x100 + q, psn);
        nic.receive(0, &m, 1, 1000);
      }
    }
    REQUIRE(nic.reorder()->buffered() == 80);
    const MemoryUsage held = nic.memory_usage();
    const uint64_t window = nic.reorder()->config().window;
    CHECK(held.reorder >= before.reorder + 20 * window * 4 + 80 * 16);
    // Far below what the limits would have cost up front (max_qps rings, max_buffered records).
    const ReorderConfig& rc = nic.reorder()->config();
    CHECK(held.reorder < uint64_t{rc.max_qps} * rc.window * 4 + uint64_t{rc.max_buffered} * 16);
    CHECK(held.queues == before.queues);
    nic.free_all();
    // Freeing the packets keeps the storage (it is reused): the count stays.
    CHECK(nic.memory_usage().reorder == held.reorder);
  }
  CHECK(pool.whole());
}

TEST_CASE("memory_usage: an RC engine's QPs are counted, more QPs more bytes") {
  test::TestPool pool(2047);
  const auto rc_of = [&](int qps) {
    std::string y = pair_yaml("a", "rr", "reorder-buffer", "both", 0x11, 0x11, 1);
    const std::string four = "qps: 4";
    y.replace(y.find(four), four.size(), "qps: " + std::to_string(qps));
    NicNode nic(load(y), pool.get());
    REQUIRE(nic.rc_engine() != nullptr);
    REQUIRE(nic.rc_engine()->qps() == static_cast<uint32_t>(qps));
    return nic.memory_usage().rc;
  };
  const uint64_t one = rc_of(1);
  const uint64_t eight = rc_of(8);
  CHECK(one > sizeof(RcTrafficEngine));
  CHECK(eight > one + 7 * (sizeof(RcRequester) + sizeof(RcResponder)));
  CHECK(pool.whole());
}

namespace {

std::string hpcc_yaml(const std::string& name, const std::string& role, uint32_t first_qp,
                      uint32_t peer_qp) {
  return "nic:\n  name: " + name +
         "\n  uplinks:\n    - {name: up0, device: x, path_id: 1, link: {rate_gbps: 100, "
         "delay_ns: 1000}}\n  spray: {mode: flow}\n  receive: none\n  cc: {mode: hpcc}\n"
         "  rc_engine: {qps: 2, role: " +
         role + ", message_bytes: 8192, mtu: 1024, messages: 2, first_qp: " +
         std::to_string(first_qp) + ", peer_first_qp: " + std::to_string(peer_qp) +
         (name == "a" ? ", local_ip: 10.0.0.1, peer_ip: 10.0.0.2"
                      : ", local_ip: 10.0.0.2, peer_ip: 10.0.0.1") +
         "}\n";
}

}  // namespace

TEST_CASE("HPCC: data leaves with INT, a record pushed on the way comes back in its ACK") {
  test::TestPool pool(4095, 4096 + 512);
  {
    NicNode a(load(hpcc_yaml("a", "requester", 0x100, 0x200)), pool.get());
    NicNode b(load(hpcc_yaml("b", "responder", 0x200, 0x100)), pool.get());
    const PacketParser parser;
    rte_mbuf* buf[64];
    uint64_t now = 0, data = 0, acks = 0, tx_bytes = 0;
    // What "the switch" (this test) pushed on each data packet, by (DestQP, PSN).
    std::map<std::pair<uint32_t, uint32_t>, IntHopRecord> pushed;
    while (!a.rc_engine()->done() && now < 100'000'000) {
      a.poll(now);
      b.poll(now);
      while (uint16_t n = a.transmit(0, now, buf, 64)) {
        for (uint16_t i = 0; i < n; ++i) {
          const auto st = int_parse(buf[i]);
          REQUIRE(st.has_value());  // every WRITE carries INT, the budget ns-3's 5 hops
          CHECK(st->nhop == 0);
          CHECK(st->remaining_hops == 5);
          IntHopRecord h;
          h.queue_id = 3;
          h.qlen_bytes = 800 * (data % 7);
          h.egress_ts_ns = now + 100;
          h.tx_bytes = tx_bytes;
          h.line_rate_mbps = 100'000;
          REQUIRE(int_push_hop(buf[i], h) == IntPushResult::kPushed);
          tx_bytes += rte_pktmbuf_pkt_len(buf[i]);
          ParsedPacket p;
          REQUIRE(parser.parse(buf[i], p) == ParseStatus::kOk);
          REQUIRE(p.int_offset != 0);
          pushed[{p.dest_qp, p.psn}] = h;
          ++data;
        }
        b.receive(0, buf, n, now);
      }
      while (uint16_t n = b.transmit(0, now, buf, 64)) {
        for (uint16_t i = 0; i < n; ++i) {
          // The ACK echoes the record of the packet it acknowledges, on the echo port.
          CHECK_FALSE(int_parse(buf[i], kIntUdpPort).has_value());
          const auto st = int_parse(buf[i], kIntEchoUdpPort);
          REQUIRE(st.has_value());
          REQUIRE(st->nhop == 1);
          ParsedPacket p;
          REQUIRE(parser.parse(buf[i], p) == ParseStatus::kOk);
          CHECK(p.bth_opcode == opcode::kRcAck);
          const auto it = pushed.find({p.dest_qp - 0x100 + 0x200, p.psn});
          REQUIRE(it != pushed.end());
          const IntHopRecord& want = it->second;
          const IntHopRecord& got = st->hops()[0];
          CHECK(got.queue_id == want.queue_id);
          CHECK(got.qlen_bytes == want.qlen_bytes);
          CHECK(got.egress_ts_ns == want.egress_ts_ns);
          CHECK(got.tx_bytes == want.tx_bytes);
          CHECK(got.line_rate_mbps == want.line_rate_mbps);
          ++acks;
        }
        a.receive(0, buf, n, now);
      }
      const uint64_t next = std::min(a.next_event_ns(now), b.next_event_ns(now));
      now = std::max(next, now + 1);
    }
    REQUIRE(a.rc_engine()->done());
    CHECK(data == 2 * 2 * 8);  // 2 QPs x 2 messages x 8 packets
    CHECK(acks == data);
    CHECK(a.counters().int_inserted == data);
    CHECK(b.counters().int_stripped == data);
    CHECK(b.counters().int_echoed == data);
    CHECK(a.counters().int_stripped == acks);
    CHECK(a.counters().int_acks_received == acks);
    CHECK(a.total_drops() + b.total_drops() == 0);
    // The sender's HPCC read every echo: the hops it saw are the records.
    const RcCcSummary summary = a.rc_engine()->cc_summary(now);
    const auto names = HpccRateControl(HpccConfig{}).figures();
    double hops_seen = -1;
    for (size_t k = 0; k < names.size(); ++k) {
      if (names[k].first == "int_hops_seen") hops_seen = summary.figure_sum[k];
    }
    CHECK(hops_seen == static_cast<double>(acks));

    // A malformed INT (version 3) is dropped and counted, never delivered.
    rte_mbuf* m = nullptr;
    {
      std::vector<uint8_t> frame(256);
      FrameSpec f;
      f.ip.src = 0x0A000001;
      f.ip.dst = 0x0A000002;
      std::vector<uint8_t> payload(64, 1);
      f.payload = payload;
      RoceSpec r;
      r.opcode = opcode::kRcWriteOnly;
      r.dest_qp = 0x200;
      frame.resize(build_roce_frame(frame, f, r));
      REQUIRE(int_insert(frame, 5));
      frame[14 + 20 + 8 + 4] = 3 << 4;  // the INT-MD header's version
      m = pool.make(frame);
    }
    const uint64_t before = b.drops().int_malformed;
    b.receive(0, &m, 1, now);
    CHECK(b.drops().int_malformed == before + 1);
    CHECK(b.accounting().balanced());
  }
  CHECK(pool.whole());
}
