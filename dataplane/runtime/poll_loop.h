// The poll-mode lcore loop: rx burst -> handler (the node) -> tx buffers, on TSC time.
#pragma once

#include <rte_mbuf.h>

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
// on_stop). now_ns is TscClock time, read once per loop iteration.
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
};

struct PollLoopCounters {
  uint64_t rx_packets = 0;
  uint64_t tx_packets = 0;
  uint64_t tx_dropped = 0;  // refused by a full tx queue, plus unrouted
  uint64_t unrouted = 0;    // sent to a (port, queue) this loop does not own
  uint64_t loops = 0;
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

 private:
  bool poll_rx(uint64_t now_ns);
  void flush_all();

  std::vector<RxQueue> rx_;
  std::vector<TxBuffer> tx_buffers_;
  TxSink sink_;
  BurstHandler& handler_;
  const TscClock& clock_;
  PollLoopConfig config_;
  PollLoopCounters counters_;
};

}  // namespace spraynet::runtime
