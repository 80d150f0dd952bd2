// CONGA's overlay between leaves (Alizadeh et al., "CONGA: Distributed Congestion-Aware Load
// Balancing for Datacenters", SIGCOMM 2014, section 3.2): the source leaf wraps each packet in
// VXLAN (RFC 7348), as the paper's implementation does, and carries CONGA's fields in VXLAN's
// reserved bits. Spines route on the outer header (its destination is the destination leaf's
// tunnel address) and raise CE; the destination leaf reads the fields and strips the overlay, so
// hosts never see it. The inner frame is left byte for byte as it was (its RoCEv2 ICRC stays
// valid), except the IPv4 ECN bits on the way out (RFC 6040: a CE mark on the outer header is
// copied to an ECN-capable inner one), which the ICRC masks.
//
//   outer Ethernet (14) | outer IPv4 (20) | UDP (8, dst 4789) | VXLAN (8) | inner frame
//
// The VXLAN word (docs/switch_emu.md, "CONGA"):
//   byte 0   flags: 0x08 (I, the VNI is valid) | 0x40 (C, CONGA fields present)
//   byte 1   LBTag (bits 7-4) | CE (bits 3-1) | FB valid (bit 0)
//   byte 2   FB_LBTag (bits 7-4) | FB_Metric (bits 3-1)
//   byte 3   0
//   byte 4-6 VNI
//   byte 7   the source leaf's id
// The outer IPv4 header copies the inner DSCP and ECN (classes, PFC and ECN marking work on the
// outer header in the fabric), TTL 64, DF set, checksum computed; the outer UDP source port is
// 0xC000 | 14 bits of the inner flow's hash (RFC 7348's entropy, for ECMP at the spines), its
// checksum 0.
#pragma once

#include <rte_mbuf.h>

#include <cstdint>
#include <optional>

#include "dataplane/wire/vxlan_tunnel.h"

namespace spraynet {

inline constexpr uint16_t kCongaOverlayBytes = kVxlanOuterBytes;
inline constexpr uint8_t kVxlanFlagConga = 0x40;
inline constexpr unsigned kCongaMaxLbTags = 16;  // LBTag is 4 bits
inline constexpr uint8_t kCongaMaxMetric = 7;    // CE and FB_Metric are 3 bits

struct CongaFields {
  uint8_t lbtag = 0;  // the source leaf's uplink (0..15)
  uint8_t ce = 0;     // the largest metric on the path so far (0..7)
  bool fb_valid = false;
  uint8_t fb_lbtag = 0;   // feedback: an uplink of the leaf this packet goes to...
  uint8_t fb_metric = 0;  // ...and the CE seen on it lately (0..7)
  uint8_t src_leaf = 0;
  uint32_t vni = 0;  // 24 bits
};

struct CongaTunnel {
  uint32_t src_vtep = 0;  // host byte order
  uint32_t dst_vtep = 0;
  uint32_t flow_hash = 0;  // its low 14 bits become the outer UDP source port's
};

// Prepends the overlay to an Ethernet frame carrying IPv4 (untagged or one VLAN tag); the outer
// MACs are the inner ones (a routed port rewrites them). False, with the frame unchanged, when
// the frame is not IPv4 or the mbuf lacks 50 bytes of headroom.
bool conga_encapsulate(rte_mbuf* m, const CongaTunnel& tunnel, const CongaFields& fields);

// The fields of a frame that carries the overlay (untagged outer IPv4 without options, UDP to
// 4789, VXLAN flags with I and C, the whole overlay and an inner Ethernet header in the first
// segment), and its outer destination address (host order) in *dst_vtep; nullopt otherwise.
std::optional<CongaFields> conga_parse(const rte_mbuf* m, uint32_t* dst_vtep = nullptr);

// CE := max(CE, metric) in place (metric capped at 7). False when the frame has no overlay.
bool conga_raise_ce(rte_mbuf* m, uint8_t metric);

// Strips the overlay: the inner frame is left, with the outer CE mark copied to an ECN-capable
// inner IPv4 header (its checksum updated). False, the frame unchanged, when it has none.
bool conga_decapsulate(rte_mbuf* m);

}  // namespace spraynet
