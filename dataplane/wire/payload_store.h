// Payload bytes that never change, attached to packets instead of copied into them.
//
// The RC traffic engine's payload is a fixed pattern: every WRITE of a QP carries the same
// bytes. Copying 4 KB into every packet and reading them back for the ICRC at the receiver is
// most of what a fabric of 4 KB packets costs, and it evicts everything else from the cache.
// A PayloadStore keeps each pattern once, in memory nothing writes after add(); a packet
// carries it as a chained segment that is an external buffer (rte_pktmbuf_attach_extbuf),
// the way zero-copy DPDK senders chain a shared payload behind their own headers. The packet
// on the wire is the same, byte for byte.
//
// Because the bytes never change, their CRC-32 is a property of the store: the ICRC of a
// packet whose segment lies in the store folds that CRC in (zlib's crc32_combine) rather
// than reading 4 KB again, with the same result. Anything else is read byte by byte.
#pragma once

#include <rte_mbuf.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <span>
#include <unordered_map>
#include <vector>

namespace spraynet {

class PayloadStore {
 public:
  // `segment_pool` (not owned; may be null: the packet's own pool) gives the two small
  // segments of a chained packet, the attached payload and the pad + ICRC. A pool of its own
  // keeps the packets' pool as full, mbuf for mbuf, as when payloads are copied.
  explicit PayloadStore(rte_mempool* segment_pool = nullptr);
  rte_mempool* segment_pool() const { return segment_pool_; }
  ~PayloadStore();
  PayloadStore(const PayloadStore&) = delete;
  PayloadStore& operator=(const PayloadStore&) = delete;

  // Keeps a copy of `bytes` and returns it; the same bytes added twice are kept once. The
  // returned memory is valid, and never written, until the store is destroyed. Throws
  // std::bad_alloc when no memory is left.
  std::span<const uint8_t> add(std::span<const uint8_t> bytes);

  // Attaches [data, data + len), which lies in a region add() returned, to `m` (a fresh mbuf
  // with nothing attached) as its data. False, with `m` untouched, when it does not lie in one.
  bool attach(rte_mbuf* m, const uint8_t* data, uint16_t len);

  // The zlib CRC-32 of [data, data + len) and zlib's combine operator for its length, when the
  // bytes lie in the store; nullopt otherwise. Safe from several threads at once (fabric_emu's
  // logical processes share one store): the known CRCs are behind a reader-writer lock, and each
  // thread remembers its last answer, so a thread that builds packets of one length takes no
  // lock at all.
  struct KnownCrc {
    uint32_t crc;
    uint32_t combine_op;
  };
  std::optional<KnownCrc> crc(const uint8_t* data, size_t len) const;

  // Where [data, data + len) lies: (region, offset), regions numbered in the order add() made
  // them. Stores that saw the same add()s (the ranks of one fabric_emu --mpi run) agree on it, so
  // a segment can cross between processes as (region, offset) and be attached again there.
  struct Place {
    uint32_t region;
    uint32_t offset;
  };
  std::optional<Place> place_of(const uint8_t* data, size_t len) const;
  // The address of a Place; null when the store has no such region or offset.
  const uint8_t* address(Place p) const;
  // Every mbuf that attach() gave a segment has been freed (the store may be destroyed).
  bool unreferenced() const;

 private:
  struct Region {
    uint8_t* bytes = nullptr;  // rte_malloc'd, so that the segment has an IOVA
    size_t len = 0;
    rte_mbuf_ext_shared_info shinfo{};
  };
  const Region* region_of(const uint8_t* data, size_t len) const;

  rte_mempool* segment_pool_;
  std::vector<std::unique_ptr<Region>> regions_;
  // (address, length) -> its CRC; a store serves a handful of lengths (MTU, last packets).
  struct Key {
    const uint8_t* data;
    size_t len;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const {
      return std::hash<const void*>()(k.data) ^ (k.len * 0x9E3779B97F4A7C15ull);
    }
  };
  // Unique in the process: a thread's last answer names its store by it (an address could be
  // a later store's).
  const uint64_t id_;
  mutable std::shared_mutex crcs_mutex_;
  mutable std::unordered_map<Key, KnownCrc, KeyHash> crcs_;  // under crcs_mutex_
};

}  // namespace spraynet
