#include "dataplane/wire/vxlan_tunnel.h"

#include <rte_ip.h>

#include <cstring>

#include "dataplane/wire/byte_order.h"
#include "dataplane/wire/conga_overlay.h"
#include "dataplane/wire/conweave_overlay.h"

namespace spraynet {

namespace {

constexpr size_t kOuterUdp = kVxlanOuterIpOffset + 20;

// Outer IPv4 and UDP for a tunnel carrying `payload` bytes after the UDP header.
void write_outer(uint8_t* f, const uint8_t macs[12], const VxlanTunnel& t, uint8_t tos,
                 uint32_t payload) {
  std::memcpy(f, macs, 12);
  store_be16(f + 12, 0x0800);
  uint8_t* ip = f + kVxlanOuterIpOffset;
  ip[0] = 0x45;
  ip[1] = tos;
  store_be16(ip + 2, static_cast<uint16_t>(payload + 28));
  store_be16(ip + 4, 0);
  store_be16(ip + 6, 0x4000);  // DF: the overlay is never fragmented
  ip[8] = 64;
  ip[9] = 17;
  store_be16(ip + 10, 0);
  store_be32(ip + 12, t.src_vtep);
  store_be32(ip + 16, t.dst_vtep);
  auto* hdr = reinterpret_cast<rte_ipv4_hdr*>(ip);
  hdr->hdr_checksum = rte_ipv4_cksum(hdr);
  uint8_t* udp = f + kOuterUdp;
  store_be16(udp, static_cast<uint16_t>(0xC000 | (t.flow_hash & 0x3FFF)));
  store_be16(udp + 2, kVxlanUdpPort);
  store_be16(udp + 4, static_cast<uint16_t>(payload + 8));
  store_be16(udp + 6, 0);
}

}  // namespace

int ethernet_ipv4_offset(const uint8_t* frame, size_t len) {
  if (len < 14) return -1;
  size_t l3 = 14;
  uint16_t type = load_be16(frame + 12);
  if (type == 0x8100 || type == 0x88A8) {
    if (len < 18) return -1;
    type = load_be16(frame + 16);
    l3 = 18;
  }
  if (type != 0x0800 || len < l3 + 20) return -1;
  return static_cast<int>(l3);
}

uint8_t* vxlan_prepend(rte_mbuf* m, const VxlanTunnel& t, uint16_t extra) {
  const uint32_t inner_len = rte_pktmbuf_pkt_len(m);
  const uint8_t* inner = rte_pktmbuf_mtod(m, const uint8_t*);
  const int l3 = ethernet_ipv4_offset(inner, rte_pktmbuf_data_len(m));
  if (l3 < 0 || inner_len + kVxlanOuterBytes + extra > 0xFFFF) return nullptr;
  const uint8_t tos = inner[l3 + 1];
  uint8_t macs[12];
  std::memcpy(macs, inner, 12);
  auto* f = reinterpret_cast<uint8_t*>(
      rte_pktmbuf_prepend(m, static_cast<uint16_t>(kVxlanOuterBytes + extra)));
  if (f == nullptr) return nullptr;
  write_outer(f, macs, t, tos, inner_len + 8 + extra);
  return f + kVxlanWordOffset;
}

uint8_t* vxlan_control_frame(rte_mbuf* m, const uint8_t macs[12], const VxlanTunnel& t, uint8_t tos,
                             uint16_t extra) {
  auto* f = reinterpret_cast<uint8_t*>(
      rte_pktmbuf_append(m, static_cast<uint16_t>(kVxlanOuterBytes + extra)));
  if (f == nullptr) return nullptr;
  write_outer(f, macs, t, tos, 8u + extra);
  return f + kVxlanWordOffset;
}

namespace {
// vxlan_word on the frame's first `len` bytes.
const uint8_t* word_in(const uint8_t* f, size_t len, uint8_t flags, size_t after) {
  if (len < kVxlanOuterBytes + after) return nullptr;
  if (load_be16(f + 12) != 0x0800) return nullptr;
  const uint8_t* ip = f + kVxlanOuterIpOffset;
  if (ip[0] != 0x45 || ip[9] != 17) return nullptr;
  if (load_be16(f + kOuterUdp + 2) != kVxlanUdpPort) return nullptr;
  const uint8_t* v = f + kVxlanWordOffset;
  if ((v[0] & flags) != flags) return nullptr;
  return v;
}
}  // namespace

const uint8_t* vxlan_word(const rte_mbuf* m, uint8_t flags, size_t after) {
  return word_in(rte_pktmbuf_mtod(m, const uint8_t*), rte_pktmbuf_data_len(m), flags, after);
}

size_t vxlan_inner_frame_offset(const uint8_t* f, size_t len) {
  constexpr size_t kInnerEthernet = 14;
  if (word_in(f, len, kVxlanFlagI | kVxlanFlagConga,
              kCongaOverlayBytes - kVxlanOuterBytes + kInnerEthernet) != nullptr) {
    return kCongaOverlayBytes;
  }
  const uint8_t* v = word_in(f, len, kVxlanFlagI | kVxlanFlagConweave,
                             kConweaveOverlayBytes - kVxlanOuterBytes + kInnerEthernet);
  // Message 0 is data; the control messages carry no frame.
  return v != nullptr && (v[1] >> 6) == 0 ? kConweaveOverlayBytes : 0;
}

uint32_t vxlan_dst_vtep(const rte_mbuf* m) {
  return load_be32(rte_pktmbuf_mtod(m, const uint8_t*) + kVxlanOuterIpOffset + 16);
}

void vxlan_strip(rte_mbuf* m, uint16_t extra) {
  const uint8_t outer_ecn = rte_pktmbuf_mtod(m, const uint8_t*)[kVxlanOuterIpOffset + 1] & 0x3;
  rte_pktmbuf_adj(m, static_cast<uint16_t>(kVxlanOuterBytes + extra));
  uint8_t* f = rte_pktmbuf_mtod(m, uint8_t*);
  const int l3 = ethernet_ipv4_offset(f, rte_pktmbuf_data_len(m));
  if (outer_ecn != 0x3 || l3 < 0) return;
  uint8_t* ip = f + l3;
  if ((ip[1] & 0x3) == 0 || (ip[1] & 0x3) == 0x3) return;
  // RFC 1624 incremental update of the checksum for the one byte that changes.
  const uint16_t old_word = load_be16(ip);
  ip[1] |= 0x3;
  const uint16_t new_word = load_be16(ip);
  uint32_t sum =
      static_cast<uint16_t>(~load_be16(ip + 10)) + static_cast<uint16_t>(~old_word) + new_word;
  sum = (sum & 0xFFFF) + (sum >> 16);
  sum = (sum & 0xFFFF) + (sum >> 16);
  store_be16(ip + 10, static_cast<uint16_t>(~sum));
}

}  // namespace spraynet
