// Flow-size distributions for fabric_emu's workload generator: an empirical CDF given as points
// of a piecewise-linear function, the form the load-balancing literature ships them in (DCTCP's
// web search, Alibaba's storage 2019 as used by HPCC and ConWeave; see fabric/cdfs/README.md).
//
// Text format, one point a line:
//
//     SIZE_BYTES PERCENT        # percentage of flows of at most SIZE_BYTES
//
// SIZE_BYTES a non-negative integer, PERCENT a number in [0, 100]; both non-decreasing down the
// file; the first point's percent is 0 (normally `0 0`), the last is 100; at least 2 points.
// Blank lines and `#` comments (whole-line or trailing) are ignored. Between two points the
// flows are spread uniformly over the sizes (linear interpolation of the CDF); two points with
// the same size and rising percent put that share of flows at exactly that size.
//
// Every error is std::invalid_argument with "SOURCE:LINE: reason" (SOURCE is the file path, or
// the built-in's name for an embedded table). Nothing here touches DPDK, clocks or globals.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace spraynet::fabric {

class FlowSizeCdf {
 public:
  // Parses `text`; `source_name` only names it in errors ("NAME:LINE: reason").
  static FlowSizeCdf parse(std::string_view text, std::string_view source_name);
  // Reads and parses a file; an unreadable file is "PATH: cannot open (reason)".
  static FlowSizeCdf load(const std::string& path);
  // One of builtin_names(), embedded in the program (copies of fabric/cdfs/NAME.txt). An unknown
  // name is an error listing the allowed names.
  static FlowSizeCdf builtin(std::string_view name);
  // A built-in name if it is one, else a file path.
  static FlowSizeCdf resolve(std::string_view name_or_path);
  static std::vector<std::string> builtin_names();

  // Inverse CDF at u, interpolated linearly between points: the size below which a fraction u of
  // flows lie, rounded to the nearest byte and at least 1 byte (a flow of 0 bytes is no flow).
  // u is clamped to [0, 1]; u >= 1 gives max_bytes(). Feed it uniforms in [0, 1).
  uint64_t sample(double u) const;
  // Exact mean of the piecewise-linear distribution, in bytes: sum over segments of
  // (F[i+1] - F[i]) * (size[i] + size[i+1]) / 2. (sample()'s rounding and 1-byte floor move the
  // mean of its output by well under a byte for the built-in tables.)
  double mean_bytes() const;
  // The smallest size at which the CDF reaches 100%: no sample is larger.
  uint64_t max_bytes() const;
  // The points as parsed: (size in bytes, cumulative fraction in [0, 1]).
  const std::vector<std::pair<uint64_t, double>>& points() const { return points_; }

  // Upper edges of `bins` size bins holding roughly equal shares of flows, as the HPCC and
  // ConWeave papers bin FCT slowdown: the quantiles at k / bins for k = 1 .. bins - 1 (rounded,
  // at least 1 byte), then max_bytes() (or 1 if that is 0); strictly increasing, so a quantile that
  // repeats (a point mass) merges bins and fewer than `bins` edges come back. Bin i holds the flows
  // with edges[i-1] < bytes <= edges[i]. bins = 0 is an error.
  std::vector<uint64_t> bin_edges(size_t bins = 10) const;
  // The bin of a flow of `bytes`: the first edge >= bytes; larger than every edge goes in the
  // last bin. `edges` must be non-empty and increasing (as bin_edges() makes them).
  static size_t bin_of(const std::vector<uint64_t>& edges, uint64_t bytes);

 private:
  explicit FlowSizeCdf(std::vector<std::pair<uint64_t, double>> points);
  // Generalised inverse, unrounded: the smallest size x with F(x) >= p, p in [0, 1].
  double quantile(double p) const;

  std::vector<std::pair<uint64_t, double>> points_;
};

}  // namespace spraynet::fabric
