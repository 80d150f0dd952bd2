// NodeGate: lcores pass it per call into a node; whoever locks it has the node while every
// worker waits outside, and a worker never waits for another worker.
#include "dataplane/runtime/node_gate.h"

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

using spraynet::runtime::NodeGate;
using spraynet::runtime::NodeGateEntry;

TEST_CASE("NodeGate: workers pass an open gate without waiting for each other") {
  NodeGate gate;
  const unsigned a = gate.add_worker(), b = gate.add_worker();
  CHECK(gate.workers() == 2);
  // Both inside at once, on one thread: neither entry waits for the other.
  gate.enter(a);
  gate.enter(b);
  gate.leave(b);
  gate.leave(a);
  // With nobody inside, the requester gets the gate at once, and again after giving it back.
  {
    std::lock_guard<NodeGate> g(gate);
  }
  CHECK(gate.try_lock());
  gate.unlock();
}

TEST_CASE("NodeGate: a second requester waits; try_lock says no while the gate is held") {
  NodeGate gate;
  gate.add_worker();
  gate.lock();
  bool other = true;
  std::thread t([&] { other = gate.try_lock(); });
  t.join();
  CHECK_FALSE(other);
  gate.unlock();
  std::thread u([&] {
    other = gate.try_lock();
    if (other) gate.unlock();
  });
  u.join();
  CHECK(other);
}

TEST_CASE("NodeGate: while a requester holds the gate no worker is inside, and every worker call "
          "completes") {
  // Two workers add to plain (non-atomic) counters inside the gate; requesters lock it, read the
  // counters twice with a pause between and change them: a worker inside while the gate is held
  // would show as a change between the reads, or as a lost increment at the end.
  NodeGate gate;
  const unsigned w0 = gate.add_worker(), w1 = gate.add_worker();
  uint64_t counter = 0;  // written by both workers and the requesters, only through the gate
  constexpr uint64_t kPerWorker = 200'000;
  std::atomic<bool> go{false};
  auto worker = [&](unsigned w) {
    while (!go.load()) std::this_thread::yield();
    for (uint64_t i = 0; i < kPerWorker; ++i) {
      NodeGateEntry in(gate, w);
      ++counter;
    }
  };
  uint64_t moved_while_held = 0, requests = 0, added_by_requesters = 0;
  std::thread t0(worker, w0), t1(worker, w1);
  std::thread requester([&] {
    while (!go.load()) std::this_thread::yield();
    for (int r = 0; r < 300; ++r) {
      std::lock_guard<NodeGate> g(gate);
      const uint64_t before = counter;
      for (int spin = 0; spin < 2000; ++spin) rte_pause();
      moved_while_held += counter != before;
      counter += 1000;  // exclusive: a racing worker increment would be lost
      added_by_requesters += 1000;
      ++requests;
    }
  });
  go = true;
  t0.join();
  t1.join();
  requester.join();
  CHECK(requests == 300);
  CHECK(moved_while_held == 0);
  CHECK(counter == 2 * kPerWorker + added_by_requesters);
}

TEST_CASE("NodeGate: a worker that never enters does not hold a requester up") {
  NodeGate gate;
  gate.add_worker();  // registered, idle (an lcore between calls, or one that has stopped)
  const unsigned busy = gate.add_worker();
  gate.enter(busy);
  std::atomic<bool> locked{false};
  std::thread requester([&] {
    std::lock_guard<NodeGate> g(gate);
    locked = true;
  });
  // The requester waits for the busy worker only: for 200 ms it must not get the gate.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
  while (std::chrono::steady_clock::now() < deadline && !locked.load()) std::this_thread::yield();
  CHECK_FALSE(locked.load());  // still inside: the gate cannot be had
  gate.leave(busy);
  requester.join();
  CHECK(locked.load());
}
