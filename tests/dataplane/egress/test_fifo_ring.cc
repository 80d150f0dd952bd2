#include "dataplane/egress/fifo_ring.h"

#include <catch2/catch.hpp>

#include <cstdint>
#include <deque>
#include <random>
#include <vector>

using namespace spraynet;

TEST_CASE("FifoRing: first in, first out, across growth and wrap", "[fifo_ring]") {
  FifoRing<uint32_t> r;
  CHECK(r.empty());
  CHECK(r.capacity() == 0);
  for (uint32_t i = 0; i < 10; ++i) r.push_back(i);
  for (uint32_t i = 0; i < 6; ++i) {  // the front moves on: the next pushes wrap
    CHECK(r.front() == i);
    r.pop_front();
  }
  for (uint32_t i = 10; i < 100; ++i) r.push_back(i);  // grows while wrapped
  CHECK(r.size() == 94);
  CHECK(r.capacity() >= 94);
  uint32_t expected = 6;
  for (const uint32_t v : r) CHECK(v == expected++);
  CHECK(r.back() == 99);
  r.pop_back();
  CHECK(r.back() == 98);
  CHECK(r[0] == 6);
  r.clear();
  CHECK(r.empty());
  CHECK(r.begin() == r.end());
}

// Against std::deque, the container it replaces, over random pushes and pops at both ends.
TEST_CASE("FifoRing: behaves as std::deque for its operations", "[fifo_ring]") {
  std::mt19937 rng(7);
  FifoRing<uint64_t> r;
  std::deque<uint64_t> d;
  for (int step = 0; step < 200000; ++step) {
    const unsigned op = rng() % 10;
    if (op < 5 || d.empty()) {
      r.push_back(step);
      d.push_back(step);
    } else if (op < 9) {
      REQUIRE(r.front() == d.front());
      r.pop_front();
      d.pop_front();
    } else {
      REQUIRE(r.back() == d.back());
      r.pop_back();
      d.pop_back();
    }
    REQUIRE(r.size() == d.size());
    if (step % 997 == 0)
      REQUIRE(std::vector<uint64_t>(r.begin(), r.end()) ==
              std::vector<uint64_t>(d.begin(), d.end()));
  }
}
