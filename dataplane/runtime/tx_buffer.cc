#include "dataplane/runtime/tx_buffer.h"

#include <rte_errno.h>
#include <rte_malloc.h>

#include <stdexcept>
#include <string>
#include <utility>

namespace spraynet::runtime {
namespace {

void count_and_free(rte_mbuf** unsent, uint16_t count, void* userdata) {
  rte_pktmbuf_free_bulk(unsent, count);
  *static_cast<uint64_t*>(userdata) += count;
}

}  // namespace

TxBuffer::TxBuffer(uint16_t port_id, uint16_t queue, uint16_t size, int socket)
    : port_(port_id), queue_(queue), dropped_(std::make_unique<uint64_t>(0)) {
  buf_ = static_cast<rte_eth_dev_tx_buffer*>(
      rte_zmalloc_socket("spraynet_tx_buffer", RTE_ETH_TX_BUFFER_SIZE(size), 0, socket));
  if (buf_ == nullptr) {
    throw std::runtime_error("tx buffer for port " + std::to_string(port_id) + " queue " +
                             std::to_string(queue) + ": rte_zmalloc_socket failed");
  }
  int ret = rte_eth_tx_buffer_init(buf_, size);
  if (ret == 0) ret = rte_eth_tx_buffer_set_err_callback(buf_, count_and_free, dropped_.get());
  if (ret != 0) {
    rte_free(buf_);
    throw std::runtime_error("tx buffer for port " + std::to_string(port_id) + " queue " +
                             std::to_string(queue) +
                             ": rte_eth_tx_buffer_init failed: " + rte_strerror(-ret));
  }
}

TxBuffer::~TxBuffer() {
  release();
}

TxBuffer::TxBuffer(TxBuffer&& other) noexcept
    : port_(other.port_),
      queue_(other.queue_),
      buf_(std::exchange(other.buf_, nullptr)),
      dropped_(std::move(other.dropped_)) {}

TxBuffer& TxBuffer::operator=(TxBuffer&& other) noexcept {
  if (this != &other) {
    release();
    port_ = other.port_;
    queue_ = other.queue_;
    buf_ = std::exchange(other.buf_, nullptr);
    dropped_ = std::move(other.dropped_);
  }
  return *this;
}

void TxBuffer::release() noexcept {
  if (buf_ == nullptr) return;
  flush();
  rte_free(buf_);
  buf_ = nullptr;
}

}  // namespace spraynet::runtime
