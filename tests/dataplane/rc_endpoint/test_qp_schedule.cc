#include "dataplane/rc_endpoint/qp_schedule.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <random>
#include <vector>

using namespace spraynet;

TEST_CASE("QpSchedule: due QPs in index order, earliest, updates and removal") {
  QpSchedule s(8);
  CHECK(s.earliest() == QpSchedule::kNever);
  s.set(5, 100);
  s.set(2, 50);
  s.set(7, 0);
  s.set(1, 300);
  CHECK(s.scheduled() == 4);
  CHECK(s.earliest() == 0);
  std::vector<uint32_t> due;
  CHECK(s.due_by(100, due) == 3);
  CHECK(due == std::vector<uint32_t>{2, 5, 7});  // index order, not time order
  s.set(7, QpSchedule::kNever);                  // nothing due any more
  s.set(2, 400);                                 // later
  CHECK(s.scheduled() == 3);
  due.clear();
  s.due_by(100, due);
  CHECK(due == std::vector<uint32_t>{5});
  CHECK(s.earliest() == 100);
  CHECK(s.earliest_if([](uint32_t qp) { return qp != 5; }) == 300);
  CHECK(s.earliest_if([](uint32_t) { return false; }) == QpSchedule::kNever);
  s.set(20, 10);  // grows
  CHECK(s.due(20) == 10);
  CHECK(s.due(99) == QpSchedule::kNever);
}

TEST_CASE("QpSchedule: random updates agree with a walk over every QP") {
  std::mt19937_64 rng(7);
  const uint32_t n = 500;
  QpSchedule s(n);
  std::vector<uint64_t> due(n, QpSchedule::kNever);
  for (int round = 0; round < 20'000; ++round) {
    const uint32_t qp = static_cast<uint32_t>(rng() % n);
    const uint64_t t = rng() % 5 == 0 ? QpSchedule::kNever : rng() % 1000;
    s.set(qp, t);
    due[qp] = t;
    if (round % 97 != 0) continue;
    const uint64_t now = rng() % 1000;
    std::vector<uint32_t> want, got;
    uint64_t earliest = QpSchedule::kNever, earliest_odd = QpSchedule::kNever;
    for (uint32_t i = 0; i < n; ++i) {
      if (due[i] <= now) want.push_back(i);
      earliest = std::min(earliest, due[i]);
      if (i % 2 == 1) earliest_odd = std::min(earliest_odd, due[i]);
    }
    s.due_by(now, got);
    REQUIRE(got == want);
    REQUIRE(s.earliest() == earliest);
    REQUIRE(s.earliest_if([](uint32_t qp) { return qp % 2 == 1; }) == earliest_odd);
  }
}
