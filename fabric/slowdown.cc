#include "fabric/slowdown.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <queue>
#include <random>
#include <stdexcept>

#include "dataplane/egress/link_emulator.h"
#include "fabric/fabric_report.h"
#include "fabric/flow_size_cdf.h"

namespace spraynet::fabric {

namespace {

// Messages of up to this many packets go through the hops packet by packet (at most a few
// microseconds of arithmetic at a completion); larger ones by the closed form below.
constexpr uint64_t kExactPackets = 65536;
constexpr uint32_t kAckFrameBytes = 14 + 20 + 8 + 12 + 4 + 4;  // Eth, IPv4, UDP, BTH, AETH, ICRC

// Store and forward over hops of `rates`: finish[i] is when the packets so far have left hop i
// (delays left out: every packet crosses each cable once, so they add up front). `m` more
// packets of `bits` each: the longest path through the (packet, hop) grid, which with m equal
// rows is, entering row 1 at hop j from the packet before and leaving at hop i, the sum of
// their times over hops j..i plus m - 1 more of the slowest among them.
void add_packets(std::vector<double>& finish, const PathHop* hops, double bits, uint64_t m) {
  if (m == 0) return;
  const size_t n = finish.size();
  std::vector<double> next(n, 0);
  for (size_t i = 0; i < n; ++i) {
    double sum = 0, slowest = 0, best = 0;
    for (size_t j = i + 1; j-- > 0;) {
      const double t = bits / hops[j].gbps;  // bits / (Gbit/s) = ns
      sum += t;
      // Over `lanes` parallel links the hop sends the m packets in ceil(m / lanes) turns.
      const uint64_t lanes = std::max<uint32_t>(1, hops[j].lanes);
      slowest = std::max(slowest, static_cast<double>((m + lanes - 1) / lanes - 1) * t);
      best = std::max(best, finish[j] + sum + slowest);
    }
    next[i] = best;
  }
  finish = std::move(next);
}

}  // namespace

double ideal_fct_ns(uint64_t bytes, uint32_t mtu, const PathHop* hops, size_t n) {
  if (n == 0) return 0;
  const auto bits = [](uint32_t frame) {
    return static_cast<double>(LinkEmulator::wire_bits(frame));
  };
  const uint64_t packets = std::max<uint64_t>(1, (bytes + mtu - 1) / mtu);
  const auto last = static_cast<uint32_t>(bytes - (packets - 1) * mtu);
  const uint64_t k = packets;
  // The first packet carries the RETH; the last may be short.
  const double first_bits = bits(roce_frame_bytes(k == 1 ? last : mtu, true));
  const double middle_bits = bits(roce_frame_bytes(mtu, false));
  const double last_bits = bits(roce_frame_bytes(last, false));
  double t = 0;
  if (k <= kExactPackets) {
    // Packet by packet, hop by hop: a hop sends the packets in the order they arrived (a short
    // last packet on another lane may overtake), each on the lane that is free first; the
    // message is whole when its last packet to arrive has crossed the last hop.
    std::vector<double> at(k, 0.0);
    std::vector<uint64_t> order(k);
    std::priority_queue<double, std::vector<double>, std::greater<>> lanes;
    for (size_t i = 0; i < n; ++i) {
      for (uint64_t p = 0; p < k; ++p) order[p] = p;
      std::stable_sort(order.begin(), order.end(),
                       [&](uint64_t a, uint64_t b) { return at[a] < at[b]; });
      lanes = {};
      const uint64_t count = std::min<uint64_t>(std::max<uint32_t>(1, hops[i].lanes), k);
      for (uint64_t l = 0; l < count; ++l) lanes.push(0.0);
      for (const uint64_t p : order) {
        const double b = p == 0 ? first_bits : p + 1 == k ? last_bits : middle_bits;
        const double done = std::max(at[p], lanes.top()) + b / hops[i].gbps;  // bits/(Gbit/s) = ns
        lanes.pop();
        lanes.push(done);
        at[p] = done;
      }
    }
    t = *std::max_element(at.begin(), at.end());
  } else {
    std::vector<double> finish(n, 0);
    add_packets(finish, hops, first_bits, 1);
    if (k > 2) add_packets(finish, hops, middle_bits, k - 2);
    if (k > 1) add_packets(finish, hops, last_bits, 1);
    t = finish.back();
  }
  const double ack_bits = bits(kAckFrameBytes);
  for (size_t i = 0; i < n; ++i) {
    // The cable's delay both ways, and the ACK's own serialisation on the way back.
    t += 2 * static_cast<double>(hops[i].delay_ns) + ack_bits / hops[i].gbps;
  }
  return t;
}

double ack_return_ns(const PathHop* hops, size_t n) {
  const auto ack = static_cast<double>(LinkEmulator::wire_bits(kAckFrameBytes));
  double t = 0;
  for (size_t i = 0; i < n; ++i) t += ack / hops[i].gbps + static_cast<double>(hops[i].delay_ns);
  return t;
}

std::string_view to_string(SlowdownBinning kind) {
  switch (kind) {
    case SlowdownBinning::kSingle:
      return "single";
    case SlowdownBinning::kDeciles:
      return "deciles";
    case SlowdownBinning::kVentiles:
      return "ventiles";
    case SlowdownBinning::kBdp:
      return "bdp";
    case SlowdownBinning::kList:
      return "list";
  }
  return "?";
}

SlowdownBinSpec parse_slowdown_bins(std::string_view text) {
  SlowdownBinSpec s;
  if (text == "deciles") {
    s.kind = SlowdownBinning::kDeciles;
  } else if (text == "ventiles") {
    s.kind = SlowdownBinning::kVentiles;
  } else if (text == "bdp") {
    s.kind = SlowdownBinning::kBdp;
  } else {
    const auto bad = [&] {
      return std::invalid_argument(std::string(kSlowdownBinNames) + ", got '" + std::string(text) +
                                   "'");
    };
    if (text.empty()) throw bad();
    s.kind = SlowdownBinning::kList;
    size_t at = 0;
    while (at <= text.size()) {
      const size_t comma = std::min(text.find(',', at), text.size());
      const std::string_view part = text.substr(at, comma - at);
      if (part.empty() || part.size() > 12 ||
          part.find_first_not_of("0123456789") != std::string_view::npos) {
        throw bad();
      }
      const uint64_t v = std::stoull(std::string(part));
      if (v == 0 || v > kMaxMessageBytes || (!s.edges.empty() && v <= s.edges.back())) throw bad();
      s.edges.push_back(v);
      at = comma + 1;
    }
  }
  return s;
}

CensoredValue censored_percentile(const std::vector<SlowdownSample>& sorted, double q) {
  if (sorted.empty()) return {};
  const auto k = static_cast<size_t>(std::ceil(q * static_cast<double>(sorted.size())));
  const size_t i = std::min(sorted.size() - 1, k == 0 ? 0 : k - 1);
  CensoredValue v{sorted[i].slowdown, false};
  for (size_t j = 0; j <= i && !v.censored; ++j) v.censored = sorted[j].censored != 0;
  return v;
}

namespace {

bool by_slowdown(const SlowdownSample& a, const SlowdownSample& b) {
  if (a.slowdown != b.slowdown) return a.slowdown < b.slowdown;
  if (a.censored != b.censored) return a.censored < b.censored;
  return a.bytes < b.bytes;
}

bool by_size(const SlowdownSample& a, const SlowdownSample& b) {
  if (a.bytes != b.bytes) return a.bytes < b.bytes;
  if (a.slowdown != b.slowdown) return a.slowdown < b.slowdown;
  return a.censored < b.censored;
}

}  // namespace

SlowdownBin bin_stats(std::vector<SlowdownSample> samples, uint64_t lo_bytes, uint64_t hi_bytes) {
  SlowdownBin b;
  b.lo_bytes = lo_bytes;
  b.hi_bytes = hi_bytes;
  b.count = samples.size();
  if (samples.empty()) return b;
  std::sort(samples.begin(), samples.end(), by_slowdown);
  double sum = 0;
  for (const SlowdownSample& s : samples) {
    sum += s.slowdown;
    b.unfinished += s.censored;
  }
  b.mean = {sum / static_cast<double>(samples.size()), b.unfinished > 0};
  b.p50 = censored_percentile(samples, 0.50);
  b.p95 = censored_percentile(samples, 0.95);
  b.p99 = censored_percentile(samples, 0.99);
  return b;
}

std::vector<std::vector<SlowdownSample>> split_bins(std::vector<SlowdownSample> samples,
                                                    SlowdownBinning kind,
                                                    const std::vector<uint64_t>& edges) {
  std::vector<std::vector<SlowdownSample>> bins;
  if (kind == SlowdownBinning::kVentiles) {
    std::sort(samples.begin(), samples.end(), by_size);
    const size_t n = samples.size();
    bins.resize(20);
    for (size_t k = 0; k < 20; ++k) {
      bins[k].assign(samples.begin() + static_cast<std::ptrdiff_t>(k * n / 20),
                     samples.begin() + static_cast<std::ptrdiff_t>((k + 1) * n / 20));
    }
    return bins;
  }
  if (edges.empty()) return bins;
  bins.resize(edges.size());
  for (const SlowdownSample& s : samples) bins[FlowSizeCdf::bin_of(edges, s.bytes)].push_back(s);
  return bins;
}

std::vector<SlowdownBin> bin_slowdowns(std::vector<SlowdownSample> samples, SlowdownBinning kind,
                                       const std::vector<uint64_t>& edges) {
  std::vector<SlowdownBin> out;
  auto bins = split_bins(std::move(samples), kind, edges);
  uint64_t prev_hi = 0;
  for (size_t i = 0; i < bins.size(); ++i) {
    uint64_t lo = 0, hi = 0;
    if (kind == SlowdownBinning::kVentiles) {
      // The chunk's own sizes (an empty chunk, of a run with fewer than 20 messages: the last).
      lo = bins[i].empty() ? prev_hi : bins[i].front().bytes;
      hi = bins[i].empty() ? prev_hi : bins[i].back().bytes;
    } else {
      lo = i == 0 ? 0 : edges[i - 1];
      hi = edges[i];
    }
    prev_hi = hi;
    out.push_back(bin_stats(std::move(bins[i]), lo, hi));
  }
  return out;
}

BootstrapCi bootstrap_ci(const std::vector<SlowdownSample>& bin, uint32_t resamples,
                         uint64_t seed) {
  BootstrapCi ci;
  if (bin.empty() || resamples == 0) return ci;
  std::mt19937_64 rng(seed);
  const size_t n = bin.size();
  std::vector<double> draw(n), means, p99s;
  means.reserve(resamples);
  p99s.reserve(resamples);
  const auto k99 = static_cast<size_t>(std::ceil(0.99 * static_cast<double>(n)));
  const size_t i99 = std::min(n - 1, k99 == 0 ? 0 : k99 - 1);
  for (uint32_t r = 0; r < resamples; ++r) {
    double sum = 0;
    for (size_t j = 0; j < n; ++j) {
      draw[j] = bin[rng() % n].slowdown;
      sum += draw[j];
    }
    means.push_back(sum / static_cast<double>(n));
    std::nth_element(draw.begin(), draw.begin() + static_cast<std::ptrdiff_t>(i99), draw.end());
    p99s.push_back(draw[i99]);
  }
  const auto pct = [](std::vector<double>& v, double q) {
    std::sort(v.begin(), v.end());
    const auto k = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())));
    return v[std::min(v.size() - 1, k == 0 ? 0 : k - 1)];
  };
  ci.mean_lo = pct(means, 0.025);
  ci.mean_hi = pct(means, 0.975);
  ci.p99_lo = pct(p99s, 0.025);
  ci.p99_hi = pct(p99s, 0.975);
  return ci;
}

double t95(size_t n) {
  // Two-sided 95% quantiles of Student's t, df = 1..30; above, the normal's.
  static constexpr double kT[] = {12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306,
                                  2.262,  2.228, 2.201, 2.179, 2.160, 2.145, 2.131, 2.120,
                                  2.110,  2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
                                  2.060,  2.056, 2.052, 2.048, 2.045, 2.042};
  if (n < 2) return 0;
  const size_t df = n - 1;
  return df <= 30 ? kT[df - 1] : 1.96;
}

}  // namespace spraynet::fabric
