#include "dataplane/runtime/packet_pool.h"

#include <rte_errno.h>

#include <algorithm>
#include <stdexcept>
#include <utility>
#include <vector>

namespace spraynet::runtime {

PacketPool::PacketPool(const PacketPoolConfig& config) {
  pool_ = rte_pktmbuf_pool_create(config.name.c_str(), config.mbufs, config.cache, 0,
                                  config.data_room, config.socket);
  if (pool_ == nullptr) {
    throw std::runtime_error("packet pool \"" + config.name +
                             "\": rte_pktmbuf_pool_create failed: " + rte_strerror(rte_errno));
  }
}

PacketPool::~PacketPool() {
  rte_mempool_free(pool_);
}

PacketPool::PacketPool(PacketPool&& other) noexcept : pool_(std::exchange(other.pool_, nullptr)) {}

PacketPool& PacketPool::operator=(PacketPool&& other) noexcept {
  if (this != &other) {
    rte_mempool_free(pool_);
    pool_ = std::exchange(other.pool_, nullptr);
  }
  return *this;
}

unsigned PacketPool::reclaim_unreachable(unsigned expected) {
  if (expected == 0 || in_use() != expected) return 0;
  // Free mbufs are in the pool's ring or in an lcore's cache; with the caches flushed they are
  // all in the ring. Taking them out marks them: every other object is one that was lost.
  for (unsigned lcore = 0; lcore < RTE_MAX_LCORE; ++lcore) {
    rte_mempool_cache* cache = rte_mempool_default_cache(pool_, lcore);
    if (cache != nullptr) rte_mempool_cache_flush(cache, pool_);
  }
  const unsigned free_count = rte_mempool_avail_count(pool_);  // all in the ring now
  std::vector<void*> free_objs(free_count);
  if (free_count != 0 &&
      rte_mempool_generic_get(pool_, free_objs.data(), free_count, nullptr) != 0) {
    return 0;
  }
  std::sort(free_objs.begin(), free_objs.end());
  struct Sweep {
    const std::vector<void*>* free;
    std::vector<rte_mbuf*> lost;
  } sweep{&free_objs, {}};
  rte_mempool_obj_iter(
      pool_,
      [](rte_mempool*, void* opaque, void* obj, unsigned) {
        auto* s = static_cast<Sweep*>(opaque);
        if (!std::binary_search(s->free->begin(), s->free->end(), obj)) {
          s->lost.push_back(static_cast<rte_mbuf*>(obj));
        }
      },
      &sweep);
  if (free_count != 0) rte_mempool_generic_put(pool_, free_objs.data(), free_count, nullptr);
  if (sweep.lost.size() != expected) return 0;
  for (rte_mbuf* m : sweep.lost) {
    // As rte_pktmbuf_alloc left them (the kernel wrote only packet data): one segment, one ref.
    m->next = nullptr;
    m->nb_segs = 1;
    rte_mbuf_refcnt_set(m, 1);
    rte_mbuf_raw_free(m);
  }
  return expected;
}

unsigned pool_size_for(unsigned ports, unsigned rx_queues, unsigned tx_queues, unsigned rx_desc,
                       unsigned tx_desc, unsigned lcores, unsigned burst, unsigned cache) {
  const uint64_t rings =
      uint64_t{ports} * (uint64_t{rx_queues} * rx_desc + uint64_t{tx_queues} * tx_desc);
  const uint64_t caches = uint64_t{lcores} * ((cache * 3 + 1) / 2);
  const uint64_t in_flight = uint64_t{lcores} * burst;
  const uint64_t tx_buffers = uint64_t{ports} * tx_queues * burst;
  const uint64_t need = rings + caches + in_flight + tx_buffers;
  uint64_t size = 1;
  while (size - 1 < need) size <<= 1;
  if (size - 1 > UINT32_MAX) throw std::length_error("pool_size_for: more mbufs than fit a pool");
  return static_cast<unsigned>(size - 1);
}

}  // namespace spraynet::runtime
