// The frames the egress tests queue: UDP frames of a given size marked by their source port, a
// PFC frame, and reading the marker back. Shared by test_egress_port.cc and
// test_egress_port_wire.cc (each its own executable: everything here is inline).
#pragma once

#include <rte_mbuf.h>
#include <catch2/catch.hpp>

#include <stdexcept>
#include <vector>

#include "dataplane/egress/egress_port.h"
#include "dataplane/wire/packet_builder.h"
#include "dataplane/wire/packet_parser.h"
#include "dataplane/wire/pfc_frame.h"
#include "tests/support/dpdk_test.h"

namespace spraynet::test {

inline constexpr uint16_t kNoPort = EgressPort::kNoIngressPort;
inline constexpr uint16_t kPfcMarker = 0xFFFF;

// A UDP frame of exactly `frame_bytes` (>= 60) whose UDP source port is `marker`.
inline rte_mbuf* make_frame(const TestPool& pool, uint32_t frame_bytes, uint16_t marker) {
  std::vector<uint8_t> payload(frame_bytes - 42, 0xAB);
  FrameSpec f;
  f.ip.src = 0x0A000001;
  f.ip.dst = 0x0A000002;
  f.udp.src_port = marker;
  f.udp.dst_port = 9;
  f.payload = payload;
  rte_mbuf* m = build_udp_mbuf(pool.get(), f);
  if (m == nullptr) throw std::runtime_error("build_udp_mbuf failed");
  return m;
}

// A PFC frame pausing priority 3 for the longest time.
inline rte_mbuf* make_pfc(const TestPool& pool) {
  const uint8_t src[6] = {0x02, 0, 0, 0, 0, 0x0B};
  PfcFrame p;
  p.class_enable = 1 << 3;
  p.quanta[3] = 0xFFFF;
  rte_mbuf* m = pool.alloc();
  if (!build_pfc_frame(m, src, p)) throw std::runtime_error("build_pfc_frame failed");
  return m;
}

// The UDP source port of a frame built by make_frame, or kPfcMarker for a PFC frame.
inline uint16_t marker_of(const rte_mbuf* m) {
  ParsedPacket p;
  REQUIRE(PacketParser().parse(m, p) == ParseStatus::kOk);
  return p.kind == PacketKind::kMacControl ? kPfcMarker : p.src_port;
}

}  // namespace spraynet::test
