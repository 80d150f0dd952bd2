#include "dataplane/rc_endpoint/completion_time_stats.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace spraynet {

void DurationSummary::add(uint64_t ns) {
  min_ns = count == 0 ? ns : std::min(min_ns, ns);
  max_ns = count == 0 ? ns : std::max(max_ns, ns);
  ++count;
  sum_ns += ns;
}

void DurationSummary::merge(const DurationSummary& o) {
  if (o.count == 0) return;
  min_ns = count == 0 ? o.min_ns : std::min(min_ns, o.min_ns);
  max_ns = count == 0 ? o.max_ns : std::max(max_ns, o.max_ns);
  count += o.count;
  sum_ns += o.sum_ns;
}

size_t CompletionTimeStats::bucket_of(uint64_t ns) {
  constexpr uint64_t kSub = uint64_t{1} << kSubBucketBits;
  if (ns < kSub) return static_cast<size_t>(ns);
  const unsigned e = 63u - static_cast<unsigned>(std::countl_zero(ns));  // >= kSubBucketBits
  const uint64_t sub = (ns >> (e - kSubBucketBits)) & (kSub - 1);
  return static_cast<size_t>((e - kSubBucketBits + 1) * kSub + sub);
}

uint64_t CompletionTimeStats::bucket_upper_ns(size_t bucket) {
  constexpr uint64_t kSub = uint64_t{1} << kSubBucketBits;
  if (bucket < kSub) return bucket;
  const unsigned e = static_cast<unsigned>(bucket / kSub) + kSubBucketBits - 1;
  const uint64_t sub = bucket % kSub;
  const unsigned shift = e - kSubBucketBits;
  const uint64_t top = kSub + sub + 1;  // the next bucket's mantissa
  // The last bucket's upper edge is 2^64 - 1, which the shift would overflow.
  if (shift + static_cast<unsigned>(std::bit_width(top)) > 64) return UINT64_MAX;
  return (top << shift) - 1;
}

void CompletionTimeStats::add(uint64_t ns) {
  summary_.add(ns);
  ++buckets_[bucket_of(ns)];
}

void CompletionTimeStats::merge(const CompletionTimeStats& o) {
  summary_.merge(o.summary_);
  for (size_t i = 0; i < kBuckets; ++i) buckets_[i] += o.buckets_[i];
}

uint64_t CompletionTimeStats::percentile_ns(double q) const {
  if (summary_.count == 0) return 0;
  if (!(q > 0.0)) return summary_.min_ns;
  if (q >= 1.0) return summary_.max_ns;
  const auto rank = std::max<uint64_t>(
      1, static_cast<uint64_t>(std::ceil(q * static_cast<double>(summary_.count))));
  uint64_t seen = 0;
  for (size_t i = 0; i < kBuckets; ++i) {
    seen += buckets_[i];
    if (seen >= rank) return std::clamp(bucket_upper_ns(i), summary_.min_ns, summary_.max_ns);
  }
  return summary_.max_ns;
}

}  // namespace spraynet
