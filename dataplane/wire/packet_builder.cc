#include "dataplane/wire/packet_builder.h"

#include <rte_ip.h>
#include <rte_mbuf.h>

#include <algorithm>
#include <cstring>

#include "dataplane/wire/byte_order.h"
#include "dataplane/wire/icrc.h"
#include "dataplane/wire/payload_store.h"

namespace spraynet {

namespace {

size_t l2_length(const EthernetSpec& e) {
  return e.vlan ? 18 : 14;
}

// Writes Ethernet, IPv4 and UDP headers for a UDP payload of `udp_payload` bytes; returns the
// offset of the UDP payload.
size_t write_headers(uint8_t* out, const FrameSpec& f, uint16_t dst_port, size_t udp_payload) {
  std::memcpy(out, f.eth.dst.data(), 6);
  std::memcpy(out + 6, f.eth.src.data(), 6);
  size_t off = 12;
  if (f.eth.vlan) {
    store_be16(out + off, 0x8100);
    store_be16(out + off + 2,
               static_cast<uint16_t>((f.eth.pcp & 7) << 13 | (f.eth.vlan_id & 0x0FFF)));
    off += 4;
  }
  store_be16(out + off, 0x0800);
  off += 2;

  uint8_t* ip = out + off;
  const size_t total = 20 + 8 + udp_payload;
  ip[0] = 0x45;
  ip[1] = f.ip.tos;
  store_be16(ip + 2, static_cast<uint16_t>(total));
  store_be16(ip + 4, f.ip.id);
  store_be16(ip + 6, f.ip.dont_fragment ? 0x4000 : 0);
  ip[8] = f.ip.ttl;
  ip[9] = 17;
  store_be16(ip + 10, 0);
  store_be32(ip + 12, f.ip.src);
  store_be32(ip + 16, f.ip.dst);
  // rte_ipv4_cksum returns the checksum in network order as a native uint16_t.
  const uint16_t cksum = rte_ipv4_cksum(reinterpret_cast<const rte_ipv4_hdr*>(ip));
  std::memcpy(ip + 10, &cksum, 2);

  uint8_t* udp = ip + 20;
  store_be16(udp, f.udp.src_port);
  store_be16(udp + 2, dst_port);
  store_be16(udp + 4, static_cast<uint16_t>(8 + udp_payload));
  store_be16(udp + 6, f.udp.checksum);
  return off + 20 + 8;
}

size_t padded_to_minimum(uint8_t* out, size_t len) {
  if (len >= kMinFrameLength) return len;
  std::memset(out + len, 0, kMinFrameLength - len);
  return kMinFrameLength;
}

bool has_reth(uint8_t op) {
  if ((op >> 5) == 3) return false;  // UD carries a DETH instead
  const uint8_t o = op & 0x1F;
  return o == 0x06 || o == 0x0A || o == 0x0B || o == 0x0C;
}
bool has_aeth(uint8_t op) {
  const uint8_t o = op & 0x1F;
  return (op >> 5) == 0 && (o == 0x0D || o == 0x0F || o == 0x10 || o == 0x11 || o == 0x12);
}
bool has_immediate(uint8_t op) {
  const uint8_t o = op & 0x1F;
  return op != opcode::kCnp && (o == 0x03 || o == 0x05 || o == 0x09 || o == 0x0B);
}

uint8_t pad_for(size_t payload) {
  return static_cast<uint8_t>((4 - payload % 4) % 4);
}

}  // namespace

size_t udp_frame_length(const FrameSpec& f) {
  return std::max(kMinFrameLength, l2_length(f.eth) + 20 + 8 + f.payload.size());
}

size_t build_udp_frame(std::span<uint8_t> out, const FrameSpec& f) {
  const size_t len = udp_frame_length(f);
  if (out.size() < len || 20 + 8 + f.payload.size() > 0xFFFF) return 0;
  const size_t off = write_headers(out.data(), f, f.udp.dst_port, f.payload.size());
  std::copy(f.payload.begin(), f.payload.end(), out.data() + off);
  return padded_to_minimum(out.data(), off + f.payload.size());
}

size_t roce_frame_length(const FrameSpec& f, const RoceSpec& r) {
  const int ext = roce_extension_length(r.opcode);
  if (ext < 0) return 0;
  const size_t udp_payload = kBthSize + static_cast<size_t>(ext) + f.payload.size() +
                             pad_for(f.payload.size()) + kIcrcSize;
  return std::max(kMinFrameLength, l2_length(f.eth) + 20 + 8 + udp_payload);
}

namespace {
// Writes everything of a RoCE frame before its payload into `p` (room for
// roce_header_length); returns the offset of the payload.
size_t write_roce_headers(uint8_t* p, const FrameSpec& f, const RoceSpec& r, size_t udp_payload,
                          uint8_t pad) {
  const size_t ext = static_cast<size_t>(roce_extension_length(r.opcode));
  const size_t bth_off = write_headers(p, f, kRoceV2UdpPort, udp_payload);
  BthView bth(p + bth_off);
  bth.set_opcode(r.opcode);
  bth.set_flags(r.solicited, r.migreq, pad, 0);
  bth.set_pkey(r.pkey);
  bth.set_fecn_becn(r.fecn, r.becn);
  bth.set_dest_qp(r.dest_qp);
  bth.set_ack_req_psn(r.ack_req, r.psn);

  uint8_t* x = p + bth_off + kBthSize;
  std::memset(x, 0, ext);
  if (has_reth(r.opcode)) RethView(x).set(r.virtual_address, r.rkey, r.dma_length);
  if (has_aeth(r.opcode)) AethView(x).set(r.syndrome, r.msn);
  if (has_immediate(r.opcode)) store_be32(x + ext - 4, r.immediate);
  return bth_off + kBthSize + ext;
}
}  // namespace

size_t build_roce_frame(std::span<uint8_t> out, const FrameSpec& f, const RoceSpec& r) {
  const size_t len = roce_frame_length(f, r);
  if (len == 0 || out.size() < len) return 0;
  const size_t ext = static_cast<size_t>(roce_extension_length(r.opcode));
  const uint8_t pad = pad_for(f.payload.size());
  const size_t udp_payload = kBthSize + ext + f.payload.size() + pad + kIcrcSize;
  if (20 + 8 + udp_payload > 0xFFFF) return 0;

  uint8_t* p = out.data();
  uint8_t* payload = p + write_roce_headers(p, f, r, udp_payload, pad);
  std::copy(f.payload.begin(), f.payload.end(), payload);
  std::memset(payload + f.payload.size(), 0, pad);

  const size_t l3 = l2_length(f.eth);
  const size_t icrc_off = static_cast<size_t>(payload - p) + f.payload.size() + pad;
  write_icrc(p + l3, icrc_off - l3);
  return padded_to_minimum(p, icrc_off + kIcrcSize);
}

namespace {
template <typename Build>
rte_mbuf* build_into_mbuf(rte_mempool* pool, size_t len, Build&& build) {
  if (len == 0) return nullptr;
  rte_mbuf* m = rte_pktmbuf_alloc(pool);
  if (m == nullptr) return nullptr;
  if (len > rte_pktmbuf_tailroom(m)) {
    rte_pktmbuf_free(m);
    return nullptr;
  }
  auto* data = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, static_cast<uint16_t>(len)));
  if (build(std::span<uint8_t>(data, len)) != len) {
    rte_pktmbuf_free(m);
    return nullptr;
  }
  return m;
}
}  // namespace

rte_mbuf* build_udp_mbuf(rte_mempool* pool, const FrameSpec& f) {
  return build_into_mbuf(pool, udp_frame_length(f),
                         [&](std::span<uint8_t> out) { return build_udp_frame(out, f); });
}

rte_mbuf* build_roce_mbuf(rte_mempool* pool, const FrameSpec& f, const RoceSpec& r) {
  return build_into_mbuf(pool, roce_frame_length(f, r),
                         [&](std::span<uint8_t> out) { return build_roce_frame(out, f, r); });
}

}  // namespace spraynet

namespace spraynet {

rte_mbuf* build_roce_mbuf(rte_mempool* pool, const FrameSpec& f, const RoceSpec& r,
                          PayloadStore* store) {
  // Below this a copy costs less than the two more segments (and keeps small frames simple).
  constexpr size_t kChainFrom = 256;
  const size_t len = roce_frame_length(f, r);
  if (store == nullptr || len == 0 || f.payload.empty() ||
      (f.payload.size() < kChainFrom &&
       len <= size_t{rte_pktmbuf_data_room_size(pool)} - RTE_PKTMBUF_HEADROOM) ||
      !store->crc(f.payload.data(), f.payload.size())) {
    return build_roce_mbuf(pool, f, r);
  }
  const size_t ext = static_cast<size_t>(roce_extension_length(r.opcode));
  const uint8_t pad = pad_for(f.payload.size());
  const size_t udp_payload = kBthSize + ext + f.payload.size() + pad + kIcrcSize;
  if (20 + 8 + udp_payload > 0xFFFF) return nullptr;
  const size_t head_len = l2_length(f.eth) + 20 + 8 + kBthSize + ext;

  rte_mbuf* seg[3];
  rte_mempool* segments = store->segment_pool() != nullptr ? store->segment_pool() : pool;
  seg[0] = rte_pktmbuf_alloc(pool);
  if (seg[0] == nullptr) return nullptr;
  if (rte_pktmbuf_alloc_bulk(segments, seg + 1, 2) != 0) {
    rte_pktmbuf_free(seg[0]);
    return nullptr;
  }
  uint8_t* head =
      reinterpret_cast<uint8_t*>(rte_pktmbuf_append(seg[0], static_cast<uint16_t>(head_len)));
  uint8_t* tail = reinterpret_cast<uint8_t*>(
      rte_pktmbuf_append(seg[2], static_cast<uint16_t>(pad + kIcrcSize)));
  if (head == nullptr || tail == nullptr ||
      !store->attach(seg[1], f.payload.data(), static_cast<uint16_t>(f.payload.size()))) {
    rte_pktmbuf_free_bulk(seg, 3);
    return nullptr;
  }
  write_roce_headers(head, f, r, udp_payload, pad);
  std::memset(tail, 0, pad);
  rte_pktmbuf_chain(seg[0], seg[1]);
  rte_pktmbuf_chain(seg[0], seg[2]);
  const size_t l3 = l2_length(f.eth);
  const uint32_t icrc = compute_icrc(seg[0], l3, len - l3 - kIcrcSize, store);
  for (int i = 0; i < 4; ++i) tail[pad + i] = static_cast<uint8_t>(icrc >> (8 * i));
  return seg[0];
}

}  // namespace spraynet
