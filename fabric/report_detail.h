// What fabric_report.cc, fabric_table.cc and fabric_csv.cc share: spreads over seeds, the modes
// in the order runs give them, and a censored figure as text.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "fabric/fabric_report.h"

namespace spraynet::fabric::report_detail {

struct Spread {
  double mean = 0, stddev = 0, min = 0, max = 0;
  size_t n = 0;
};

inline Spread spread(const std::vector<double>& v) {
  Spread s;
  s.n = v.size();
  if (v.empty()) return s;
  s.min = s.max = v[0];
  double sum = 0;
  for (double x : v) {
    sum += x;
    s.min = std::min(s.min, x);
    s.max = std::max(s.max, x);
  }
  s.mean = sum / static_cast<double>(v.size());
  if (v.size() > 1) {
    double sq = 0;
    for (double x : v) sq += (x - s.mean) * (x - s.mean);
    s.stddev = std::sqrt(sq / static_cast<double>(v.size() - 1));
  }
  return s;
}

inline std::vector<std::string> modes_in_order(const std::vector<RunResult>& runs) {
  std::vector<std::string> modes;
  for (const RunResult& r : runs) {
    if (std::find(modes.begin(), modes.end(), r.mode) == modes.end()) modes.push_back(r.mode);
  }
  return modes;
}

// A slowdown figure for the table and the CSV: ">=" in front when it is a lower bound.
inline std::string censored_text(const CensoredValue& v, const char* format) {
  char b[32];
  std::snprintf(b, sizeof b, format, v.value);
  return (v.censored ? ">=" : "") + std::string(b);
}

// One mode's figures over its seeds: what the table and summary.csv aggregate.
struct ModeFigures {
  std::vector<double> tp, cb, hum, hui, um, ui, dm, di, p50, p99, retx, naks, reord, pfc;
  uint64_t completed = 0, posted = 0, lossy = 0, warned = 0;
};

ModeFigures gather_mode(const std::vector<RunResult>& runs, const std::string& mode);

// One mode's slowdown with its seeds' messages pooled into the same bins (the first run's
// binning; ventiles: the pooled messages' own chunks), and the 95% intervals of each bin's
// mean and p99: across seeds (Student's t over the runs' own bin figures) when at least 3 runs
// have messages in the bin, else a bootstrap over the pooled messages (a fixed seed per bin;
// its draws are fabric_report.cc's kBootstrapResamples).
struct PooledSlowdown {
  bool any = false;
  SlowdownBinning binning = SlowdownBinning::kSingle;
  uint64_t runs = 0, messages = 0, unfinished = 0, excluded_warmup = 0;
  std::vector<SlowdownBin> bins;
  std::vector<std::string> ci_method;  // per bin: "across-seeds-t" | "bootstrap-flows"
  SlowdownBin all;                     // every bin's messages together
  std::vector<std::string> warnings;
};

PooledSlowdown pool_slowdown(const std::vector<RunResult>& runs, const std::string& mode,
                             bool with_ci);

}  // namespace spraynet::fabric::report_detail
