#include "dataplane/runtime/tsc_clock.h"

#include <catch2/catch.hpp>

#include <chrono>

using spraynet::runtime::TscClock;

TEST_CASE("TSC time starts near zero and never goes back", "[tsc_clock]") {
  TscClock clock;
  CHECK(clock.hz() == rte_get_tsc_hz());
  const uint64_t first = clock.now_ns();
  CHECK(first < 1'000'000'000);
  uint64_t last = first;
  for (int i = 0; i < 1000; ++i) {
    const uint64_t now = clock.now_ns();
    REQUIRE(now >= last);
    last = now;
  }
}

TEST_CASE("cycles convert to nanoseconds without overflow", "[tsc_clock]") {
  TscClock clock;
  const uint64_t hz = clock.hz();
  CHECK(clock.to_ns(0) == 0);
  CHECK(clock.to_ns(hz) == 1'000'000'000);
  CHECK(500'000'000 - clock.to_ns(hz / 2) <= 1);
  // A day of cycles: cycles * 1e9 would have overflowed 64 bits long before.
  CHECK(clock.to_ns(hz * 86'400) == 86'400'000'000'000);
}

TEST_CASE("TSC time runs at the rate of the system's monotonic clock", "[tsc_clock]") {
  TscClock clock;
  // Spin (no sleep) until the steady clock has moved 20 ms, then compare.
  const auto t0 = std::chrono::steady_clock::now();
  const uint64_t n0 = clock.now_ns();
  std::chrono::nanoseconds elapsed{};
  do {
    elapsed = std::chrono::steady_clock::now() - t0;
  } while (elapsed < std::chrono::milliseconds(20));
  const double tsc_ns = static_cast<double>(clock.now_ns() - n0);
  CHECK(tsc_ns == Approx(static_cast<double>(elapsed.count())).epsilon(0.2));
}
