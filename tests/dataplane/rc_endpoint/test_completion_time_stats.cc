// CompletionTimeStats (dataplane/rc_endpoint/completion_time_stats.h): exact count, min, max and
// mean, percentiles within one log-linear bucket of values the test computes itself.
#include "dataplane/rc_endpoint/completion_time_stats.h"

#include <catch2/catch.hpp>
#include <cstdint>

using namespace spraynet;

TEST_CASE("completion-time statistics: exact min/max, percentiles within one bucket") {
  CompletionTimeStats s;
  CHECK(s.percentile_ns(0.5) == 0);
  for (uint64_t v = 1; v <= 1000; ++v) s.add(v * 1000);  // 1 us .. 1 ms
  CHECK(s.count() == 1000);
  CHECK(s.min_ns() == 1000);
  CHECK(s.max_ns() == 1'000'000);
  CHECK(s.mean_ns() == Approx(500'500.0));
  const uint64_t p50 = s.percentile_ns(0.5), p99 = s.percentile_ns(0.99);
  CHECK(p50 >= 500'000);
  CHECK(p50 <= 500'000 * 9 / 8);
  CHECK(p99 >= 990'000);
  CHECK(p99 <= 1'000'000);
  CHECK(s.percentile_ns(1.0) == 1'000'000);
  CHECK(s.percentile_ns(0.0) == 1000);

  CompletionTimeStats t;
  t.add(7);
  CHECK(t.percentile_ns(0.5) == 7);  // small values are exact
  t.merge(s);
  CHECK(t.count() == 1001);
  CHECK(t.min_ns() == 7);
  CHECK(t.max_ns() == 1'000'000);

  // Buckets tile the whole range: each value is within its bucket, the next one starts after.
  for (const uint64_t v :
       {uint64_t{0}, uint64_t{7}, uint64_t{8}, uint64_t{15}, uint64_t{16}, uint64_t{1000},
        uint64_t{1} << 40, (uint64_t{1} << 63) + 5, UINT64_MAX}) {
    const size_t b = CompletionTimeStats::bucket_of(v);
    REQUIRE(b < CompletionTimeStats::kBuckets);
    CHECK(CompletionTimeStats::bucket_upper_ns(b) >= v);
    if (b > 0) CHECK(CompletionTimeStats::bucket_upper_ns(b - 1) < v);
    if (v != UINT64_MAX) {
      const uint64_t up = CompletionTimeStats::bucket_upper_ns(b);
      if (up != UINT64_MAX) CHECK(CompletionTimeStats::bucket_of(up + 1) == b + 1);
    }
  }
  CHECK(CompletionTimeStats::bucket_of(UINT64_MAX) == CompletionTimeStats::kBuckets - 1);
}
