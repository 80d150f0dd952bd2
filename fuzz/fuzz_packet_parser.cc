// PacketParser on arbitrary bytes, under every option set, and on the same bytes in an mbuf:
// one segment (must say exactly what the byte parse says) or a chain cut where the input says
// (a chain the parser accepts must agree with the byte parse). An accepted parse never points
// past the frame.
#include <fuzzer/FuzzedDataProvider.h>
#include <rte_mbuf.h>

#include <vector>

#include "dataplane/wire/packet_parser.h"
#include "dataplane/wire/roce_headers.h"
#include "fuzz/support.h"

using namespace spraynet;

namespace {

rte_mempool* pool = nullptr;
constexpr uint16_t kDataRoom = 2048 + RTE_PKTMBUF_HEADROOM;

bool same(const ParsedPacket& a, const ParsedPacket& b) {
  return a.kind == b.kind && a.vlan_tags == b.vlan_tags && a.pcp == b.pcp &&
         a.vlan_id == b.vlan_id && a.ether_type == b.ether_type && a.l3_offset == b.l3_offset &&
         a.l4_offset == b.l4_offset && a.bth_offset == b.bth_offset &&
         a.payload_offset == b.payload_offset && a.ip_total_length == b.ip_total_length &&
         a.ihl_bytes == b.ihl_bytes && a.tos == b.tos && a.ttl == b.ttl &&
         a.ip_proto == b.ip_proto && a.ip_fragment == b.ip_fragment && a.src_ip == b.src_ip &&
         a.dst_ip == b.dst_ip && a.src_port == b.src_port && a.dst_port == b.dst_port &&
         a.int_offset == b.int_offset &&
         a.udp_length == b.udp_length && a.udp_checksum == b.udp_checksum &&
         a.bth_opcode == b.bth_opcode && a.dest_qp == b.dest_qp && a.psn == b.psn &&
         a.ack_req == b.ack_req && a.payload_length == b.payload_length;
}

void check_bounds(const ParsedPacket& p, size_t len) {
  switch (p.kind) {
    case PacketKind::kRoce:
      FUZZ_CHECK(p.bth_offset + kBthSize <= p.payload_offset);
      FUZZ_CHECK(size_t{p.payload_offset} + p.payload_length + 4 <= len);
      FUZZ_CHECK(p.dest_qp <= 0xFFFFFF && p.psn <= 0xFFFFFF);
      [[fallthrough]];
    case PacketKind::kUdp:
    case PacketKind::kTcp:
      FUZZ_CHECK(p.l4_offset == p.l3_offset + p.ihl_bytes);
      [[fallthrough]];
    case PacketKind::kIpv4:
      FUZZ_CHECK(p.ihl_bytes >= 20 && p.ip_total_length >= p.ihl_bytes);
      FUZZ_CHECK(size_t{p.l3_offset} + p.ip_total_length <= len);
      break;
    case PacketKind::kMacControl:
      FUZZ_CHECK(p.l3_offset <= len);
      break;
    case PacketKind::kUnknown:
      FUZZ_CHECK(false);  // kOk always says what it parsed
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  fuzz::init_eal(*argc > 0 ? (*argv)[0] : nullptr);
  pool = fuzz::make_pool("fuzz_parser", 64, kDataRoom);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  ParseOptions options;
  const uint8_t flags = in.ConsumeIntegral<uint8_t>();
  options.verify_ip_checksum = (flags & 1) != 0;
  options.verify_icrc = (flags & 2) != 0;
  std::vector<size_t> cuts;
  const int segments = (flags >> 2) & 3;  // 0: one segment; else that many cuts
  for (int i = 0; i < segments; ++i) cuts.push_back(in.ConsumeIntegralInRange<size_t>(0, 128));
  const std::vector<uint8_t> frame = in.ConsumeRemainingBytes<uint8_t>();
  if (frame.size() > 3 * 2048) return 0;

  const PacketParser parser(options);
  ParsedPacket bytes;
  const ParseStatus sb = parser.parse(frame.data(), frame.size(), bytes);
  FUZZ_CHECK(sb < ParseStatus::kCount);
  FUZZ_CHECK(!to_string(sb).empty());
  if (sb == ParseStatus::kOk) check_bounds(bytes, frame.size());
  FUZZ_CHECK(sb != ParseStatus::kMultiSegment);

  rte_mbuf* m = fuzz::chain_from(pool, frame, cuts);
  FUZZ_CHECK(m != nullptr);
  ParsedPacket chained;
  const ParseStatus sm = parser.parse(m, chained);
  FUZZ_CHECK(rte_pktmbuf_pkt_len(m) == frame.size());
  if (m->nb_segs == 1) {
    FUZZ_CHECK(sm == sb);
    FUZZ_CHECK(same(chained, bytes));
  } else if (sm == ParseStatus::kOk) {
    FUZZ_CHECK(sb == ParseStatus::kOk);
    FUZZ_CHECK(same(chained, bytes));
  }
  if (sm == ParseStatus::kOk && chained.kind == PacketKind::kRoce) {
    const size_t after = chained.payload_length;
    FUZZ_CHECK(roce_packet_in_mbuf(m, chained, chained.payload_offset, after));
    (void)roce_packet_in_mbuf(m, chained, chained.payload_offset, after + 1 + flags);
  }
  rte_pktmbuf_free(m);
  fuzz::check_pool_whole(pool);
  return 0;
}
