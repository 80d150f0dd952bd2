#include "dataplane/runtime/poll_loop.h"

#include <sys/prctl.h>
#include <time.h>

#include <algorithm>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

namespace spraynet::runtime {

PollLoop::PollLoop(std::vector<RxQueue> rx, std::vector<TxQueue> tx, BurstHandler& handler,
                   const TscClock& clock, PollLoopConfig config)
    : rx_(std::move(rx)),
      handler_(handler),
      clock_(clock),
      config_(config),
      backoff_(config.idle_backoff) {
  if (config_.idle_backoff.max_sleep_ns != 0 &&
      config_.idle_backoff.min_sleep_ns > config_.idle_backoff.max_sleep_ns) {
    throw std::invalid_argument("PollLoop: idle back-off min_sleep_ns " +
                                std::to_string(config_.idle_backoff.min_sleep_ns) +
                                " above max_sleep_ns " +
                                std::to_string(config_.idle_backoff.max_sleep_ns));
  }
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

bool PollLoop::poll_rx() {
  rte_mbuf* pkts[kBurst];
  bool any = false;
  for (const RxQueue& q : rx_) {
    const uint16_t n = q.port->rx_burst(q.queue, pkts, kBurst);
    if (n == 0) continue;
    // The receive time is read after the burst is in hand, never before: between a time read
    // at the top of the iteration and rx_burst the lcore may be preempted (milliseconds on
    // shared cores) or busy with an earlier burst, and frames that arrived meanwhile would be
    // stamped before their arrival, so that a delay line released them early and a probe
    // measured less than the path (seen on veth: 96 us through a 200 us link).
    const uint64_t now_ns = clock_.now_ns();
    any = true;
    counters_.rx_packets += n;
    handler_.on_rx(q.port->id(), q.queue, pkts, n, now_ns, sink_);
  }
  return any;
}

void PollLoop::flush_all() {
  for (TxBuffer& b : tx_buffers_) sink_.sent_ += b.flush();
}

void PollLoop::sleep_idle(uint64_t ns) {
  // Nothing may wait in a tx buffer while the lcore sleeps: the drain tick would come late.
  flush_all();
  const uint64_t before = clock_.now_ns();
  const timespec ts{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
  clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, nullptr);  // a signal cutting it short is fine
  ++counters_.idle_sleeps;
  counters_.idle_sleep_ns += clock_.now_ns() - before;
}

void PollLoop::run(const StopSignal& stop) {
  std::optional<RcuReader> reader;
  if (config_.rcu != nullptr) reader.emplace(*config_.rcu, config_.rcu_reader_id);
  // Linux lets a normal thread's sleep overrun by its timer slack, 50 us by default: more than
  // the back-off's shortest sleeps. 1 us keeps the schedule the configured one.
  if (backoff_.enabled()) prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
  uint64_t now = clock_.now_ns();
  uint64_t last_flush = now;
  uint64_t iteration_start = now;
  bool received = false;
  while (!stop.requested()) {
    now = clock_.now_ns();
    // The last iteration, if it received anything, was busy until now.
    if (received) counters_.busy_ns += now - iteration_start;
    iteration_start = now;
    if (now - last_flush >= config_.drain_interval_ns) {
      flush_all();
      last_flush = now;
    }
    const uint64_t sent_before = sink_.sent_ + sink_.unrouted_;
    bool worked = poll_rx();
    received = worked;
    // Timers and sends after the bursts' work happen now, not when the iteration began.
    if (worked) now = clock_.now_ns();
    handler_.on_poll(now, sink_);
    if (reader) reader->quiescent();
    ++counters_.loops;
    publish();
    if (!backoff_.enabled()) continue;
    // Work is what moved a packet: received, or handed to a tx buffer (a handler's own timers,
    // an RC engine sending, a delay line releasing). A control thread's synchronize() may wait
    // one sleep longer (the reader reports quiescent states between iterations): at most
    // max_sleep_ns, against a control period of 200 ms.
    worked = worked || sink_.sent_ + sink_.unrouted_ != sent_before ||
             std::any_of(tx_buffers_.begin(), tx_buffers_.end(),
                         [](const TxBuffer& b) { return b.pending() != 0; });
    if (const uint64_t ns = backoff_.after_iteration(worked); ns != 0) {
      sleep_idle(ns);
      last_flush = clock_.now_ns();
    }
  }
  if (received) counters_.busy_ns += clock_.now_ns() - iteration_start;
  // What already arrived belongs to the handler too: hand it over before on_stop, so that a
  // stopped program neither leaks those mbufs nor loses packets it could have forwarded.
  for (unsigned round = 0; round < config_.max_drain_rounds; ++round) {
    if (!poll_rx()) break;
    if (reader) reader->quiescent();
  }
  handler_.on_stop(clock_.now_ns(), sink_);
  flush_all();
  publish();
}

void PollLoop::publish() {
  published_.loops.store(counters_.loops, std::memory_order_relaxed);
  published_.rx_packets.store(counters_.rx_packets, std::memory_order_relaxed);
  published_.tx_packets.store(sink_.sent_, std::memory_order_relaxed);
}

PollLoopProgress PollLoop::progress() const {
  return {published_.loops.load(std::memory_order_relaxed),
          published_.rx_packets.load(std::memory_order_relaxed),
          published_.tx_packets.load(std::memory_order_relaxed)};
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
