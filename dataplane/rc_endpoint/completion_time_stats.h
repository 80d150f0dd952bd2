// Completion times of messages (or flows): what RcRequester, the traffic engine and the fabric
// report as FCT summaries and percentiles. Pure arithmetic: no clock, no allocation per sample.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace spraynet {

// Count, min, max and sum of durations.
struct DurationSummary {
  uint64_t count = 0;
  uint64_t sum_ns = 0;
  uint64_t min_ns = 0;  // 0 while count == 0
  uint64_t max_ns = 0;

  void add(uint64_t ns);
  void merge(const DurationSummary& o);
  double mean_ns() const { return count == 0 ? 0.0 : static_cast<double>(sum_ns) / count; }
};

// Message completion times: exact count/min/max/sum plus a log-linear histogram (8 buckets per
// power of two, so a percentile is within 12.5% of the true value; below 8 ns it is exact).
// Fixed size (about 4 KB), no allocation per sample.
class CompletionTimeStats {
 public:
  void add(uint64_t ns);
  void merge(const CompletionTimeStats& o);

  const DurationSummary& summary() const { return summary_; }
  uint64_t count() const { return summary_.count; }
  uint64_t min_ns() const { return summary_.min_ns; }
  uint64_t max_ns() const { return summary_.max_ns; }
  double mean_ns() const { return summary_.mean_ns(); }
  // The q-quantile (q in [0, 1], e.g. 0.5, 0.99): the upper edge of the bucket holding the
  // ceil(q * count)-th smallest sample, clamped to [min, max]. 0 when empty.
  uint64_t percentile_ns(double q) const;

  static constexpr size_t kSubBucketBits = 3;
  static constexpr size_t kBuckets = (64 - kSubBucketBits + 1) << kSubBucketBits;
  static size_t bucket_of(uint64_t ns);
  static uint64_t bucket_upper_ns(size_t bucket);

 private:
  DurationSummary summary_;
  std::array<uint64_t, kBuckets> buckets_{};
};

}  // namespace spraynet
