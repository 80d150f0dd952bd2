// A DPDK packet mempool owned by one object.
#pragma once

#include <rte_mbuf.h>
#include <rte_mempool.h>

#include <cstdint>
#include <string>

namespace spraynet::runtime {

struct PacketPoolConfig {
  std::string name;       // unique in the process, at most RTE_MEMPOOL_NAMESIZE - 4 characters
  unsigned mbufs = 8191;  // 2^n - 1 fills the backing ring exactly
  unsigned cache = 256;   // per-lcore cache; DPDK requires cache <= mbufs / 1.5
  uint16_t data_room = RTE_MBUF_DEFAULT_BUF_SIZE;
  int socket = SOCKET_ID_ANY;
};

// rte_pktmbuf_pool_create on construction, rte_mempool_free on destruction. Freeing a pool
// with mbufs still out (in a port's rings, in a handler) leaves them dangling: stop and close
// the ports that use it first, and check whole().
class PacketPool {
 public:
  // Throws std::runtime_error naming the pool and rte_strerror(rte_errno).
  explicit PacketPool(const PacketPoolConfig& config);
  ~PacketPool();

  PacketPool(PacketPool&& other) noexcept;
  PacketPool& operator=(PacketPool&& other) noexcept;
  PacketPool(const PacketPool&) = delete;
  PacketPool& operator=(const PacketPool&) = delete;

  rte_mempool* get() const { return pool_; }
  // Mbufs allocated and not yet freed (those in per-lcore caches count as free).
  unsigned in_use() const { return rte_mempool_in_use_count(pool_); }
  bool whole() const { return in_use() == 0; }
  // Puts back the mbufs no one can reach any more, once every port that used the pool is
  // closed and every lcore has stopped: those a PMD kept past close (net_af_xdp's fill ring,
  // see Port::pmd_held_after_close). Only when exactly `expected` mbufs are out, so that a
  // leak of the program's own still shows; returns how many went back (0: none).
  unsigned reclaim_unreachable(unsigned expected);

 private:
  rte_mempool* pool_ = nullptr;
};

// How many mbufs a pool needs so that no port can starve, for `ports` ports that each have
// `rx_queues` x `rx_desc` receive and `tx_queues` x `tx_desc` transmit descriptors, polled by
// `lcores` lcores in bursts of `burst`, with a per-lcore mempool cache of `cache`:
//   - every rx descriptor holds an mbuf waiting for a packet;
//   - every tx descriptor may hold a sent mbuf the PMD has not freed yet;
//   - each lcore's mempool cache may hold up to 1.5 x cache mbufs (DPDK's flush threshold);
//   - each lcore holds one received burst while its handler works on it;
//   - each (port, tx queue) TxBuffer holds up to one burst before it flushes.
// The sum is rounded up to 2^n - 1, the size that fills the mempool's ring exactly.
unsigned pool_size_for(unsigned ports, unsigned rx_queues, unsigned tx_queues, unsigned rx_desc,
                       unsigned tx_desc, unsigned lcores, unsigned burst, unsigned cache);

}  // namespace spraynet::runtime
