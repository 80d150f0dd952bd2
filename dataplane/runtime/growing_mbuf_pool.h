// A packet mempool that starts small and grows, chunk by chunk, up to a maximum: memory is
// mapped (and touched) only for the mbufs a run turns out to need, not for the worst case.
#pragma once

#include <rte_mempool.h>

#include <atomic>
#include <cstdint>
#include <string>

namespace spraynet::runtime {

// An mbuf pool (rte_mempool_create_empty with the platform's best mempool ops, a per-lcore
// cache of 256) whose objects live in anonymous memory mapped by this class, one chunk at a
// time, outside EAL's memory: the constructor populates the first chunk, reserve_free() adds
// chunks. Objects are IOVA-less (RTE_BAD_IOVA) and packed (no padding to page boundaries or
// to spread them over DRAM channels): for virtual-time use, not for a NIC's DMA.
// rte_mempool_free (the destructor) unmaps every chunk.
//
// The pool's ops are the best mempool ops (rte_mbuf_best_mempool_ops(): the ring) with a
// counter around their dequeue: shortfalls() counts the times the ring had fewer free mbufs
// than a get asked for (a per-lcore cache refill of up to 256 + n included), and
// shortfalls_below_max() those that happened while the pool was below its max, i.e. where a
// pool populated to the max from the start might have served the get. A run whose
// shortfalls_below_max() stayed 0 saw exactly what it would have seen from a full pool.
class GrowingMbufPool {
 public:
  // `name`: unique in the process, at most RTE_MEMPOOL_NAMESIZE - 1 (25) characters.
  // `max_mbufs`: the most the pool will ever hold (its ring's size); `data_room`: buffer size
  // of each mbuf, headroom included (rte_pktmbuf_pool_create's data_room_size);
  // `chunk_mbufs`: how many mbufs the first chunk and each later one hold (the last one may
  // hold fewer: the max).
  // Throws std::invalid_argument for 0 mbufs, a 0 chunk, a chunk above the max, an empty or
  // too long name; std::runtime_error when DPDK or mmap refuse (named, with the reason).
  GrowingMbufPool(std::string name, uint32_t max_mbufs, uint16_t data_room, uint32_t chunk_mbufs);
  ~GrowingMbufPool();

  GrowingMbufPool(const GrowingMbufPool&) = delete;
  GrowingMbufPool& operator=(const GrowingMbufPool&) = delete;

  rte_mempool* pool() const { return pool_; }
  const std::string& name() const { return name_; }

  // A run starts: from now on the pool accounts as a new pool would, of one chunk, which grows as
  // reserve_free() says (bytes(), populated for it, shortfalls of it), while the mbufs already
  // mapped and initialised serve it: a sweep's runs reuse one pool without touching fresh memory
  // each time, and each run's figures are those of a pool of its own. Every mbuf must be back.
  void begin_run();
  // Adds chunks until at least `free_mbufs` are free (in the ring or in per-lcore caches) or
  // the pool holds max_mbufs (as the run sees it: see begin_run). Only while no other thread takes from or returns to the pool:
  // the new objects are initialised after they are in the ring. Throws std::runtime_error when
  // memory cannot be mapped or DPDK refuses the chunk (the pool stays usable as it was).
  void reserve_free(uint32_t free_mbufs);

  // Mbufs the pool holds (free or in use), at most max_mbufs.
  uint32_t populated() const { return pool_->populated_size; }
  uint32_t max_mbufs() const { return max_; }
  // Bytes of anonymous memory mapped for the chunks (EAL memory for the mempool header, its
  // per-lcore caches and its ring is not counted): since begin_run(), those a pool of the run's
  // own would have mapped. mapped_bytes(): all the pool holds.
  uint64_t bytes() const { return run_bytes_; }
  uint64_t mapped_bytes() const { return bytes_; }
  // Mbufs a pool of the run's own would hold (populated() after begin_run()).
  uint32_t run_populated() const { return counters_.run_populated.load(std::memory_order_relaxed); }
  // The most mbufs in use that reserve_free() found (a high-water mark sampled where the pool
  // grows, between a run's rounds in fabric_emu).
  uint32_t peak_in_use() const { return peak_in_use_; }
  // Mbufs taken and not returned (those in per-lcore caches count as free). Not
  // rte_mempool_in_use_count, which counts the mbufs not populated yet as in use.
  uint32_t in_use() const { return populated() - rte_mempool_avail_count(pool_); }

  uint64_t shortfalls() const { return counters_.shortfalls.load(std::memory_order_relaxed); }
  uint64_t shortfalls_below_max() const {
    return counters_.below_max.load(std::memory_order_relaxed);
  }

  // What the dequeue wrapper counts (reached through the pool's pool_config).
  struct Counters {
    std::atomic<uint64_t> shortfalls{0};
    std::atomic<uint64_t> below_max{0};
    // The run's pool (begin_run): the mbufs it would hold; a get that it could not have served
    // while below the max counts in below_max too.
    std::atomic<uint32_t> run_populated{0};
  };

 private:
  void add_chunk(uint32_t mbufs);
  uint64_t chunk_bytes(uint32_t mbufs) const;
  // One object in a chunk: its header, the mbuf with its data room, its trailer.
  size_t object_bytes() const {
    return size_t{pool_->header_size} + pool_->elt_size + pool_->trailer_size;
  }

  std::string name_;
  uint32_t max_;
  uint32_t chunk_;
  rte_mempool* pool_ = nullptr;
  uint64_t bytes_ = 0;
  uint64_t run_bytes_ = 0;
  uint32_t first_populated_ = 0;  // what the first chunk held
  uint32_t peak_in_use_ = 0;
  Counters counters_;
};

}  // namespace spraynet::runtime
