// The poll-mode lcore loop: rx burst -> handler (the node) -> tx buffers, on TSC time.
#pragma once

#include <rte_mbuf.h>

#include <atomic>
#include <cstdint>
#include <vector>

#include "dataplane/runtime/port.h"
#include "dataplane/runtime/rcu_domain.h"
#include "dataplane/runtime/stop_signal.h"
#include "dataplane/runtime/tsc_clock.h"
#include "dataplane/runtime/tx_buffer.h"

namespace spraynet::runtime {

// Where a handler puts the mbufs it transmits: the TxBuffer of (port id, tx queue) in the loop
// that called it. An mbuf sent to a (port, queue) the loop does not own is freed and counted.
class TxSink {
 public:
  void send(uint16_t port_id, uint16_t queue, rte_mbuf* m) {
    TxBuffer* buf = find(port_id, queue);
    if (buf == nullptr) {
      rte_pktmbuf_free(m);
      ++unrouted_;
      return;
    }
    sent_ += buf->send(m);
  }
  // Straight to the PMD, for a wire port whose egress keeps what the PMD refuses: what the
  // (port, queue)'s buffer holds goes first, so frames leave in the order they were given.
  // Returns how many of pkts the PMD took; pkts[taken..n) still belong to the caller. To a
  // (port, queue) this loop does not own, as send(): every one freed, counted, and "taken".
  uint16_t burst(uint16_t port_id, uint16_t queue, rte_mbuf** pkts, uint16_t n) {
    TxBuffer* buf = find(port_id, queue);
    if (buf == nullptr) {
      rte_pktmbuf_free_bulk(pkts, n);
      unrouted_ += n;
      return n;
    }
    if (buf->pending() != 0) sent_ += buf->flush();
    const uint16_t taken = rte_eth_tx_burst(port_id, queue, pkts, n);
    sent_ += taken;
    return taken;
  }

 private:
  friend class PollLoop;

  TxBuffer* find(uint16_t port_id, uint16_t queue) const {
    if (port_id >= by_port_.size() || queue >= by_port_[port_id].size()) return nullptr;
    return by_port_[port_id][queue];
  }

  std::vector<std::vector<TxBuffer*>> by_port_;  // [port id][queue], null where not owned
  uint64_t sent_ = 0;
  uint64_t unrouted_ = 0;
};

// What a poll loop drives: a switch or NIC node. The handler owns the mbufs it is given: it
// sends each one through `tx`, frees it, or holds it (and then releases or frees it by
// on_stop). now_ns is TscClock time: for on_rx read after the burst arrived (never before a
// frame's arrival), for on_poll after the iteration's bursts.
class BurstHandler {
 public:
  virtual ~BurstHandler() = default;
  virtual void on_rx(uint16_t port_id, uint16_t queue, rte_mbuf** pkts, uint16_t n, uint64_t now_ns,
                     TxSink& tx) = 0;
  // Once per loop iteration, after the rx queues: egress timers (shaper, delay line, PFC).
  virtual void on_poll(uint64_t /*now_ns*/, TxSink& /*tx*/) {}
  // After the last rx burst: release or free everything still held.
  virtual void on_stop(uint64_t /*now_ns*/, TxSink& /*tx*/) {}
};

struct RxQueue {
  Port* port;
  uint16_t queue;
};

struct TxQueue {
  Port* port;
  uint16_t queue;
};

// Adaptive idle back-off. A poll-mode lcore that spins on empty queues takes its core whole:
// several DPDK processes on fewer cores than lcores (a one-machine veth fabric, CI) then only
// run when the scheduler preempts the spinner, every few milliseconds, and a packet waits that
// long at every hop. After `idle_polls` empty iterations in a row the loop sleeps, first
// `min_sleep_ns`, doubling at each further empty iteration up to `max_sleep_ns`; any packet
// received or sent ends it. So a loaded lcore never sleeps and an idle one gives its core back,
// at the price of up to max_sleep_ns more latency for the first packet after a quiet spell.
// max_sleep_ns 0 turns it off: pure busy polling, for benchmarks and lcores with a core each.
struct IdleBackoffConfig {
  uint64_t max_sleep_ns = 0;
  uint64_t min_sleep_ns = 1'000;
  unsigned idle_polls = 256;
};

// The back-off's state machine, apart from the loop so that its schedule is testable without
// a clock: after each iteration, say whether it did any work; the answer is how long to sleep.
class IdleBackoff {
 public:
  explicit IdleBackoff(IdleBackoffConfig c) : config_(c) {}

  bool enabled() const { return config_.max_sleep_ns != 0; }

  uint64_t after_iteration(bool worked) {
    if (worked || !enabled()) {
      idle_ = 0;
      next_sleep_ns_ = 0;
      return 0;
    }
    if (idle_ < config_.idle_polls) {
      ++idle_;
      return 0;
    }
    next_sleep_ns_ = next_sleep_ns_ == 0 ? config_.min_sleep_ns : next_sleep_ns_ * 2;
    if (next_sleep_ns_ > config_.max_sleep_ns) next_sleep_ns_ = config_.max_sleep_ns;
    return next_sleep_ns_;
  }

 private:
  IdleBackoffConfig config_;
  unsigned idle_ = 0;
  uint64_t next_sleep_ns_ = 0;
};

struct PollLoopConfig {
  // Like DPDK's l3fwd: a partly filled tx buffer waits at most this long.
  uint64_t drain_interval_ns = 100'000;
  // On stop, rx queues are polled until all come back empty, but no more than this many
  // rounds: a source that never runs dry (net_null, a busy link) would never let go.
  unsigned max_drain_rounds = 1024;
  uint16_t tx_buffer_size = 32;
  // When set, the loop is reader `rcu_reader_id` of this domain while run() runs: online from
  // start to stop, quiescent after every iteration (between bursts it holds no published
  // table), so a control thread's synchronize() waits at most one iteration.
  RcuDomain* rcu = nullptr;
  unsigned rcu_reader_id = 0;
  // Off by default (busy polling); the programs turn it on (--idle-backoff-us).
  IdleBackoffConfig idle_backoff{};
};

struct PollLoopCounters {
  uint64_t rx_packets = 0;
  uint64_t tx_packets = 0;
  uint64_t tx_dropped = 0;  // refused by a full tx queue, plus unrouted
  uint64_t unrouted = 0;    // sent to a (port, queue) this loop does not own
  uint64_t loops = 0;
  uint64_t idle_sleeps = 0;    // times the idle back-off slept
  uint64_t idle_sleep_ns = 0;  // and for how long in all, as measured on the loop's clock
  // Time in iterations that received a burst, from their start to the next one's (testpmd's
  // --record-core-cycles): busy_ns x the TSC rate / packets is the lcore's cost per packet
  // whether or not its input keeps it saturated.
  uint64_t busy_ns = 0;
};

// How far a running loop has got, for other threads (telemetry, a soak's stall check): each
// a count that only grows while the loop runs.
struct PollLoopProgress {
  uint64_t loops = 0;
  uint64_t rx_packets = 0;
  uint64_t tx_packets = 0;  // handed to tx buffers
};

// One lcore's loop over its (port, rx queue) list and its (port, tx queue) list, with one
// TxBuffer per tx queue. Single-threaded: run one PollLoop per lcore (see LcoreRunner).
class PollLoop {
 public:
  static constexpr uint16_t kBurst = 32;

  PollLoop(std::vector<RxQueue> rx, std::vector<TxQueue> tx, BurstHandler& handler,
           const TscClock& clock, PollLoopConfig config = {});

  PollLoop(const PollLoop&) = delete;
  PollLoop& operator=(const PollLoop&) = delete;

  // Polls until stop.requested(), then drains the rx queues into the handler, calls on_stop
  // and flushes every tx buffer.
  void run(const StopSignal& stop);

  // Plain counters, not atomics: read them on the loop's lcore or after run() returned.
  PollLoopCounters counters() const;
  // Safe from any thread at any time: what the loop published at the end of its last iteration.
  PollLoopProgress progress() const;

 private:
  // Hands every non-empty rx burst to the handler, stamped with a time read after it came.
  bool poll_rx();
  void flush_all();
  void sleep_idle(uint64_t ns);

  std::vector<RxQueue> rx_;
  std::vector<TxBuffer> tx_buffers_;
  TxSink sink_;
  BurstHandler& handler_;
  const TscClock& clock_;
  PollLoopConfig config_;
  IdleBackoff backoff_;
  PollLoopCounters counters_;
  // The lcore's copy for other threads: relaxed stores once per iteration (plain moves on x86,
  // no read-modify-write, no fence), on a cache line of their own so that readers never make
  // the lcore's own counters miss.
  struct alignas(64) Published {
    std::atomic<uint64_t> loops{0};
    std::atomic<uint64_t> rx_packets{0};
    std::atomic<uint64_t> tx_packets{0};
  } published_;
  void publish();
};

}  // namespace spraynet::runtime
