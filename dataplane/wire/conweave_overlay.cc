#include "dataplane/wire/conweave_overlay.h"

#include <cstring>

#include "dataplane/wire/byte_order.h"

namespace spraynet {

namespace {

constexpr uint8_t kFlags = kVxlanFlagI | kVxlanFlagConweave;
constexpr uint16_t kExtra = 8;

void write_word(uint8_t* v, const ConweaveWire& w) {
  v[0] = kFlags;
  v[1] = static_cast<uint8_t>(static_cast<uint8_t>(w.message) << 6 |
                              (static_cast<uint8_t>(w.tag.flag) & 3) << 4 | (w.tag.phase & 1) << 3);
  v[2] = w.tag.epoch;
  v[3] = w.tag.member & 0xF;
  v[4] = static_cast<uint8_t>(w.vni >> 16);
  v[5] = static_cast<uint8_t>(w.vni >> 8);
  v[6] = static_cast<uint8_t>(w.vni);
  v[7] = w.leaf;
}

}  // namespace

bool conweave_encapsulate(rte_mbuf* m, const VxlanTunnel& tunnel, const ConweaveTag& tag,
                          uint8_t leaf, uint32_t vni) {
  uint8_t* v = vxlan_prepend(m, tunnel, kExtra);
  if (v == nullptr) return false;
  ConweaveWire w;
  w.tag = tag;
  w.leaf = leaf;
  w.vni = vni;
  write_word(v, w);
  store_be32(v + 8, tag.ts_tx);
  store_be32(v + 12, tag.ts_tail);
  return true;
}

bool conweave_control(rte_mbuf* m, const uint8_t macs[12], const VxlanTunnel& tunnel, uint8_t dscp,
                      const ConweaveWire& message) {
  uint8_t* v = vxlan_control_frame(m, macs, tunnel, static_cast<uint8_t>(dscp << 2), kExtra);
  if (v == nullptr) return false;
  write_word(v, message);
  store_be64(v + 8, message.flow_key);
  // 58 bytes: padded to Ethernet's 60 (the IPv4 length leaves the padding out).
  auto* pad = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, 2));
  if (pad == nullptr) return false;
  pad[0] = pad[1] = 0;
  return true;
}

std::optional<ConweaveWire> conweave_parse(const rte_mbuf* m, uint32_t* dst_vtep) {
  const uint8_t* v = vxlan_word(m, kFlags, kExtra);
  if (v == nullptr) return std::nullopt;
  ConweaveWire w;
  w.message = static_cast<ConweaveMessage>(v[1] >> 6);
  const uint8_t flag = (v[1] >> 4) & 3;
  if (w.message == ConweaveMessage::kData) {
    if (flag == 0) return std::nullopt;  // a data frame always has one
    if (vxlan_word(m, kFlags, kExtra + 14) == nullptr) return std::nullopt;
    w.tag.flag = static_cast<ConweaveFlag>(flag);
    w.tag.ts_tx = load_be32(v + 8);
    w.tag.ts_tail = load_be32(v + 12);
  } else {
    w.flow_key = load_be64(v + 8);
  }
  w.tag.phase = (v[1] >> 3) & 1;
  w.tag.epoch = v[2];
  w.tag.member = v[3] & 0xF;
  w.vni = uint32_t{v[4]} << 16 | uint32_t{v[5]} << 8 | v[6];
  w.leaf = v[7];
  if (dst_vtep != nullptr) *dst_vtep = vxlan_dst_vtep(m);
  return w;
}

bool conweave_decapsulate(rte_mbuf* m) {
  const auto w = conweave_parse(m);
  if (!w || w->message != ConweaveMessage::kData) return false;
  vxlan_strip(m, kExtra);
  return true;
}

}  // namespace spraynet
