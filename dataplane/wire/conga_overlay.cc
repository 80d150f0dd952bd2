#include "dataplane/wire/conga_overlay.h"

namespace spraynet {

namespace {

constexpr uint8_t kFlags = kVxlanFlagI | kVxlanFlagConga;

// The overlay's VXLAN word, if the first segment holds a frame with one and an inner Ethernet
// header after it.
const uint8_t* overlay(const rte_mbuf* m) {
  return vxlan_word(m, kFlags, 14);
}

}  // namespace

bool conga_encapsulate(rte_mbuf* m, const CongaTunnel& t, const CongaFields& fl) {
  uint8_t* v = vxlan_prepend(m, VxlanTunnel{t.src_vtep, t.dst_vtep, t.flow_hash}, 0);
  if (v == nullptr) return false;
  v[0] = kFlags;
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
  if (dst_vtep != nullptr) *dst_vtep = vxlan_dst_vtep(m);
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
  vxlan_strip(m, 0);
  return true;
}

}  // namespace spraynet
