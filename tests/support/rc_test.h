// The two ends of one RC QP pair for the RC model's tests (requester QP 0x11 at 10.0.0.1,
// responder QP 0x22 at 10.0.0.2), a parse that must succeed, and a WRITE from the requester.
#pragma once

#include <rte_mbuf.h>
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "dataplane/rc_endpoint/rc_requester.h"
#include "dataplane/wire/packet_builder.h"
#include "dataplane/wire/packet_parser.h"
#include "dataplane/wire/roce_headers.h"

namespace spraynet::test {

// The requester's QP 0x11, talking to the responder's QP 0x22.
inline RcQpAddress requester_address() {
  RcQpAddress a;
  a.local_mac = {0x02, 0, 0, 0, 0, 0x0A};
  a.peer_mac = {0x02, 0, 0, 0, 0, 0x0B};
  a.local_ip = 0x0A000001;
  a.peer_ip = 0x0A000002;
  a.local_qp = 0x11;
  a.peer_qp = 0x22;
  a.dscp = 26;
  return a;
}

// The responder's QP 0x22 answers the requester's QP 0x11.
inline RcQpAddress responder_address() {
  RcQpAddress a;
  a.local_mac = {0x02, 0, 0, 0, 0, 0x0B};
  a.peer_mac = {0x02, 0, 0, 0, 0, 0x0A};
  a.local_ip = 0x0A000002;
  a.peer_ip = 0x0A000001;
  a.local_qp = 0x22;
  a.peer_qp = 0x11;
  a.dscp = 26;
  return a;
}

// Parses a RoCE packet, IPv4 checksum and ICRC checked; fails the test otherwise.
inline ParsedPacket parse_ok(const rte_mbuf* m) {
  const PacketParser parser(ParseOptions{true, true});
  ParsedPacket p;
  REQUIRE(parser.parse(m, p) == ParseStatus::kOk);
  REQUIRE(p.kind == PacketKind::kRoce);
  return p;
}

// A WRITE packet (`op`) from the requester to `dest_qp` with `payload` bytes; its RETH (on FIRST
// and ONLY) names VA 0x1000, rkey 0x42 and `dma_length`.
// `src_port`: 0 for the requester QP's rxe port (a sprayed packet has another).
inline rte_mbuf* make_rc_write(rte_mempool* pool, uint8_t op, uint32_t psn, uint32_t payload,
                               bool ack_req, uint32_t dest_qp, uint32_t dma_length,
                               uint16_t src_port = 0) {
  const RcQpAddress a = responder_address();
  std::vector<uint8_t> bytes(payload, 0x5A);
  FrameSpec f;
  f.eth.src = a.peer_mac;
  f.eth.dst = a.local_mac;
  f.ip.src = a.peer_ip;
  f.ip.dst = a.local_ip;
  f.udp.src_port = src_port != 0 ? src_port : rxe_udp_source_port(a.peer_qp);
  f.payload = bytes;
  RoceSpec r;
  r.opcode = op;
  r.dest_qp = dest_qp;
  r.psn = psn;
  r.ack_req = ack_req;
  r.virtual_address = 0x1000;
  r.rkey = 0x42;
  r.dma_length = dma_length;
  rte_mbuf* m = build_roce_mbuf(pool, f, r);
  REQUIRE(m != nullptr);
  return m;
}

}  // namespace spraynet::test
