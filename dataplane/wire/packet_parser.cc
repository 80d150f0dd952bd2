#include "dataplane/wire/packet_parser.h"

#include <rte_mbuf.h>

#include <cstring>
#include <iterator>

#include "dataplane/wire/byte_order.h"
#include "dataplane/wire/icrc.h"
#include "dataplane/wire/int_header.h"
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
// either way). The 20 bytes every header has are summed unrolled, options after them.
//
// No fold: 2^16 = 1 (mod 0xFFFF), so folding keeps the sum's value mod 0xFFFF, and a non-zero
// sum folds to a value in 1..0xFFFF; it folds to 0xFFFF exactly when it is a non-zero multiple
// of 0xFFFF. That test is a multiply and a compare; the four folds were a dozen instructions.
inline bool ipv4_header_checksum_ok(const uint8_t* ip, size_t ihl) {
  auto word = [ip](size_t i) {
    uint32_t w;
    std::memcpy(&w, ip + i, 4);
    return uint64_t{w};
  };
  uint64_t sum = word(0) + word(4) + word(8) + word(12) + word(16);  // ihl >= 20
  for (size_t i = 20; i < ihl; i += 4) sum += word(i);
  return sum != 0 && sum % 0xFFFF == 0;
}

// RoCE's fields, once the checks have passed. BTH bytes 4-7 are FECN/BECN + DestQP, 8-11
// AckReq + PSN: one 32-bit load each, masked to the 24-bit field (a byte at a time, as the
// BthView accessors read them, was twice the instructions).
[[gnu::always_inline]] inline ParseStatus roce_fields(const uint8_t* b, size_t bth, size_t headers,
                                                      size_t fixed, size_t udp_payload,
                                                      ParsedPacket& out) {
  const uint32_t qp_word = load_be32(b + 4);
  const uint32_t psn_word = load_be32(b + 8);
  out.bth_offset = static_cast<uint16_t>(bth);
  out.payload_offset = static_cast<uint16_t>(bth + headers);
  out.payload_length = static_cast<uint16_t>(udp_payload - fixed);
  out.bth_opcode = b[0];
  out.dest_qp = qp_word & 0xFFFFFFu;
  out.psn = psn_word & 0xFFFFFFu;
  out.ack_req = (psn_word >> 31) != 0;
  out.kind = PacketKind::kRoce;
  return ParseStatus::kOk;
}

// The end of a RoCE parse under ParseOptions::verify_icrc, out of line and tail-called: with
// the ICRC call inside it, the whole parser saved and restored six registers on every packet.
// The BTH is readable and its extension headers fit (checked by the caller).
template <bool kChain>
[[gnu::noinline]] ParseStatus roce_with_icrc(const uint8_t* frame, const rte_mbuf* m, size_t bth,
                                             size_t udp_payload, ParsedPacket& out) {
  if (!(kChain ? verify_icrc(m, out.l3_offset, out.ip_total_length, nullptr)
               : verify_icrc(frame + out.l3_offset, out.ip_total_length))) {
    return ParseStatus::kBadIcrc;
  }
  const uint8_t* b = frame + bth;
  const size_t headers = kBthSize + static_cast<size_t>(roce_extension_length(b[0]));
  const size_t fixed = headers + ((b[1] >> 4) & 0x3u) + kIcrcSize;
  return roce_fields(b, bth, headers, fixed, udp_payload, out);
}

// The parse, once, for both entry points. It is one function body on purpose: split into calls
// (frame, IPv4, RoCE) each call saved and restored registers and re-read `out`, a quarter of
// the parser's instructions. kChain: a chained mbuf, `head` bytes at `frame` readable of a
// packet of `total`; otherwise head == total and the multi-segment checks fold away.
//
// Every check, its order and every field written before a failing check are the contract
// (tests and fuzz/fuzz_packet_parser.cc compare statuses and fields): keep them when editing.
template <bool kChain>
struct Parse {
  const ParseOptions& options;
  const uint8_t* frame;
  size_t head;
  size_t total;
  const rte_mbuf* m;  // kChain only

  // A read of the first `n` bytes: the packet is too short (`short_status`), or they are not all
  // in the first segment of a chain, or they can be read (kOk).
  [[gnu::always_inline]] ParseStatus readable(size_t n, ParseStatus short_status) const {
    if (n > total) return short_status;
    return kChain && n > head ? ParseStatus::kMultiSegment : ParseStatus::kOk;
  }
  [[gnu::always_inline]] bool beyond_head(size_t n) const { return n > (kChain ? head : total); }

  [[gnu::always_inline]] ParseStatus frame_headers(ParsedPacket& out) const {
    out = ParsedPacket{};
    // Nearly every packet is untagged IPv4 without options: for those the general path's first
    // checks (Ethernet and IPv4 header readable, no tag, version 4, IHL 5) are one length test
    // and three compares, and the rest of the parse runs with constant offsets. Every other
    // frame takes the general path below, which would give these bytes the same answer.
    if (!kChain && total >= kEthHeader + 20 && frame[12] == 0x08 && frame[13] == 0x00 &&
        frame[kEthHeader] == 0x45) [[likely]] {
      out.ether_type = kEtherIpv4;
      out.l3_offset = kEthHeader;
      return ipv4_body(kEthHeader, 20, out);
    }
    if (auto st = readable(kEthHeader, ParseStatus::kTruncatedEthernet); st != ParseStatus::kOk) {
      return st;
    }
    size_t off = 12;
    uint16_t type = load_be16(frame + off);
    // Up to two tags (802.1ad outer + 802.1Q inner); the outer tag's PCP is the packet's
    // priority.
    while ((type == kEtherVlan || type == kEtherQinQ) && out.vlan_tags < 2) [[unlikely]] {
        if (auto st = readable(off + 2 + 4 + 2, ParseStatus::kTruncatedVlan);
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

    if (type == kEtherMacControl) [[unlikely]] {
      // opcode (2) + PFC class-enable vector (2) + 8 pause times (16)
      if (auto st = readable(out.l3_offset + 2u, ParseStatus::kTruncatedMacControl);
          st != ParseStatus::kOk) {
        return st;
      }
      out.kind = PacketKind::kMacControl;
      return ParseStatus::kOk;
    }
    if (type != kEtherIpv4) [[unlikely]] {
      return ParseStatus::kNotIpv4;
    }
    return ipv4(off + 2, out);
  }

  [[gnu::always_inline]] ParseStatus ipv4(size_t l3, ParsedPacket& out) const {
    if (auto st = readable(l3 + 20, ParseStatus::kTruncatedIpv4); st != ParseStatus::kOk) {
      return st;
    }
    const uint8_t* ip = frame + l3;
    if ((ip[0] >> 4) != 4) [[unlikely]] {
      return ParseStatus::kBadIpVersion;
    }
    const size_t ihl = size_t{ip[0] & 0x0Fu} * 4;
    if (ihl < 20) [[unlikely]] {
      return ParseStatus::kBadIhl;
    }
    if (auto st = readable(l3 + ihl, ParseStatus::kBadIhl); st != ParseStatus::kOk) return st;
    return ipv4_body(l3, ihl, out);
  }

  // The IPv4 header from its total length on; its first `ihl` bytes (>= 20) are readable.
  [[gnu::always_inline]] ParseStatus ipv4_body(size_t l3, size_t ihl, ParsedPacket& out) const {
    const uint8_t* ip = frame + l3;
    const uint16_t ip_total = load_be16(ip + 2);
    // Ethernet may pad the frame past the datagram (60-byte minimum); it may never cut it short.
    if (ip_total < ihl || l3 + ip_total > total) [[unlikely]] {
      return ParseStatus::kBadTotalLength;
    }
    if (options.verify_ip_checksum && !ipv4_header_checksum_ok(ip, ihl)) [[unlikely]] {
      return ParseStatus::kBadIpChecksum;
    }
    const uint8_t proto = ip[9];
    const bool fragment = (load_be16(ip + 6) & 0x3FFF) != 0;  // MF set or a non-zero offset
    out.ip_total_length = ip_total;
    out.ihl_bytes = static_cast<uint8_t>(ihl);
    out.tos = ip[1];
    out.ttl = ip[8];
    out.ip_proto = proto;
    out.src_ip = load_be32(ip + 12);
    out.dst_ip = load_be32(ip + 16);
    out.ip_fragment = fragment;
    out.kind = PacketKind::kIpv4;
    if (fragment) return ParseStatus::kOk;

    const size_t l4 = l3 + ihl;
    const uint8_t* l4p = frame + l4;
    if (proto == kIpProtoTcp) {
      if (ip_total < ihl + 20) return ParseStatus::kTruncatedTcp;
      if (beyond_head(l4 + 4)) return ParseStatus::kMultiSegment;
      out.l4_offset = static_cast<uint16_t>(l4);
      out.src_port = load_be16(l4p);
      out.dst_port = load_be16(l4p + 2);
      out.kind = PacketKind::kTcp;
      return ParseStatus::kOk;
    }
    if (proto != kIpProtoUdp) return ParseStatus::kOk;
    if (ip_total < ihl + 8) [[unlikely]] {
      return ParseStatus::kTruncatedUdp;
    }
    if (beyond_head(l4 + 8)) [[unlikely]] {
      return ParseStatus::kMultiSegment;
    }
    const uint16_t udp_length = load_be16(l4p + 4);
    const uint16_t dst_port = load_be16(l4p + 2);
    out.l4_offset = static_cast<uint16_t>(l4);
    out.src_port = load_be16(l4p);
    out.dst_port = dst_port;
    out.udp_length = udp_length;
    out.udp_checksum = load_be16(l4p + 6);
    if (udp_length != ip_total - ihl) [[unlikely]] {
      return ParseStatus::kUdpLengthMismatch;
    }
    out.kind = PacketKind::kUdp;
    if (dst_port != kRoceV2UdpPort) [[unlikely]] {
      if ((dst_port | 1) == (kIntEchoUdpPort | 1)) return int_md(l4, udp_length - 8u, out);
      return ParseStatus::kOk;
    }
    return roce(l4 + 8, udp_length - 8u, out, options.verify_icrc);
  }

  // UDP to kIntUdpPort or kIntEchoUdpPort (int_header.h): RoCEv2 behind an INT-MD shim (type
  // INT-MD, NPT 1, original port 4791) is RoCE, its BTH after the INT, and says so with
  // int_offset, dst_port the original 4791 (what classification, TCAM rules and hashing
  // read); the wire's port stays in the frame. Anything else on those ports is plain UDP.
  [[gnu::noinline]] ParseStatus int_md(size_t l4, size_t udp_payload, ParsedPacket& out) const {
    const size_t shim = l4 + 8;
    if (udp_payload < kIntShimBytes) return ParseStatus::kOk;
    if (beyond_head(shim + kIntShimBytes)) return ParseStatus::kMultiSegment;
    const uint8_t* s = frame + shim;
    if ((s[0] >> 4) != kIntTypeMd || ((s[0] >> 2) & 3) != kIntNptUdpPayload ||
        load_be16(s + 2) != kRoceV2UdpPort) {
      return ParseStatus::kOk;
    }
    const size_t int_bytes = kIntShimBytes + size_t{s[1]} * 4;
    if (int_bytes > udp_payload) return ParseStatus::kOk;
    out.int_offset = static_cast<uint16_t>(shim);
    out.dst_port = kRoceV2UdpPort;
    return roce(shim + int_bytes, udp_payload - int_bytes, out, false);
  }

  // `bth`: its offset; `udp_payload`: the UDP length less its header (the UDP length equals
  // the IP payload's, >= 8, when this runs).
  // `check_icrc`: ParseOptions::verify_icrc, except behind INT, where the ICRC holds only once
  // int_strip has restored the frame (int_header.h), so whoever strips checks it then.
  [[gnu::always_inline]] ParseStatus roce(size_t bth, size_t udp_payload, ParsedPacket& out,
                                          bool check_icrc) const {
    if (udp_payload < kBthSize + kIcrcSize) [[unlikely]] {
      return ParseStatus::kTruncatedBth;
    }
    if (beyond_head(bth + kBthSize)) [[unlikely]] {
      return ParseStatus::kMultiSegment;
    }
    const uint8_t* b = frame + bth;
    const uint8_t opcode = b[0];
    const int ext = roce_extension_length(opcode);
    if (ext < 0) [[unlikely]] {
      return ParseStatus::kUnknownRoceOpcode;
    }
    const size_t headers = kBthSize + static_cast<size_t>(ext);
    const size_t fixed = headers + ((b[1] >> 4) & 0x3u) + kIcrcSize;  // + pad count
    if (udp_payload < fixed) [[unlikely]] {
      return ParseStatus::kTruncatedRoce;
    }
    if (beyond_head(bth + headers)) [[unlikely]] {
      return ParseStatus::kMultiSegment;
    }
    if (check_icrc) return roce_with_icrc<kChain>(frame, m, bth, udp_payload, out);
    return roce_fields(b, bth, headers, fixed, udp_payload, out);
  }
};
}  // namespace

bool roce_packet_in_mbuf(const rte_mbuf* m, const ParsedPacket& p, size_t headers_end,
                         size_t after_headers) {
  if (p.kind != PacketKind::kRoce || p.bth_offset == 0) return false;
  const size_t end = size_t{p.l3_offset} + p.ip_total_length;
  return end <= m->pkt_len && headers_end <= m->data_len && headers_end + after_headers <= end;
}

namespace {
// A chained mbuf (pkt_len >= data_len), out of line: the call in it would otherwise make the
// one-segment parse save and restore registers on every packet.
// `offset`: where the frame starts in the first segment (parse_at), at most data_len.
[[gnu::noinline]] ParseStatus parse_chain(const ParseOptions& options, const rte_mbuf* m,
                                          size_t offset, ParsedPacket& out) {
  const uint8_t* frame = rte_pktmbuf_mtod(m, const uint8_t*) + offset;
  const ParseStatus st =
      Parse<true>{options, frame, m->data_len - offset, m->pkt_len - offset, m}.frame_headers(out);
  if (st == ParseStatus::kMultiSegment) out = ParsedPacket{};  // nothing half-read is kept
  return st;
}
}  // namespace

ParseStatus PacketParser::parse(const rte_mbuf* m, ParsedPacket& out) const {
  // The parse starts from a cleared ParsedPacket; the early answers clear it themselves.
  if (m->next == nullptr) [[likely]] {
    if (m->nb_segs == 1 && m->pkt_len == m->data_len) [[likely]] {
      return Parse<false>{options_, rte_pktmbuf_mtod(m, const uint8_t*), m->data_len, m->data_len,
                          nullptr}
          .frame_headers(out);
    }
    out = ParsedPacket{};
    return ParseStatus::kMultiSegment;
  }
  if (m->pkt_len < m->data_len) {  // an inconsistent chain
    out = ParsedPacket{};
    return ParseStatus::kMultiSegment;
  }
  return parse_chain(options_, m, 0, out);
}

ParseStatus PacketParser::parse_at(const rte_mbuf* m, size_t offset, ParsedPacket& out) const {
  if (offset > m->data_len || m->pkt_len < m->data_len) {
    out = ParsedPacket{};
    return ParseStatus::kMultiSegment;  // not in the first segment, or an inconsistent chain
  }
  ParseOptions o = options_;
  o.verify_icrc = false;  // its offsets would be the inner frame's, the mbuf's are the outer's
  return parse_chain(o, m, offset, out);
}

ParseStatus PacketParser::parse(const uint8_t* frame, size_t len, ParsedPacket& out) const {
  return Parse<false>{options_, frame, len, len, nullptr}.frame_headers(out);
}

}  // namespace spraynet
