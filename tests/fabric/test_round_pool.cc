// RoundPool: every item of a round runs exactly once, on whichever thread; rounds follow one
// another without a lost wake-up; an item's exception reaches the caller.
#include "fabric/kernel/round_pool.h"

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <numeric>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

using spraynet::fabric::RoundPool;

TEST_CASE("every item of every round runs exactly once, whatever the thread count") {
  for (const uint32_t threads : {0u, 1u, 2u, 3u, 8u}) {
    RoundPool pool(threads);
    CHECK(pool.threads() == std::max(1u, threads));
    std::vector<uint32_t> items(37);
    std::iota(items.begin(), items.end(), 0u);
    std::vector<std::atomic<uint32_t>> runs(items.size());
    const std::function<void(uint32_t)> fn = [&](uint32_t i) { runs[i].fetch_add(1); };
    // Many short rounds: a worker that misses a round's start would hang or skip items.
    for (int round = 0; round < 2000; ++round) pool.run(items, fn);
    for (const auto& r : runs) CHECK(r.load() == 2000);
  }
}

TEST_CASE("a round of one item, and of none, returns") {
  RoundPool pool(4);
  int ran = 0;
  const std::function<void(uint32_t)> fn = [&](uint32_t) { ++ran; };
  pool.run({}, fn);
  CHECK(ran == 0);
  pool.run({5}, fn);
  CHECK(ran == 1);
}

TEST_CASE("items run on several threads when there are several") {
  RoundPool pool(2);
  std::vector<uint32_t> items(64);
  std::iota(items.begin(), items.end(), 0u);
  std::mutex m;
  std::set<std::thread::id> seen;
  // Each item waits a little, so that one thread alone cannot take them all before the other
  // wakes; a hundred rounds make a miss on every one implausible.
  const std::function<void(uint32_t)> fn = [&](uint32_t) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(50);
    while (std::chrono::steady_clock::now() < until) {
    }
    const std::lock_guard<std::mutex> lock(m);
    seen.insert(std::this_thread::get_id());
  };
  for (int round = 0; round < 100 && seen.size() < 2; ++round) pool.run(items, fn);
  CHECK(seen.size() == 2);
}

TEST_CASE("an item's exception reaches the caller after the round, and the pool goes on") {
  RoundPool pool(3);
  std::vector<uint32_t> items(10);
  std::iota(items.begin(), items.end(), 0u);
  std::atomic<int> ran{0};
  const std::function<void(uint32_t)> bad = [&](uint32_t i) {
    ++ran;
    if (i == 4) throw std::runtime_error("item 4");
  };
  CHECK_THROWS_WITH(pool.run(items, bad), "item 4");
  CHECK(ran.load() == 10);  // the other items still ran
  const std::function<void(uint32_t)> good = [&](uint32_t) { ++ran; };
  pool.run(items, good);
  CHECK(ran.load() == 20);
}
