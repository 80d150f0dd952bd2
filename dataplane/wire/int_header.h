// The in-band network telemetry (INT) HPCC needs on the wire: switches append one record per
// egress to a RoCEv2 data packet, the receiving NIC reads them, echoes them in its ACK and strips
// them before the host. The format is INT-MD over UDP of the P4.org "In-band Network Telemetry
// (INT) Dataplane Specification" v2.1 (2020): §5.6.2 "INT over TCP/UDP" (the shim, with the UDP
// destination port saying INT follows) and §5.7 "INT-MD Metadata Header Format".
//
//   Eth | IPv4 | UDP (dst kIntUdpPort) | shim (4) | INT-MD header (12) | stack (24 per hop)
//       | the original UDP payload: BTH ... payload ... ICRC, unchanged
//
// Shim (§5.6.2), one word:
//   Type (4b) = 1 INT-MD | NPT (2b) = 1: the original UDP payload follows the stack and the shim's
//   last two bytes hold the original UDP destination port | 2 reserved bits | Length (8b) = the
//   INT-MD header and stack in 4-byte words, the shim itself NOT counted (so since v2.0; 3 + 6n
//   here) | original UDP destination port (16b; 4791).
// INT-MD metadata header (§5.7), three words:
//   Ver (4b) = 2 | D | E (Remaining Hop Count was 0 at a hop) | M (a hop had no room: MTU) |
//   12 reserved bits | Hop ML (5b) = 6 words per hop | Remaining Hop Count (8b)
//   Instruction Bitmap (16b) = 0x1400: bit 3 (queue ID + occupancy) and bit 5 (egress
//   timestamp); bit 0 is the most significant | Domain Specific ID (16b) = kIntHpccDomainId
//   DS Instruction (16b) = 0xC000: this domain's bits 0 (egress TX bytes, 8 bytes) and 1 (egress
//   line rate, 4 bytes) | DS Flags (16b) = 0
// Stack: newest hop first (each hop pushes its record on top, §5.7). One record, 6 words, in the
// order of its instruction bits, then the domain-specific metadata (§5.7: appended to the
// baseline metadata), all big-endian:
//   word 0     bit 3: queue ID (8b) | queue occupancy (24b) in 80-byte cells (ns-3 HPCC's
//              IntHop::qlenUnit), rounded down, at most 2^24 - 2 cells (all ones means "invalid")
//   words 1-2  bit 5: egress timestamp, ns
//   words 3-4  DS bit 0: bytes the egress port has sent, its 64-bit counter
//   word 5     DS bit 1: the egress port's line rate, Mbit/s
// Timestamps and byte counts are 64 bits on the wire (ns-3 packs them in 24 and 20 bits and
// unwraps); no realistic run wraps them, so what a parser reads is what HPCC subtracts.
//
// Checksums: the IPv4 header checksum is patched for every length change (RFC 1624). The UDP
// checksum is left as it is: 0 stays 0 (RFC 768: none; the spec's §5.5 then forbids updating it);
// a non-zero one is not a checksum in this project but the PPCID (ppcid.h), which the fabric
// reads there and which INT must not touch. The ICRC covers the UDP length and port and the bytes
// after the UDP header, so it does not check while INT is in the packet; int_strip restores the
// frame byte for byte, and with it the ICRC. Ethernet padding past the IPv4 datagram stays at the
// end of the frame.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

struct rte_mbuf;

namespace spraynet {

// The UDP destination port that says INT follows (§5.6.2's INT_TBD, which IANA has not
// assigned). 4792, the port after RoCEv2's 4791: inside the fabric only, and never 4791 itself,
// or a RoCE parser would read the shim as a BTH. Every function takes the port as a parameter.
inline constexpr uint16_t kIntUdpPort = 4792;
// The port of an ACK that carries the records its data packet collected back to the sender
// (HPCC's echo): a different port so that no switch pushes records on the way back. The parser
// reads RoCE behind INT on both.
inline constexpr uint16_t kIntEchoUdpPort = 4793;
inline constexpr uint8_t kIntTypeMd = 1;
inline constexpr uint8_t kIntNptUdpPayload = 1;
inline constexpr uint8_t kIntMdVersion = 2;
inline constexpr size_t kIntShimBytes = 4;
inline constexpr size_t kIntMdHeaderBytes = 12;
inline constexpr size_t kIntHeaderBytes = kIntShimBytes + kIntMdHeaderBytes;
inline constexpr uint8_t kIntHopMlWords = 6;  // 1 + 2 (bits 3, 5) + 2 + 1 (DS bits 0, 1)
inline constexpr size_t kIntHopBytes = kIntHopMlWords * 4;
inline constexpr uint16_t kIntInstructionBitmap = 0x1000 | 0x0400;  // bits 3 and 5
// This domain's ID (§5.7: operators assign 0x0001-0xFFFF): "HP", for HPCC.
inline constexpr uint16_t kIntHpccDomainId = 0x4850;
inline constexpr uint16_t kIntHpccDsInstruction = 0x8000 | 0x4000;  // DS bits 0 and 1
inline constexpr uint32_t kIntQlenCellBytes = 80;
inline constexpr uint32_t kIntMaxQlenCells = 0xFFFFFE;
// The shim's 8-bit Length counts the 3-word header and 6 words per hop: 42 hops at most.
inline constexpr uint8_t kIntMaxHops = (255 - kIntMdHeaderBytes / 4) / kIntHopMlWords;

// One egress's record, in the units of the wire.
struct IntHopRecord {
  uint8_t queue_id = 0;
  uint64_t qlen_bytes = 0;  // written as 80-byte cells (rounded down); parsed as cells x 80
  uint64_t egress_ts_ns = 0;
  uint64_t tx_bytes = 0;
  uint32_t line_rate_mbps = 0;
};

// An INT frame's header fields and records.
struct IntStack {
  std::array<IntHopRecord, kIntMaxHops> hop{};  // path order: hop[0] is the first switch's
  uint8_t nhop = 0;
  uint16_t original_dport = 0;  // from the shim (NPT 1)
  uint8_t length_words = 0;     // the shim's Length: the INT-MD header and stack, in words
  uint8_t remaining_hops = 0;
  bool discard = false;        // D
  bool hops_exceeded = false;  // E
  bool mtu_exceeded = false;   // M
  uint16_t ds_flags = 0;
  uint16_t shim_offset = 0;  // from the (inner, in a leaf overlay) frame's first byte

  std::span<const IntHopRecord> hops() const { return {hop.data(), nhop}; }
  // Bytes the INT takes in the frame: shim, header, stack.
  size_t int_bytes() const { return kIntShimBytes + size_t{length_words} * 4; }
};

enum class IntPushResult : uint8_t {
  kPushed,        // the record is on top of the stack; Remaining Hop Count decremented
  kHopsExceeded,  // Remaining Hop Count was 0: E set, no record (§5.7)
  kMtuExceeded,   // no room for the record (frame limit, buffer, or IPv4 length): M set, none
  kNotInt,        // not an INT frame of this format on this port: left as it was
};
std::string_view to_string(IntPushResult r);

// On a frame in a vector (Ethernet, optionally one or two VLAN tags, IPv4, UDP). Each refuses
// anything else, leaving it unchanged: too short, a bad IPv4 checksum or length, a fragment,
// another port, a shim or header of another type, version or format, a Length past the UDP
// payload, a stack that is not whole records. None reads past the frame.

// Turns a RoCEv2 frame (UDP destination port 4791, a valid BTH) into an INT one with an empty
// stack and Remaining Hop Count max_hops (at most kIntMaxHops). False when it is not one or
// port is 4791.
bool int_insert(std::vector<uint8_t>& frame, uint8_t max_hops, uint16_t port = kIntUdpPort);
// Pushes one record on top of the stack (a transit hop, §5.7). A frame would be longer than
// max_frame_len (the egress MTU, as a frame length): M set, kMtuExceeded. Inside a leaf
// overlay (CONGA's or ConWeave's VXLAN, vxlan_inner_frame_offset) the record goes on the inner
// packet's INT and the outer IPv4 and UDP lengths grow with it: the hops between the leaves are
// transit hops of the inner packet, as they are without the overlay. (Not INT over VXLAN-GPE,
// the spec's §5.6.3: the source put INT in the inner packet before the overlay was added.)
IntPushResult int_push_hop(std::vector<uint8_t>& frame, const IntHopRecord& record,
                           uint16_t port = kIntUdpPort, size_t max_frame_len = SIZE_MAX);
// The INT of a frame (or of the inner frame of a leaf overlay), its records oldest first.
std::optional<IntStack> int_parse(std::span<const uint8_t> frame, uint16_t port = kIntUdpPort);
// Removes shim, header and stack and restores the original destination port and lengths; with
// `taken`, what int_parse would have read is left there (one parse for both).
bool int_strip(std::vector<uint8_t>& frame, uint16_t port = kIntUdpPort,
               IntStack* taken = nullptr);

// The same on an mbuf, whose headers and INT must lie in its first segment (the payload after
// them may go on in a chain). Insert and push move the headers before the insertion point
// forward into the headroom (rte_pktmbuf_prepend); without enough headroom insert refuses and
// push sets M. Strip moves them back and trims the front (rte_pktmbuf_adj).
bool int_insert(rte_mbuf* m, uint8_t max_hops, uint16_t port = kIntUdpPort);
IntPushResult int_push_hop(rte_mbuf* m, const IntHopRecord& record, uint16_t port = kIntUdpPort,
                           size_t max_frame_len = SIZE_MAX);
std::optional<IntStack> int_parse(const rte_mbuf* m, uint16_t port = kIntUdpPort);
bool int_strip(rte_mbuf* m, uint16_t port = kIntUdpPort, IntStack* taken = nullptr);
// Makes `bytes` of headroom in m's first segment by moving its data towards the end of its
// buffer, for a source that will insert INT and the hops that push on it (the default headroom,
// 128 bytes, holds the header and four records). False, m unchanged, when the first segment
// lacks the room, or its buffer is indirect or shared.
bool int_make_headroom(rte_mbuf* m, size_t bytes);

}  // namespace spraynet
