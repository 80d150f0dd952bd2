#include "dataplane/wire/conga_overlay.h"

#include <rte_ip.h>

#include <cstring>

#include "dataplane/wire/byte_order.h"

namespace spraynet {

namespace {

constexpr size_t kOuterIp = 14;
constexpr size_t kOuterUdp = kOuterIp + 20;
constexpr size_t kVxlan = kOuterUdp + 8;
constexpr size_t kInner = kVxlan + 8;

// The IPv4 header's offset in an Ethernet frame (untagged or one 802.1Q/802.1ad tag), or -1.
int inner_ipv4_offset(const uint8_t* frame, size_t len) {
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

// The overlay's VXLAN word, if the first segment holds a frame with one.
const uint8_t* overlay(const rte_mbuf* m) {
  if (rte_pktmbuf_data_len(m) < kInner + 14) return nullptr;
  const uint8_t* f = rte_pktmbuf_mtod(m, const uint8_t*);
  if (load_be16(f + 12) != 0x0800) return nullptr;
  const uint8_t* ip = f + kOuterIp;
  if (ip[0] != 0x45 || ip[9] != 17) return nullptr;
  if (load_be16(f + kOuterUdp + 2) != kVxlanUdpPort) return nullptr;
  const uint8_t* v = f + kVxlan;
  if ((v[0] & (kVxlanFlagI | kVxlanFlagConga)) != (kVxlanFlagI | kVxlanFlagConga)) return nullptr;
  return v;
}

}  // namespace

bool conga_encapsulate(rte_mbuf* m, const CongaTunnel& t, const CongaFields& fl) {
  const uint32_t inner_len = rte_pktmbuf_pkt_len(m);
  const uint8_t* inner = rte_pktmbuf_mtod(m, const uint8_t*);
  const int l3 = inner_ipv4_offset(inner, rte_pktmbuf_data_len(m));
  if (l3 < 0 || inner_len + kInner > 0xFFFF) return false;
  const uint8_t tos = inner[l3 + 1];
  uint8_t macs[12];
  std::memcpy(macs, inner, 12);
  auto* f = reinterpret_cast<uint8_t*>(rte_pktmbuf_prepend(m, kCongaOverlayBytes));
  if (f == nullptr) return false;
  std::memcpy(f, macs, 12);
  store_be16(f + 12, 0x0800);
  uint8_t* ip = f + kOuterIp;
  ip[0] = 0x45;
  ip[1] = tos;
  store_be16(ip + 2, static_cast<uint16_t>(inner_len + 36));
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
  store_be16(udp + 4, static_cast<uint16_t>(inner_len + 16));
  store_be16(udp + 6, 0);
  uint8_t* v = f + kVxlan;
  v[0] = kVxlanFlagI | kVxlanFlagConga;
  v[1] = static_cast<uint8_t>((fl.lbtag & 0xF) << 4 | (fl.ce & 0x7) << 1 | (fl.fb_valid ? 1 : 0));
  v[2] =
      fl.fb_valid ? static_cast<uint8_t>((fl.fb_lbtag & 0xF) << 4 | (fl.fb_metric & 0x7) << 1) : 0;
  v[3] = 0;
  v[4] = static_cast<uint8_t>(fl.vni >> 16);
  v[5] = static_cast<uint8_t>(fl.vni >> 8);
  v[6] = static_cast<uint8_t>(fl.vni);
  v[7] = fl.src_leaf;
  return true;
}

std::optional<CongaFields> conga_parse(const rte_mbuf* m, uint32_t* dst_vtep) {
  const uint8_t* v = overlay(m);
  if (v == nullptr) return std::nullopt;
  CongaFields fl;
  fl.lbtag = v[1] >> 4;
  fl.ce = (v[1] >> 1) & 0x7;
  fl.fb_valid = (v[1] & 1) != 0;
  fl.fb_lbtag = v[2] >> 4;
  fl.fb_metric = (v[2] >> 1) & 0x7;
  fl.vni = uint32_t{v[4]} << 16 | uint32_t{v[5]} << 8 | v[6];
  fl.src_leaf = v[7];
  if (dst_vtep != nullptr) {
    *dst_vtep = load_be32(rte_pktmbuf_mtod(m, const uint8_t*) + kOuterIp + 16);
  }
  return fl;
}

bool conga_raise_ce(rte_mbuf* m, uint8_t metric) {
  auto* v = const_cast<uint8_t*>(overlay(m));
  if (v == nullptr) return false;
  if (metric > kCongaMaxMetric) metric = kCongaMaxMetric;
  const uint8_t ce = (v[1] >> 1) & 0x7;
  if (metric > ce) v[1] = static_cast<uint8_t>((v[1] & 0xF1) | metric << 1);
  return true;
}

bool conga_decapsulate(rte_mbuf* m) {
  if (overlay(m) == nullptr) return false;
  const uint8_t outer_ecn = rte_pktmbuf_mtod(m, const uint8_t*)[kOuterIp + 1] & 0x3;
  rte_pktmbuf_adj(m, kCongaOverlayBytes);
  uint8_t* f = rte_pktmbuf_mtod(m, uint8_t*);
  const int l3 = inner_ipv4_offset(f, rte_pktmbuf_data_len(m));
  if (outer_ecn == 0x3 && l3 >= 0) {
    uint8_t* ip = f + l3;
    if ((ip[1] & 0x3) != 0 && (ip[1] & 0x3) != 0x3) {
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
  }
  return true;
}

}  // namespace spraynet
