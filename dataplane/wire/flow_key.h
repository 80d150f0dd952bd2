// The flow key that ECMP, DLB and the TCAM hash and match on: the IPv4 5-tuple, optionally with
// the RoCEv2 BTH DestQP ("E-ECMP": QPs of one host pair share a UDP source port range, so the
// QP number spreads them where the 5-tuple alone cannot).
#pragma once

#include <cstdint>

#include "dataplane/wire/packet_parser.h"

namespace spraynet {

// Laid out without padding holes so that it can be hashed as 16 contiguous bytes.
struct FlowKey {
  uint32_t src_ip = 0;  // host byte order
  uint32_t dst_ip = 0;
  uint16_t src_port = 0;
  uint16_t dst_port = 0;
  uint32_t proto_and_qp = 0;  // bits 31-24 IP protocol, bits 23-0 DestQP (0 unless with_dest_qp)

  uint8_t proto() const { return static_cast<uint8_t>(proto_and_qp >> 24); }
  uint32_t dest_qp() const { return proto_and_qp & 0xFFFFFF; }
  bool operator==(const FlowKey&) const = default;
};
static_assert(sizeof(FlowKey) == 16, "FlowKey is hashed as raw bytes");

// Ports are zero for non-UDP/TCP packets and for fragments (only the first carries them, so
// a 3-tuple keeps all fragments of a datagram together). DestQP only for kRoce packets.
// Inline: every packet of the switch's ECMP and TCAM stages builds one, and the call cost as
// much as the body.
inline FlowKey make_flow_key(const ParsedPacket& p, bool with_dest_qp) {
  FlowKey k;
  k.src_ip = p.src_ip;
  k.dst_ip = p.dst_ip;
  const bool has_ports =
      p.kind == PacketKind::kUdp || p.kind == PacketKind::kTcp || p.kind == PacketKind::kRoce;
  if (has_ports) {
    k.src_port = p.src_port;
    k.dst_port = p.dst_port;
  }
  uint32_t qp = 0;
  if (with_dest_qp && p.kind == PacketKind::kRoce) qp = p.dest_qp & 0xFFFFFF;
  k.proto_and_qp = (uint32_t{p.ip_proto} << 24) | qp;
  return k;
}

}  // namespace spraynet
