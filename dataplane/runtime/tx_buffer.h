// Batches single mbufs into tx bursts for one (port, tx queue), over DPDK's rte_eth_dev_tx_buffer.
#pragma once

#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include <cstdint>
#include <memory>

namespace spraynet::runtime {

// send() queues an mbuf and transmits a full burst once `size` are queued; flush() transmits
// what is queued. Whatever the PMD does not accept is freed and counted in dropped(), so every
// mbuf handed in is either sent or freed. Not thread-safe: one TxBuffer per lcore and queue.
class TxBuffer {
 public:
  // Memory comes from rte_zmalloc_socket; throws std::runtime_error if there is none.
  TxBuffer(uint16_t port_id, uint16_t queue, uint16_t size = 32, int socket = SOCKET_ID_ANY);
  // Flushes, so destroy it before its port is closed (DPDK complains, with a stack dump, about
  // a tx burst on a released port; what it refuses is still freed).
  ~TxBuffer();

  TxBuffer(TxBuffer&& other) noexcept;
  TxBuffer& operator=(TxBuffer&& other) noexcept;
  TxBuffer(const TxBuffer&) = delete;
  TxBuffer& operator=(const TxBuffer&) = delete;

  // Returns how many packets went out now (0 unless this filled a burst).
  uint16_t send(rte_mbuf* m) { return rte_eth_tx_buffer(port_, queue_, buf_, m); }
  // Returns how many packets went out; the rest were dropped.
  uint16_t flush() { return rte_eth_tx_buffer_flush(port_, queue_, buf_); }

  uint16_t port_id() const { return port_; }
  uint16_t queue() const { return queue_; }
  uint16_t pending() const { return buf_->length; }
  uint64_t dropped() const { return dropped_ ? *dropped_ : 0; }

 private:
  void release() noexcept;

  uint16_t port_ = 0, queue_ = 0;
  rte_eth_dev_tx_buffer* buf_ = nullptr;
  // DPDK's error callback gets a pointer to this counter; on the heap so that moves keep it.
  std::unique_ptr<uint64_t> dropped_;
};

}  // namespace spraynet::runtime
