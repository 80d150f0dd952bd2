// FlowPathDelays: the cable delays a flow's frames met, each way, carried in the frames
// themselves; values computed here from the cables each frame crossed.
#include "fabric/flow_path_delays.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <vector>

#include "dataplane/egress/link_emulator.h"
#include "dataplane/wire/packet_builder.h"
#include "tests/support/dpdk_test.h"

using spraynet::FrameSpec;
using spraynet::LinkEmulator;
using spraynet::RoceSpec;
using spraynet::fabric::FlowPathDelays;
using spraynet::fabric::QpFlow;
using spraynet::test::TestPool;
namespace opcode = spraynet::opcode;

namespace {

constexpr uint32_t kIp[2] = {0x0A000001, 0x0A000002};
constexpr uint32_t kFirstQpn = 16;
constexpr uint32_t kFirstPsn = 0xFFFFFE;  // the PSNs wrap inside the message
// Cables: 0 host 0 - leaf, 1 leaf - spine A, 2 leaf - spine B, 3 host 1 - leaf.
const std::vector<uint32_t> kCableNs = {100, 300, 500, 100};
constexpr double kPacketNs = 80;
constexpr float kNsPerBit = 0.04F;  // four hops at 100 Gbit/s

// One flow: host 0's QP 0 writes to host 1's QP 1 (host 1's QP 0 is no flow's).
std::vector<QpFlow> one_flow() {
  QpFlow f;
  f.src = 0;
  f.dst = 1;
  f.src_qp_index = 0;
  f.dst_qp_index = 1;
  f.src_qpn = kFirstQpn;
  f.dst_qpn = kFirstQpn + 1;
  return {f};
}

FlowPathDelays make() {
  return FlowPathDelays(one_flow(), {kIp[0], kIp[1]}, {kFirstQpn, kFirstQpn}, {2, 2}, kCableNs,
                        kFirstPsn, kPacketNs, {kNsPerBit});
}

rte_mbuf* frame(const TestPool& pool, uint32_t from, uint32_t to, uint8_t op, uint32_t qpn,
                uint32_t psn, uint32_t payload) {
  static std::vector<uint8_t> bytes(4096, 0x5A);
  FrameSpec f;
  f.ip.src = kIp[from];
  f.ip.dst = kIp[to];
  f.udp.src_port = 49152;
  f.payload = std::span<const uint8_t>(bytes.data(), payload);
  RoceSpec r;
  r.opcode = op;
  r.dest_qp = qpn;
  r.psn = psn & 0xFFFFFF;
  rte_mbuf* m = spraynet::build_roce_mbuf(pool.get(), f, r);
  REQUIRE(m != nullptr);
  return m;
}

// `m` from host `from` over `cables` to host `to`.
void carry(FlowPathDelays& d, uint32_t from, uint32_t to, rte_mbuf* m,
           const std::vector<uint32_t>& cables) {
  d.depart(from, &m, 1);
  for (const uint32_t c : cables) d.cross(c, &m, 1);
  d.arrive(to, &m, 1);
}

double wire_ns(const rte_mbuf* m) {
  return static_cast<double>(LinkEmulator::wire_bits(rte_pktmbuf_pkt_len(m))) * kNsPerBit;
}

}  // namespace

TEST_CASE("a flow's ways there and back are the cables its frames crossed") {
  TestPool pool;
  {
    FlowPathDelays d = make();
    CHECK(d.forward_ns(0) == FlowPathDelays::kUnknown);
    CHECK(d.reverse_ns(0) == FlowPathDelays::kUnknown);
    CHECK(d.forward_tail_ns(0) == FlowPathDelays::kUnknown);
    // Four packets: the first two over spine A (800 ns of cable), the last two over B (1200).
    const std::vector<uint32_t> via_a = {0, 1, 1, 3}, via_b = {0, 2, 2, 3};
    const uint8_t ops[4] = {opcode::kRcWriteFirst, opcode::kRcWriteMiddle, opcode::kRcWriteMiddle,
                            opcode::kRcWriteLast};
    double tail = 0;
    for (uint32_t p = 0; p < 4; ++p) {
      rte_mbuf* m = frame(pool, 0, 1, ops[p], kFirstQpn + 1, kFirstPsn + p, p == 3 ? 100 : 1024);
      const uint32_t path = p < 2 ? 800 : 1200;
      tail = std::max(tail, p * kPacketNs + path + wire_ns(m));
      carry(d, 0, 1, m, p < 2 ? via_a : via_b);
      rte_pktmbuf_free(m);
    }
    // Nothing came back yet: the sender knows nothing.
    CHECK(d.forward_ns(0) == FlowPathDelays::kUnknown);
    // The ACK of the last packet comes back over B; one of the second over A, later.
    rte_mbuf* ack = frame(pool, 1, 0, opcode::kRcAck, kFirstQpn, kFirstPsn + 3, 0);
    carry(d, 1, 0, ack, {3, 2, 2, 0});
    rte_pktmbuf_free(ack);
    CHECK(d.forward_ns(0) == 800);
    CHECK(d.forward_tail_ns(0) == static_cast<uint32_t>(tail));
    CHECK(d.reverse_ns(0) == 1200);
    // A lower PSN's ACK does not complete anything: it does not count; the same PSN's does
    // (the first of equals to arrive completed it: the least delay).
    ack = frame(pool, 1, 0, opcode::kRcAck, kFirstQpn, kFirstPsn + 1, 0);
    carry(d, 1, 0, ack, {3, 1, 1, 0});
    rte_pktmbuf_free(ack);
    CHECK(d.reverse_ns(0) == 1200);
    ack = frame(pool, 1, 0, opcode::kRcAck, kFirstQpn, kFirstPsn + 3, 0);
    carry(d, 1, 0, ack, {3, 1, 1, 0});
    rte_pktmbuf_free(ack);
    CHECK(d.reverse_ns(0) == 800);
  }
  CHECK(pool.whole());
}

TEST_CASE("frames that are no flow's data or acknowledgement are not counted") {
  TestPool pool;
  {
    FlowPathDelays d = make();
    // A CNP back to the sender, a frame to host 1's QP 0 (no flow's), plain UDP.
    rte_mbuf* m = frame(pool, 1, 0, opcode::kCnp, kFirstQpn, 0, 0);
    carry(d, 1, 0, m, {3, 1, 1, 0});
    rte_pktmbuf_free(m);
    m = frame(pool, 0, 1, opcode::kRcWriteOnly, kFirstQpn, kFirstPsn, 64);
    carry(d, 0, 1, m, {0, 1, 1, 3});
    rte_pktmbuf_free(m);
    FrameSpec f;
    f.ip.src = kIp[0];
    f.ip.dst = kIp[1];
    f.udp.dst_port = 4791;
    m = spraynet::build_udp_mbuf(pool.get(), f);
    REQUIRE(m != nullptr);
    carry(d, 0, 1, m, {0, 1, 1, 3});
    rte_pktmbuf_free(m);
    // Then an ACK: it echoes no forward delay, as nothing of the flow went there.
    m = frame(pool, 1, 0, opcode::kRcAck, kFirstQpn, kFirstPsn, 0);
    carry(d, 1, 0, m, {3, 2, 2, 0});
    rte_pktmbuf_free(m);
    CHECK(d.forward_ns(0) == FlowPathDelays::kUnknown);
    CHECK(d.forward_tail_ns(0) == FlowPathDelays::kUnknown);
    CHECK(d.reverse_ns(0) == 1200);
  }
  CHECK(pool.whole());
}

TEST_CASE("a frame's delay starts again when it leaves a host, whatever its buffer held") {
  TestPool pool;
  {
    FlowPathDelays d = make();
    rte_mbuf* m = frame(pool, 0, 1, opcode::kRcWriteOnly, kFirstQpn + 1, kFirstPsn, 64);
    // Crossed cables earlier in the buffer's life (a reused mbuf): forgotten at departure.
    for (int i = 0; i < 10; ++i) d.cross(2, &m, 1);
    carry(d, 0, 1, m, {0, 1, 1, 3});
    rte_pktmbuf_free(m);
    m = frame(pool, 1, 0, opcode::kRcAck, kFirstQpn, kFirstPsn, 0);
    carry(d, 1, 0, m, {3, 1, 1, 0});
    rte_pktmbuf_free(m);
    CHECK(d.forward_ns(0) == 800);
    CHECK(d.reverse_ns(0) == 800);
    // What another rank hands over replaces what this one saw.
    d.set_seen(0, 1, 2, 3);
    CHECK(d.forward_ns(0) == 1);
    CHECK(d.forward_tail_ns(0) == 2);
    CHECK(d.reverse_ns(0) == 3);
  }
  CHECK(pool.whole());
}
