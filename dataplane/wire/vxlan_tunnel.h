// The tunnel both leaf overlays use between leaves (CONGA: conga_overlay.h, ConWeave:
// conweave_overlay.h): VXLAN (RFC 7348) in front of the inner Ethernet frame, with the scheme's
// fields in VXLAN's reserved bits and, for ConWeave, `extra` bytes between the VXLAN word and the
// inner frame.
//
//   outer Ethernet (14) | outer IPv4 (20) | UDP (8, dst 4789) | VXLAN (8) | extra | inner frame
//
// The outer Ethernet copies the inner MACs (a routed port rewrites them); the outer IPv4 has the
// tunnel addresses, the DSCP and ECN given (the inner packet's: classes, PFC and ECN marking work
// on the outer header at the spines), TTL 64, DF and its checksum; the UDP source port is
// 0xC000 | 14 bits of the inner flow's hash (RFC 7348's entropy for ECMP), its checksum 0.
#pragma once

#include <rte_mbuf.h>

#include <cstddef>
#include <cstdint>

namespace spraynet {

inline constexpr uint16_t kVxlanUdpPort = 4789;
inline constexpr uint16_t kVxlanOuterBytes = 14 + 20 + 8 + 8;  // through the VXLAN word
inline constexpr size_t kVxlanOuterIpOffset = 14;
inline constexpr size_t kVxlanWordOffset = 14 + 20 + 8;
inline constexpr uint8_t kVxlanFlagI = 0x08;

struct VxlanTunnel {
  uint32_t src_vtep = 0;  // host byte order
  uint32_t dst_vtep = 0;
  uint32_t flow_hash = 0;  // its low 14 bits become the outer UDP source port's
};

// The IPv4 header's offset in an Ethernet frame (untagged or one 802.1Q/802.1ad tag), or -1.
int ethernet_ipv4_offset(const uint8_t* frame, size_t len);

// Prepends the outer headers and `extra` bytes to the IPv4 frame in `m`, the outer TOS copied
// from the inner; returns the VXLAN word (8 bytes, then `extra`) for the caller to fill, or null
// with the frame unchanged when it is not IPv4 or the headroom is short.
uint8_t* vxlan_prepend(rte_mbuf* m, const VxlanTunnel& tunnel, uint16_t extra);

// Writes a frame of the outer headers and `extra` bytes and nothing inside (a control message
// between leaves) into the empty mbuf `m`, with these MACs and TOS; returns the VXLAN word, or
// null when the mbuf has no room.
uint8_t* vxlan_control_frame(rte_mbuf* m, const uint8_t macs[12], const VxlanTunnel& tunnel,
                             uint8_t tos, uint16_t extra);

// The VXLAN word of a frame with the overlay (untagged outer IPv4 without options, UDP to 4789,
// every bit of `flags` set, and `after` more bytes in the first segment), or null.
const uint8_t* vxlan_word(const rte_mbuf* m, uint8_t flags, size_t after);

// Where the inner frame begins in a data frame of either leaf overlay (CONGA: 50 bytes in, after
// the VXLAN word; ConWeave: 58, after its 8 extra bytes), or 0 for anything else (not VXLAN to
// 4789 on untagged outer IPv4 without options, another VXLAN use, a ConWeave control message,
// or a frame too short to hold an inner Ethernet header there).
size_t vxlan_inner_frame_offset(const uint8_t* frame, size_t len);

// The outer IPv4 destination (host order) of a frame vxlan_word accepted.
uint32_t vxlan_dst_vtep(const rte_mbuf* m);

// Takes the outer headers and `extra` bytes off; a CE mark on the outer header is copied to an
// ECN-capable inner IPv4 header, its checksum updated (RFC 6040).
void vxlan_strip(rte_mbuf* m, uint16_t extra);

}  // namespace spraynet
