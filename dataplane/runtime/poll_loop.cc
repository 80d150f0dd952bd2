#include "dataplane/runtime/poll_loop.h"

#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

namespace spraynet::runtime {

PollLoop::PollLoop(std::vector<RxQueue> rx, std::vector<TxQueue> tx, BurstHandler& handler,
                   const TscClock& clock, PollLoopConfig config)
    : rx_(std::move(rx)), handler_(handler), clock_(clock), config_(config) {
  tx_buffers_.reserve(tx.size());  // the sink points into it
  for (const TxQueue& q : tx) {
    const uint16_t pid = q.port->id();
    if (sink_.find(pid, q.queue) != nullptr) {
      throw std::invalid_argument("PollLoop: tx queue " + std::to_string(q.queue) + " of port " +
                                  std::to_string(pid) + " given twice");
    }
    tx_buffers_.emplace_back(pid, q.queue, config_.tx_buffer_size);
    if (sink_.by_port_.size() <= pid) sink_.by_port_.resize(pid + 1);
    auto& queues = sink_.by_port_[pid];
    if (queues.size() <= q.queue) queues.resize(q.queue + 1, nullptr);
    queues[q.queue] = &tx_buffers_.back();
  }
}

bool PollLoop::poll_rx(uint64_t now_ns) {
  rte_mbuf* pkts[kBurst];
  bool any = false;
  for (const RxQueue& q : rx_) {
    const uint16_t n = q.port->rx_burst(q.queue, pkts, kBurst);
    if (n == 0) continue;
    any = true;
    counters_.rx_packets += n;
    handler_.on_rx(q.port->id(), q.queue, pkts, n, now_ns, sink_);
  }
  return any;
}

void PollLoop::flush_all() {
  for (TxBuffer& b : tx_buffers_) sink_.sent_ += b.flush();
}

void PollLoop::run(const StopSignal& stop) {
  std::optional<RcuReader> reader;
  if (config_.rcu != nullptr) reader.emplace(*config_.rcu, config_.rcu_reader_id);
  uint64_t now = clock_.now_ns();
  uint64_t last_flush = now;
  while (!stop.requested()) {
    now = clock_.now_ns();
    if (now - last_flush >= config_.drain_interval_ns) {
      flush_all();
      last_flush = now;
    }
    poll_rx(now);
    handler_.on_poll(now, sink_);
    if (reader) reader->quiescent();
    ++counters_.loops;
  }
  // What already arrived belongs to the handler too: hand it over before on_stop, so that a
  // stopped program neither leaks those mbufs nor loses packets it could have forwarded.
  for (unsigned round = 0; round < config_.max_drain_rounds; ++round) {
    now = clock_.now_ns();
    if (!poll_rx(now)) break;
    if (reader) reader->quiescent();
  }
  handler_.on_stop(clock_.now_ns(), sink_);
  flush_all();
}

PollLoopCounters PollLoop::counters() const {
  PollLoopCounters c = counters_;
  c.tx_packets = sink_.sent_;
  c.unrouted = sink_.unrouted_;
  c.tx_dropped = sink_.unrouted_;
  for (const TxBuffer& b : tx_buffers_) c.tx_dropped += b.dropped();
  return c;
}

}  // namespace spraynet::runtime
