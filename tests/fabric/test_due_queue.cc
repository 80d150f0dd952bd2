#include "fabric/kernel/due_queue.h"

#include <catch2/catch.hpp>

#include <cstdint>
#include <functional>
#include <queue>
#include <random>
#include <stdexcept>
#include <tuple>
#include <vector>

using spraynet::fabric::DueQueue;

TEST_CASE("DueQueue: earliest first, ties in the order scheduled", "[due_queue]") {
  DueQueue q;
  CHECK(q.empty());
  q.push(30, 1);
  q.push(10, 2);
  q.push(30, 0);
  q.push(10, 7);
  std::vector<std::pair<uint64_t, uint32_t>> popped;
  while (!q.empty()) {
    popped.emplace_back(q.top().t, q.top().node());
    q.pop();
  }
  CHECK(popped == std::vector<std::pair<uint64_t, uint32_t>>{{10, 2}, {10, 7}, {30, 1}, {30, 0}});
  CHECK_THROWS_AS(q.push(1, DueQueue::kMaxNodes), std::out_of_range);
}

// The same pops as the std::priority_queue on (t, seq) it replaces, under interleaved pushes
// and pops with many equal times.
TEST_CASE("DueQueue: pops what a priority_queue on (t, seq) pops", "[due_queue]") {
  using Ref = std::tuple<uint64_t, uint64_t, uint32_t>;  // t, seq, node
  std::priority_queue<Ref, std::vector<Ref>, std::greater<Ref>> ref;
  DueQueue q;
  std::mt19937_64 rng(3);
  uint64_t seq = 0, now = 0;
  for (int step = 0; step < 200000; ++step) {
    if (rng() % 3 != 0 || ref.empty()) {
      const uint64_t t = now + rng() % 50;
      const uint32_t node = static_cast<uint32_t>(rng() % 1000);
      ref.emplace(t, seq++, node);
      q.push(t, node);
    } else {
      REQUIRE(q.size() == ref.size());
      REQUIRE(q.top().t == std::get<0>(ref.top()));
      REQUIRE(q.top().node() == std::get<2>(ref.top()));
      now = q.top().t;
      ref.pop();
      q.pop();
    }
  }
}
