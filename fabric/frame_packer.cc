#include "fabric/frame_packer.h"

#include <array>
#include <cstring>
#include <stdexcept>

namespace spraynet::fabric {
namespace {

// How a segment travels.
enum SegmentKind : uint8_t {
  kBytesFromPool = 0,
  kBytesFromSegmentPool = 1,
  kStoreFromPool = 2,  // attached from the store: (region, offset)
  kStoreFromSegmentPool = 3,
};

// The head's hash union and dynamic fields, as bytes.
using HashBytes = std::array<uint8_t, sizeof(rte_mbuf::hash)>;
using DynfieldBytes = std::array<uint8_t, sizeof(rte_mbuf::dynfield1)>;

constexpr uint64_t kSegmentFlags = RTE_MBUF_F_EXTERNAL | RTE_MBUF_F_INDIRECT;

}  // namespace

void FramePacker::pack(ByteWriter& w, rte_mbuf* m) const {
  w.put<uint16_t>(m->nb_segs);
  w.put<uint64_t>(m->ol_flags & ~kSegmentFlags);
  w.put<uint32_t>(m->packet_type);
  HashBytes hash;
  std::memcpy(hash.data(), &m->hash, hash.size());
  w.put(hash);
  w.put<uint16_t>(m->vlan_tci);
  w.put<uint16_t>(m->vlan_tci_outer);
  w.put<uint64_t>(m->tx_offload);
  w.put<uint16_t>(m->port);
  DynfieldBytes dynfield;
  std::memcpy(dynfield.data(), m->dynfield1, dynfield.size());
  w.put(dynfield);
  for (rte_mbuf* s = m; s != nullptr; s = s->next) {
    const bool from_segments = segment_pool_ != nullptr && s->pool == segment_pool_;
    const auto* data = rte_pktmbuf_mtod(s, const uint8_t*);
    const auto place = RTE_MBUF_HAS_EXTBUF(s) ? store_.place_of(data, s->data_len) : std::nullopt;
    if (place) {
      w.put<uint8_t>(from_segments ? kStoreFromSegmentPool : kStoreFromPool);
      w.put<uint16_t>(s->data_len);
      w.put(*place);
      continue;
    }
    w.put<uint8_t>(from_segments ? kBytesFromSegmentPool : kBytesFromPool);
    w.put<uint16_t>(s->data_off);
    w.put_bytes(data, s->data_len);
  }
  rte_pktmbuf_free(m);
}

rte_mbuf* FramePacker::unpack(ByteReader& r) const {
  const auto segs = r.get<uint16_t>();
  const auto ol_flags = r.get<uint64_t>();
  const auto packet_type = r.get<uint32_t>();
  const auto hash = r.get<HashBytes>();
  const auto vlan_tci = r.get<uint16_t>();
  const auto vlan_tci_outer = r.get<uint16_t>();
  const auto tx_offload = r.get<uint64_t>();
  const auto port = r.get<uint16_t>();
  const auto dynfield = r.get<DynfieldBytes>();
  rte_mbuf* head = nullptr;
  const auto fail = [&head](const char* why) -> rte_mbuf* {
    rte_pktmbuf_free(head);
    throw std::runtime_error(std::string("fabric_emu --mpi: a frame from another rank: ") + why);
  };
  for (uint16_t i = 0; i < segs; ++i) {
    const auto kind = r.get<uint8_t>();
    if (kind > kStoreFromSegmentPool) return fail("unknown segment kind");
    const bool from_segments = kind == kBytesFromSegmentPool || kind == kStoreFromSegmentPool;
    rte_mempool* mp = from_segments && segment_pool_ != nullptr ? segment_pool_ : pool_;
    rte_mbuf* s = rte_pktmbuf_alloc(mp);
    if (s == nullptr) return fail("the mempool is empty");
    if (kind == kStoreFromPool || kind == kStoreFromSegmentPool) {
      const auto len = r.get<uint16_t>();
      const auto place = r.get<PayloadStore::Place>();
      const uint8_t* data = store_.address(place);
      // attach() takes the store's own pointer; the cast is the store's contract, not a write.
      if (data == nullptr || !const_cast<PayloadStore&>(store_).attach(s, data, len)) {
        rte_pktmbuf_free(s);
        return fail("a payload segment this rank's store does not hold");
      }
    } else {
      const auto data_off = r.get<uint16_t>();
      const std::string_view bytes = r.get_bytes();
      if (static_cast<size_t>(data_off) + bytes.size() > s->buf_len) {
        rte_pktmbuf_free(s);
        return fail("a segment larger than this rank's mbufs");
      }
      s->data_off = data_off;
      s->data_len = static_cast<uint16_t>(bytes.size());
      s->pkt_len = s->data_len;
      std::memcpy(rte_pktmbuf_mtod(s, uint8_t*), bytes.data(), bytes.size());
    }
    if (head == nullptr) {
      head = s;
    } else if (rte_pktmbuf_chain(head, s) != 0) {
      rte_pktmbuf_free(s);
      return fail("too many segments");
    }
  }
  if (head == nullptr) throw std::runtime_error("fabric_emu --mpi: a frame with no segment");
  head->ol_flags |= ol_flags;
  head->packet_type = packet_type;
  std::memcpy(&head->hash, hash.data(), hash.size());
  head->vlan_tci = vlan_tci;
  head->vlan_tci_outer = vlan_tci_outer;
  head->tx_offload = tx_offload;
  head->port = port;
  std::memcpy(head->dynfield1, dynfield.data(), sizeof(head->dynfield1));
  return head;
}

}  // namespace spraynet::fabric
