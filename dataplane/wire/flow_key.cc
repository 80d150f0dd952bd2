#include "dataplane/wire/flow_key.h"

namespace spraynet {

FlowKey make_flow_key(const ParsedPacket& p, bool with_dest_qp) {
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
