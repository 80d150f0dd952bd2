#include "dataplane/egress/earliest_event.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

using namespace spraynet;

TEST_CASE("EarliestEvent: empty and unset slots are never due", "[earliest_event]") {
  EarliestEvent none;
  CHECK(none.earliest() == EarliestEvent::kNever);
  EarliestEvent e(5);
  CHECK(e.size() == 5);
  CHECK(e.earliest() == EarliestEvent::kNever);
  std::vector<uint16_t> due;
  e.append_due(UINT64_MAX - 1, due);
  CHECK(due.empty());
}

TEST_CASE("EarliestEvent: earliest follows sets up and down", "[earliest_event]") {
  EarliestEvent e(3);
  e.set(1, 50);
  CHECK(e.earliest() == 50);
  e.set(2, 20);
  CHECK(e.earliest() == 20);
  e.set(2, 70);  // the earliest moves later: the next one takes over
  CHECK(e.earliest() == 50);
  e.set(1, EarliestEvent::kNever);
  CHECK(e.earliest() == 70);
  CHECK(e.at(1) == EarliestEvent::kNever);
  CHECK(e.at(2) == 70);
}

// Against a plain scan, over random updates and slot counts that are and are not powers of 2.
TEST_CASE("EarliestEvent: agrees with a linear scan", "[earliest_event]") {
  for (const size_t n : {1u, 2u, 7u, 16u, 64u, 100u}) {
    std::mt19937_64 rng(n);
    EarliestEvent e(n);
    std::vector<uint64_t> plain(n, EarliestEvent::kNever);
    for (int step = 0; step < 5000; ++step) {
      const size_t slot = rng() % n;
      const uint64_t t = rng() % 8 == 0 ? EarliestEvent::kNever : rng() % 1000;
      e.set(slot, t);
      plain[slot] = t;
      REQUIRE(e.earliest() == *std::min_element(plain.begin(), plain.end()));
      const uint64_t now = rng() % 1000;
      std::vector<uint16_t> due, expected;
      e.append_due(now, due);
      for (size_t i = 0; i < n; ++i) {
        if (plain[i] <= now) expected.push_back(static_cast<uint16_t>(i));
      }
      REQUIRE(due == expected);  // ascending slot order, each once
    }
  }
}
