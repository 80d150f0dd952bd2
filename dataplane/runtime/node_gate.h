// The gate between a node's lcores and everyone else (the control thread, acting telemetry
// commands, a counter publication): the lcores pass through it on every call into the node, and
// whoever needs the whole node to itself closes it, as VPP's worker barrier does.
//
// Worker side (an lcore), per call into the node: enter(w) marks worker w inside on its own
// cache line and checks that the gate is open; leave(w) marks it outside. No lcore ever writes a
// line another lcore writes, and no lcore waits for another lcore: two lcores running different
// lanes of a node share nothing here.
//
// Requester side: lock() closes the gate and waits until every worker is outside (at most one
// burst); until unlock() no worker enters. lock()/try_lock()/unlock() make it BasicLockable, so
// std::lock_guard works as it did with a mutex. Requesters are serialised among themselves.
// An lcore that wants the whole node (to publish its counters) must leave() before it locks.
//
// Ordering: enter() stores "inside" then loads "closed"; lock() stores "closed" then loads each
// "inside", both sequentially consistent (Dekker): a worker and a requester never both go on.
// Never wait for an RCU grace period while holding the gate: a worker parked in enter() is not
// quiescent.
#pragma once

#include <rte_pause.h>

#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>

namespace spraynet::runtime {

class NodeGate {
 public:
  static constexpr unsigned kMaxWorkers = 128;

  NodeGate() : inside_(std::make_unique<Slot[]>(kMaxWorkers)) {}
  NodeGate(const NodeGate&) = delete;
  NodeGate& operator=(const NodeGate&) = delete;

  // A new worker's index (before the workers run; not thread-safe against enter/lock).
  unsigned add_worker() {
    if (workers_ == kMaxWorkers) throw std::length_error("NodeGate: more than 128 lcores");
    return workers_++;
  }
  unsigned workers() const { return workers_; }

  // Worker side.
  void enter(unsigned w) {
    Slot& s = inside_[w];
    for (;;) {
      s.inside.store(true, std::memory_order_seq_cst);
      if (!closed_.load(std::memory_order_seq_cst)) return;
      s.inside.store(false, std::memory_order_release);
      wait_while_closed();
    }
  }
  void leave(unsigned w) { inside_[w].inside.store(false, std::memory_order_release); }

  // Requester side.
  void lock() {
    holders_.lock();
    close();
  }
  bool try_lock() {
    if (!holders_.try_lock()) return false;
    close();
    return true;
  }
  void unlock() {
    closed_.store(false, std::memory_order_release);
    holders_.unlock();
  }

 private:
  struct alignas(64) Slot {
    std::atomic<bool> inside{false};
  };

  void close() {
    closed_.store(true, std::memory_order_seq_cst);
    for (unsigned w = 0; w < workers_; ++w) {
      unsigned spins = 0;
      while (inside_[w].inside.load(std::memory_order_seq_cst)) backoff(spins);
    }
  }
  void wait_while_closed() const {
    unsigned spins = 0;
    while (closed_.load(std::memory_order_acquire)) backoff(spins);
  }
  // Spin briefly (the other side is one burst away), then give the core to the other side: on
  // a machine with fewer cores than threads the holder may be waiting for this one's core.
  static void backoff(unsigned& spins) {
    if (++spins < 2048) {
      rte_pause();
    } else {
      std::this_thread::yield();
    }
  }

  std::unique_ptr<Slot[]> inside_;
  unsigned workers_ = 0;
  alignas(64) std::atomic<bool> closed_{false};
  std::mutex holders_;
};

// A worker inside the gate for one scope.
class NodeGateEntry {
 public:
  NodeGateEntry(NodeGate& gate, unsigned worker) : gate_(gate), worker_(worker) {
    gate_.enter(worker_);
  }
  ~NodeGateEntry() { gate_.leave(worker_); }
  NodeGateEntry(const NodeGateEntry&) = delete;
  NodeGateEntry& operator=(const NodeGateEntry&) = delete;

 private:
  NodeGate& gate_;
  unsigned worker_;
};

}  // namespace spraynet::runtime
