#include "dataplane/runtime/packet_pool.h"

#include <rte_errno.h>

#include <stdexcept>
#include <utility>

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
