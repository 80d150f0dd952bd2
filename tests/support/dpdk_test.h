// Helpers for tests that touch DPDK objects. EAL is brought up once per test executable by
// dpdk_test_main.cc; each test makes its own pool and ends by checking that it is whole.
#pragma once

#include <rte_mbuf.h>
#include <rte_mempool.h>

#include "dataplane/runtime/port.h"

#include <atomic>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace spraynet::test {

// A packet mempool owned by one test. The destructor frees it; tests call whole() last.
class TestPool {
 public:
  explicit TestPool(unsigned n_mbufs = 4095, uint16_t data_room = RTE_MBUF_DEFAULT_BUF_SIZE) {
    static std::atomic<unsigned> seq{0};
    const std::string name = "test_pool_" + std::to_string(seq++);
    pool_ = rte_pktmbuf_pool_create(name.c_str(), n_mbufs, 0, 0, data_room, SOCKET_ID_ANY);
    if (pool_ == nullptr) throw std::runtime_error("rte_pktmbuf_pool_create failed: " + name);
  }
  ~TestPool() { rte_mempool_free(pool_); }
  TestPool(const TestPool&) = delete;
  TestPool& operator=(const TestPool&) = delete;

  rte_mempool* get() const { return pool_; }
  unsigned in_use() const { return rte_mempool_in_use_count(pool_); }
  bool whole() const { return in_use() == 0; }

  rte_mbuf* alloc() const {
    rte_mbuf* m = rte_pktmbuf_alloc(pool_);
    if (m == nullptr) throw std::runtime_error("mempool exhausted");
    return m;
  }
  // An mbuf holding a copy of `bytes`.
  rte_mbuf* make(const std::vector<uint8_t>& bytes) const {
    rte_mbuf* m = alloc();
    char* p = rte_pktmbuf_append(m, static_cast<uint16_t>(bytes.size()));
    if (p == nullptr) {
      rte_pktmbuf_free(m);
      throw std::runtime_error("packet larger than the mbuf");
    }
    std::copy(bytes.begin(), bytes.end(), p);
    return m;
  }

 private:
  rte_mempool* pool_ = nullptr;
};

// Receives and frees everything waiting on rx queue 0 of `port`; returns how many there were.
inline unsigned drain_rx(runtime::Port& port) {
  unsigned total = 0;
  rte_mbuf* pkts[64];
  while (uint16_t n = port.rx_burst(0, pkts, 64)) {
    rte_pktmbuf_free_bulk(pkts, n);
    total += n;
  }
  return total;
}

}  // namespace spraynet::test
