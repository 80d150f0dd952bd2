// Parses Ethernet / 802.1Q / IPv4 / UDP / RoCEv2 BTH (+RETH/AETH) headers in place, without
// copying and without reading one byte past the packet's data. Every malformed case has its
// own status so that a stage can count it under its own name; nothing malformed is "Ok".
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

struct rte_mbuf;

namespace spraynet {

// Every parse status, once: X(enumerator, name). The enum, to_string() and the counter names
// (parse_<name>) that the nodes' drop counters, JSON and telemetry use are all made from it.
#define SPRAYNET_PARSE_STATUSES(X)                                                           \
  X(kOk, ok)                                                                                 \
  /* chained mbuf whose headers (up to RoCE's extension headers) are not all in its first    \
     segment */                                                                              \
  X(kMultiSegment, multi_segment)                                                            \
  X(kTruncatedEthernet, truncated_ethernet) /* shorter than an Ethernet header */            \
  X(kTruncatedVlan, truncated_vlan)         /* 802.1Q/802.1ad tag cut short */               \
  /* EtherType neither IPv4 nor MAC control (IPv6, ARP, ...) */                              \
  X(kNotIpv4, not_ipv4)                                                                      \
  X(kTruncatedIpv4, truncated_ipv4) /* shorter than a 20-byte IPv4 header */                 \
  X(kBadIpVersion, bad_ip_version)  /* EtherType IPv4 but version field != 4 */              \
  X(kBadIhl, bad_ihl)               /* IHL < 5, or the options run past the data */          \
  /* total length < IHL*4, or more than the frame carries */                                 \
  X(kBadTotalLength, bad_total_length)                                                       \
  X(kBadIpChecksum, bad_ip_checksum)                                                         \
  /* fewer than 8 bytes of UDP header inside the IP datagram */                              \
  X(kTruncatedUdp, truncated_udp)                                                            \
  X(kUdpLengthMismatch, udp_length_mismatch) /* UDP length != IP payload length */           \
  X(kTruncatedTcp, truncated_tcp)            /* IP payload too short for a TCP header */     \
  X(kTruncatedBth, truncated_bth)            /* UDP 4791 with fewer bytes than BTH + ICRC */ \
  X(kUnknownRoceOpcode, unknown_roce_opcode) /* reserved or unsupported BTH opcode */        \
  /* extension headers + pad + ICRC longer than the UDP payload */                           \
  X(kTruncatedRoce, truncated_roce)                                                          \
  X(kBadIcrc, bad_icrc) /* only when ParseOptions::verify_icrc */                            \
  X(kTruncatedMacControl, truncated_mac_control)

// clang-format off
enum class ParseStatus : uint8_t {
#define SPRAYNET_PARSE_STATUS_ENUM(e, name) e,
  SPRAYNET_PARSE_STATUSES(SPRAYNET_PARSE_STATUS_ENUM)
#undef SPRAYNET_PARSE_STATUS_ENUM
  kCount
};
// clang-format on
static_assert(static_cast<int>(ParseStatus::kOk) == 0, "parse counters skip index 0 (ok)");

inline constexpr size_t kParseStatusCount = static_cast<size_t>(ParseStatus::kCount);

// "truncated_udp"; "invalid" for kCount or a value out of range.
std::string_view to_string(ParseStatus s);
// The drop counter's name: "parse_truncated_udp" (the nodes' JSON keys); "parse_invalid" for a
// value out of range.
std::string_view counter_name(ParseStatus s);

enum class PacketKind : uint8_t {
  kUnknown = 0,  // not parsed far enough to say (status != kOk)
  kMacControl,   // EtherType 0x8808 (PFC, PAUSE): goes to the PFC stage
  kIpv4,         // IPv4 that is not UDP or TCP, or a fragment (no L4 header to read)
  kTcp,
  kUdp,
  kRoce,  // UDP destination port 4791 with a well-formed BTH
};

struct ParseOptions {
  bool verify_ip_checksum = true;
  bool verify_icrc = false;  // costs a CRC over the whole packet; NICs do it, switches do not
};

// Offsets are from the first byte of the frame. Fields beyond what `kind` says are zero.
struct ParsedPacket {
  PacketKind kind = PacketKind::kUnknown;
  uint8_t vlan_tags = 0;
  uint8_t pcp = 0;          // priority code point of the outer tag (0 when untagged)
  uint16_t vlan_id = 0;     // VID of the outer tag
  uint16_t ether_type = 0;  // after any tags
  uint16_t l3_offset = 0;
  uint16_t l4_offset = 0;
  uint16_t bth_offset = 0;
  uint16_t payload_offset = 0;  // RoCE: first byte after the extension headers
  uint16_t ip_total_length = 0;
  uint8_t ihl_bytes = 0;
  uint8_t tos = 0;
  uint8_t ttl = 0;
  uint8_t ip_proto = 0;
  bool ip_fragment = false;
  uint32_t src_ip = 0;  // host byte order
  uint32_t dst_ip = 0;
  uint16_t src_port = 0;
  uint16_t dst_port = 0;
  uint16_t udp_length = 0;    // UDP only
  uint16_t udp_checksum = 0;  // as on the wire; on a sprayed RoCE packet it carries the PPCID
  // RoCE
  uint8_t bth_opcode = 0;
  uint32_t dest_qp = 0;
  uint32_t psn = 0;
  bool ack_req = false;
  uint16_t payload_length = 0;  // RoCE payload without pad and ICRC
  // RoCE behind INT (int_header.h: UDP port kIntUdpPort or kIntEchoUdpPort, an INT-MD shim
  // naming 4791): the shim's offset, else 0. dst_port is then 4791, the wire's port is in the
  // frame, bth_offset is past the stack, and the ICRC is not checked (it holds after int_strip).
  uint16_t int_offset = 0;

  uint8_t dscp() const { return tos >> 2; }
  // Bytes from the IPv4 header to the end of the IP datagram (excludes Ethernet padding).
  uint16_t l3_length() const { return ip_total_length; }
};

// For a stage handed an mbuf with its ParsedPacket: whether they describe bytes the mbuf really
// holds, so that a caller's mistake reads no memory past the packet. A RoCE packet whose headers
// up to `headers_end` are in the first segment, and whose datagram, which may go on in a chain,
// holds `after_headers` more bytes after them.
bool roce_packet_in_mbuf(const rte_mbuf* m, const ParsedPacket& p, size_t headers_end,
                         size_t after_headers);

class PacketParser {
 public:
  explicit PacketParser(ParseOptions options = {}) : options_(options) {}

  ParseStatus parse(const uint8_t* frame, size_t len, ParsedPacket& out) const;
  // A chained mbuf is parsed from its first segment, where its headers must be; the lengths
  // are checked against the whole packet.
  ParseStatus parse(const rte_mbuf* m, ParsedPacket& out) const;
  // The frame that starts `offset` bytes into m's first segment (a tunnel's inner frame), its
  // lengths checked against the rest of the packet and offsets from its own first byte. The
  // ICRC is not verified here, whatever the options say.
  ParseStatus parse_at(const rte_mbuf* m, size_t offset, ParsedPacket& out) const;

 private:
  ParseOptions options_;
};

}  // namespace spraynet
