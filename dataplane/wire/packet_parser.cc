#include "dataplane/wire/packet_parser.h"

#include <rte_mbuf.h>

#include <cstring>
#include <iterator>

#include "dataplane/wire/byte_order.h"
#include "dataplane/wire/icrc.h"
#include "dataplane/wire/roce_headers.h"

namespace spraynet {

namespace {
constexpr size_t kEthHeader = 14;
constexpr uint16_t kEtherIpv4 = 0x0800;
constexpr uint16_t kEtherVlan = 0x8100;
constexpr uint16_t kEtherQinQ = 0x88A8;
constexpr uint16_t kEtherMacControl = 0x8808;
constexpr uint8_t kIpProtoUdp = 17;
constexpr uint8_t kIpProtoTcp = 6;
}  // namespace

namespace {
#define SPRAYNET_PARSE_STATUS_NAME(e, name) #name,
constexpr std::string_view kStatusNames[] = {SPRAYNET_PARSE_STATUSES(SPRAYNET_PARSE_STATUS_NAME)};
#undef SPRAYNET_PARSE_STATUS_NAME
#define SPRAYNET_PARSE_COUNTER_NAME(e, name) "parse_" #name,
constexpr std::string_view kCounterNames[] = {SPRAYNET_PARSE_STATUSES(SPRAYNET_PARSE_COUNTER_NAME)};
#undef SPRAYNET_PARSE_COUNTER_NAME
static_assert(std::size(kStatusNames) == kParseStatusCount);
static_assert(std::size(kCounterNames) == kParseStatusCount);
}  // namespace

std::string_view to_string(ParseStatus s) {
  const auto i = static_cast<size_t>(s);
  return i < kParseStatusCount ? kStatusNames[i] : "invalid";
}

std::string_view counter_name(ParseStatus s) {
  const auto i = static_cast<size_t>(s);
  return i < kParseStatusCount ? kCounterNames[i] : "parse_invalid";
}

namespace {
// RFC 1071: a header summed with its own checksum folds to 0xFFFF. Summed 32 bits at a time in
// host order (one's-complement sums do not care for byte order, and 0xFFFF reads the same
// either way): a third of rte_ipv4_cksum's cost for the 20-byte header every packet has.
bool ipv4_header_checksum_ok(const uint8_t* ip, size_t ihl) {
  uint64_t sum = 0;
  for (size_t i = 0; i < ihl; i += 4) {
    uint32_t w;
    std::memcpy(&w, ip + i, 4);
    sum += w;
  }
  sum = (sum & 0xFFFFFFFFu) + (sum >> 32);
  sum = (sum & 0xFFFFFFFFu) + (sum >> 32);
  sum = (sum & 0xFFFFu) + (sum >> 16);
  sum = (sum & 0xFFFFu) + (sum >> 16);
  return sum == 0xFFFF;
}

// A read of the first `n` bytes: the packet is too short (`short_status`), or they are not all
// in the first segment of a chain, or they can be read (kOk).
ParseStatus readable(size_t n, size_t head, size_t total, ParseStatus short_status) {
  if (n > total) return short_status;
  return n > head ? ParseStatus::kMultiSegment : ParseStatus::kOk;
}
}  // namespace

bool roce_packet_in_mbuf(const rte_mbuf* m, const ParsedPacket& p, size_t headers_end,
                         size_t after_headers) {
  if (p.kind != PacketKind::kRoce || p.bth_offset == 0) return false;
  const size_t end = size_t{p.l3_offset} + p.ip_total_length;
  return end <= m->pkt_len && headers_end <= m->data_len && headers_end + after_headers <= end;
}

ParseStatus PacketParser::parse(const rte_mbuf* m, ParsedPacket& out) const {
  // parse_frame() starts from a cleared ParsedPacket; the early answers clear it themselves.
  const uint8_t* frame = rte_pktmbuf_mtod(m, const uint8_t*);
  if (m->next == nullptr) {
    if (m->nb_segs == 1 && m->pkt_len == m->data_len) {
      return parse_frame(frame, m->data_len, m->data_len, nullptr, out);
    }
    out = ParsedPacket{};
    return ParseStatus::kMultiSegment;
  }
  if (m->pkt_len < m->data_len) {  // an inconsistent chain
    out = ParsedPacket{};
    return ParseStatus::kMultiSegment;
  }
  const ParseStatus st = parse_frame(frame, m->data_len, m->pkt_len, m, out);
  if (st == ParseStatus::kMultiSegment) out = ParsedPacket{};  // nothing half-read is kept
  return st;
}

ParseStatus PacketParser::parse(const uint8_t* frame, size_t len, ParsedPacket& out) const {
  return parse_frame(frame, len, len, nullptr, out);
}

ParseStatus PacketParser::parse_frame(const uint8_t* frame, size_t head, size_t total,
                                      const rte_mbuf* m, ParsedPacket& out) const {
  out = ParsedPacket{};
  if (auto st = readable(kEthHeader, head, total, ParseStatus::kTruncatedEthernet);
      st != ParseStatus::kOk) {
    return st;
  }
  size_t off = 12;
  uint16_t type = load_be16(frame + off);
  // Up to two tags (802.1ad outer + 802.1Q inner); the outer tag's PCP is the packet's priority.
  while ((type == kEtherVlan || type == kEtherQinQ) && out.vlan_tags < 2) {
    if (auto st = readable(off + 2 + 4 + 2, head, total, ParseStatus::kTruncatedVlan);
        st != ParseStatus::kOk) {
      return st;
    }
    const uint16_t tci = load_be16(frame + off + 2);
    if (out.vlan_tags == 0) {
      out.pcp = static_cast<uint8_t>(tci >> 13);
      out.vlan_id = tci & 0x0FFF;
    }
    ++out.vlan_tags;
    off += 4;
    type = load_be16(frame + off);
  }
  out.ether_type = type;
  out.l3_offset = static_cast<uint16_t>(off + 2);

  if (type == kEtherMacControl) {
    // opcode (2) + PFC class-enable vector (2) + 8 pause times (16)
    if (auto st = readable(out.l3_offset + 2u, head, total, ParseStatus::kTruncatedMacControl);
        st != ParseStatus::kOk) {
      return st;
    }
    out.kind = PacketKind::kMacControl;
    return ParseStatus::kOk;
  }
  if (type != kEtherIpv4) return ParseStatus::kNotIpv4;
  return parse_ipv4(frame, head, total, m, out);
}

ParseStatus PacketParser::parse_ipv4(const uint8_t* frame, size_t head, size_t len,
                                     const rte_mbuf* m, ParsedPacket& out) const {
  const size_t l3 = out.l3_offset;
  if (auto st = readable(l3 + 20, head, len, ParseStatus::kTruncatedIpv4); st != ParseStatus::kOk) {
    return st;
  }
  const uint8_t* ip = frame + l3;
  if ((ip[0] >> 4) != 4) return ParseStatus::kBadIpVersion;
  const size_t ihl = size_t{ip[0] & 0x0Fu} * 4;
  if (ihl < 20) return ParseStatus::kBadIhl;
  if (auto st = readable(l3 + ihl, head, len, ParseStatus::kBadIhl); st != ParseStatus::kOk) {
    return st;
  }
  const uint16_t total = load_be16(ip + 2);
  // Ethernet may pad the frame past the datagram (60-byte minimum); it may never cut it short.
  if (total < ihl || l3 + total > len) return ParseStatus::kBadTotalLength;
  if (options_.verify_ip_checksum && !ipv4_header_checksum_ok(ip, ihl)) {
    return ParseStatus::kBadIpChecksum;
  }
  out.ip_total_length = total;
  out.ihl_bytes = static_cast<uint8_t>(ihl);
  out.tos = ip[1];
  out.ttl = ip[8];
  out.ip_proto = ip[9];
  out.src_ip = load_be32(ip + 12);
  out.dst_ip = load_be32(ip + 16);
  out.ip_fragment = (load_be16(ip + 6) & 0x3FFF) != 0;  // MF set or a non-zero offset
  out.kind = PacketKind::kIpv4;
  if (out.ip_fragment) return ParseStatus::kOk;

  const size_t l4 = l3 + ihl;
  if (out.ip_proto == kIpProtoTcp) {
    if (total < ihl + 20) return ParseStatus::kTruncatedTcp;
    if (l4 + 4 > head) return ParseStatus::kMultiSegment;
    out.l4_offset = static_cast<uint16_t>(l4);
    out.src_port = load_be16(frame + l4);
    out.dst_port = load_be16(frame + l4 + 2);
    out.kind = PacketKind::kTcp;
    return ParseStatus::kOk;
  }
  if (out.ip_proto != kIpProtoUdp) return ParseStatus::kOk;
  if (total < ihl + 8) return ParseStatus::kTruncatedUdp;
  if (l4 + 8 > head) return ParseStatus::kMultiSegment;
  out.l4_offset = static_cast<uint16_t>(l4);
  out.src_port = load_be16(frame + l4);
  out.dst_port = load_be16(frame + l4 + 2);
  out.udp_length = load_be16(frame + l4 + 4);
  out.udp_checksum = load_be16(frame + l4 + 6);
  if (out.udp_length != total - ihl) return ParseStatus::kUdpLengthMismatch;
  out.kind = PacketKind::kUdp;
  if (out.dst_port != kRoceV2UdpPort) return ParseStatus::kOk;
  return parse_roce(frame, head, m, out);
}

ParseStatus PacketParser::parse_roce(const uint8_t* frame, size_t head, const rte_mbuf* m,
                                     ParsedPacket& out) const {
  const size_t bth = out.l4_offset + 8u;
  const size_t udp_payload = out.udp_length - 8u;
  if (udp_payload < kBthSize + kIcrcSize) return ParseStatus::kTruncatedBth;
  if (bth + kBthSize > head) return ParseStatus::kMultiSegment;
  BthView view(const_cast<uint8_t*>(frame + bth));
  const int ext = roce_extension_length(view.opcode());
  if (ext < 0) return ParseStatus::kUnknownRoceOpcode;
  const size_t fixed = kBthSize + static_cast<size_t>(ext) + view.pad_count() + kIcrcSize;
  if (udp_payload < fixed) return ParseStatus::kTruncatedRoce;
  if (bth + kBthSize + static_cast<size_t>(ext) > head) return ParseStatus::kMultiSegment;
  if (options_.verify_icrc &&
      !(m != nullptr ? verify_icrc(m, out.l3_offset, out.ip_total_length, nullptr)
                     : verify_icrc(frame + out.l3_offset, out.ip_total_length))) {
    return ParseStatus::kBadIcrc;
  }
  out.bth_offset = static_cast<uint16_t>(bth);
  out.payload_offset = static_cast<uint16_t>(bth + kBthSize + static_cast<size_t>(ext));
  out.payload_length = static_cast<uint16_t>(udp_payload - fixed);
  out.bth_opcode = view.opcode();
  out.dest_qp = view.dest_qp();
  out.psn = view.psn();
  out.ack_req = view.ack_req();
  out.kind = PacketKind::kRoce;
  return ParseStatus::kOk;
}

}  // namespace spraynet
