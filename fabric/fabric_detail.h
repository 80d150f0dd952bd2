// What fabric/fabric*.cc share: the constants and one small statistic.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace spraynet::fabric::detail {

inline constexpr uint64_t kNever = UINT64_MAX;
inline constexpr uint16_t kBurst = 64;

// The q-quantile of v by the nearest-rank rule (v is reordered).
inline double percentile(std::vector<double>& v, double q) {
  if (v.empty()) return 0;
  const size_t k = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())));
  const size_t i = std::min(v.size() - 1, k == 0 ? 0 : k - 1);
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(i), v.end());
  return v[i];
}

}  // namespace spraynet::fabric::detail
