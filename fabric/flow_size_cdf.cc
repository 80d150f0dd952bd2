#include "fabric/flow_size_cdf.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <system_error>

namespace spraynet::fabric {

namespace {

// Embedded copies of fabric/cdfs/websearch.txt and fabric/cdfs/alistorage2019.txt (see
// fabric/cdfs/README.md for their origin). test_flow_size_cdf checks they parse to the same points
// as the files; edit both together.
constexpr std::string_view kWebsearch = R"(0 0
10000 15
20000 20
30000 30
50000 40
80000 53
200000 60
1000000 70
2000000 80
5000000 90
10000000 97
30000000 100
)";

constexpr std::string_view kAliStorage2019 = R"(0 0
4000 22.93
8000 69.21
16000 80.61
32000 90.47
64000 93.53
128000 96.77
256000 97.53
2000000 100
)";

struct Builtin {
  std::string_view name;
  std::string_view text;
};
constexpr Builtin kBuiltins[] = {{"websearch", kWebsearch}, {"alistorage2019", kAliStorage2019}};

std::string allowed_names() {
  std::string out;
  for (const Builtin& b : kBuiltins) {
    if (!out.empty()) out += ", ";
    out += b.name;
  }
  return out;
}

[[noreturn]] void fail(std::string_view source, size_t line, const std::string& reason) {
  throw std::invalid_argument(std::string(source) + ":" + std::to_string(line) + ": " + reason);
}

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

std::vector<std::string_view> split_fields(std::string_view s) {
  std::vector<std::string_view> fields;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && is_space(s[i])) ++i;
    size_t j = i;
    while (j < s.size() && !is_space(s[j])) ++j;
    if (j > i) fields.push_back(s.substr(i, j - i));
    i = j;
  }
  return fields;
}

std::string fmt_percent(double p) {
  std::ostringstream os;
  os << p;
  return os.str();
}

}  // namespace

FlowSizeCdf::FlowSizeCdf(std::vector<std::pair<uint64_t, double>> points)
    : points_(std::move(points)) {}

FlowSizeCdf FlowSizeCdf::parse(std::string_view text, std::string_view source_name) {
  std::vector<std::pair<uint64_t, double>> points;
  uint64_t prev_size = 0;
  double prev_percent = 0.0;
  size_t line_no = 0;
  size_t last_point_line = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;

    if (size_t hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    const std::vector<std::string_view> fields = split_fields(line);
    if (fields.empty()) continue;
    if (fields.size() != 2) {
      fail(source_name, line_no,
           "expected 'SIZE_BYTES PERCENT', got " + std::to_string(fields.size()) + " fields");
    }
    const std::string_view size_tok = fields[0];
    const std::string_view pct_tok = fields[1];

    if (size_tok.front() == '-')
      fail(source_name, line_no, "negative size '" + std::string(size_tok) + "'");
    uint64_t size = 0;
    {
      auto [ptr, ec] = std::from_chars(size_tok.data(), size_tok.data() + size_tok.size(), size);
      if (ec == std::errc::result_out_of_range) {
        fail(source_name, line_no, "size '" + std::string(size_tok) + "' out of range");
      }
      if (ec != std::errc() || ptr != size_tok.data() + size_tok.size()) {
        fail(source_name, line_no,
             "size '" + std::string(size_tok) + "' is not a non-negative integer number of bytes");
      }
    }
    if (pct_tok.front() == '-')
      fail(source_name, line_no, "negative percent '" + std::string(pct_tok) + "'");
    double percent = 0.0;
    {
      auto [ptr, ec] = std::from_chars(pct_tok.data(), pct_tok.data() + pct_tok.size(), percent);
      if (ec != std::errc() || ptr != pct_tok.data() + pct_tok.size() || !std::isfinite(percent)) {
        fail(source_name, line_no, "percent '" + std::string(pct_tok) + "' is not a number");
      }
    }
    if (percent > 100.0) {
      fail(source_name, line_no, "percent " + std::string(pct_tok) + " is above 100");
    }
    if (points.empty()) {
      if (percent != 0.0) {
        fail(source_name, line_no,
             "first point's percent must be 0 (e.g. '0 0'), got " + std::string(pct_tok));
      }
    } else {
      if (size < prev_size) {
        fail(source_name, line_no,
             "size " + std::to_string(size) + " is below the previous point's " +
                 std::to_string(prev_size) + " (sizes must be non-decreasing)");
      }
      if (percent < prev_percent) {
        fail(source_name, line_no,
             "percent " + std::string(pct_tok) + " is below the previous point's " +
                 fmt_percent(prev_percent) + " (percents must be non-decreasing)");
      }
    }
    points.emplace_back(size, percent / 100.0);
    prev_size = size;
    prev_percent = percent;
    last_point_line = line_no;
  }

  if (points.size() < 2) {
    fail(source_name, std::max<size_t>(line_no, 1),
         "a CDF needs at least 2 points, found " + std::to_string(points.size()));
  }
  if (prev_percent != 100.0) {
    fail(source_name, last_point_line,
         "last point's percent must be 100, got " + fmt_percent(prev_percent));
  }
  return FlowSizeCdf(std::move(points));
}

FlowSizeCdf FlowSizeCdf::load(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw std::invalid_argument(path + ": cannot open (is a directory)");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw std::invalid_argument(path + ": cannot open (" + std::strerror(errno) + ")");
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw std::invalid_argument(path + ": read error");
  return parse(text.str(), path);
}

FlowSizeCdf FlowSizeCdf::builtin(std::string_view name) {
  for (const Builtin& b : kBuiltins) {
    if (b.name == name) return parse(b.text, b.name);
  }
  throw std::invalid_argument("unknown built-in flow-size CDF '" + std::string(name) +
                              "' (allowed: " + allowed_names() + ")");
}

FlowSizeCdf FlowSizeCdf::resolve(std::string_view name_or_path) {
  for (const Builtin& b : kBuiltins) {
    if (b.name == name_or_path) return parse(b.text, b.name);
  }
  const std::string path(name_or_path);
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    throw std::invalid_argument("flow-size CDF '" + path + "' is neither a built-in (" +
                                allowed_names() + ") nor an existing file");
  }
  return load(path);
}

std::vector<std::string> FlowSizeCdf::builtin_names() {
  std::vector<std::string> names;
  for (const Builtin& b : kBuiltins) names.emplace_back(b.name);
  return names;
}

double FlowSizeCdf::quantile(double p) const {
  // First point with F >= p; the answer lies on the segment ending there.
  auto it = std::lower_bound(
      points_.begin(), points_.end(), p,
      [](const std::pair<uint64_t, double>& pt, double v) { return pt.second < v; });
  if (it == points_.begin()) return static_cast<double>(it->first);
  if (it == points_.end()) return static_cast<double>(points_.back().first);
  if (it->second == p) return static_cast<double>(it->first);
  const auto& lo = *(it - 1);
  const auto& hi = *it;
  // lo.second < p < hi.second, so the denominator is positive.
  const double t = (p - lo.second) / (hi.second - lo.second);
  return static_cast<double>(lo.first) +
         t * (static_cast<double>(hi.first) - static_cast<double>(lo.first));
}

uint64_t FlowSizeCdf::sample(double u) const {
  if (!(u > 0.0)) u = 0.0;  // also NaN
  if (u > 1.0) u = 1.0;
  const double x = std::round(quantile(u));
  if (x < 1.0) return 1;
  return static_cast<uint64_t>(x);
}

double FlowSizeCdf::mean_bytes() const {
  double mean = 0.0;
  for (size_t i = 1; i < points_.size(); ++i) {
    const double mass = points_[i].second - points_[i - 1].second;
    mean += mass *
            (static_cast<double>(points_[i - 1].first) + static_cast<double>(points_[i].first)) /
            2.0;
  }
  return mean;
}

uint64_t FlowSizeCdf::max_bytes() const {
  for (const auto& [size, fraction] : points_) {
    if (fraction >= 1.0) return size;
  }
  return points_.back().first;  // unreachable: parse() requires the last point at 100%
}

std::vector<uint64_t> FlowSizeCdf::bin_edges(size_t bins) const {
  if (bins == 0) throw std::invalid_argument("FlowSizeCdf::bin_edges: bins must be at least 1");
  std::vector<uint64_t> edges;
  edges.reserve(bins);
  for (size_t k = 1; k < bins; ++k) {
    const double q = std::round(quantile(static_cast<double>(k) / static_cast<double>(bins)));
    const uint64_t edge = q < 1.0 ? 1 : static_cast<uint64_t>(q);
    if (edges.empty() || edge > edges.back()) edges.push_back(edge);
  }
  const uint64_t top = max_bytes();
  if (edges.empty() || top > edges.back()) edges.push_back(top);
  return edges;
}

size_t FlowSizeCdf::bin_of(const std::vector<uint64_t>& edges, uint64_t bytes) {
  if (edges.empty()) throw std::invalid_argument("FlowSizeCdf::bin_of: no bin edges");
  auto it = std::lower_bound(edges.begin(), edges.end(), bytes);
  if (it == edges.end()) return edges.size() - 1;
  return static_cast<size_t>(it - edges.begin());
}

}  // namespace spraynet::fabric
