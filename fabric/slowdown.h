// FCT slowdown as the papers compute it (docs/fabric_emu.md "FCT slowdown"): each message's FCT
// over its ideal FCT (the message alone on an idle fabric over its own path: fabric.h),
// binned by size, with messages unfinished at the end entered as censored (their FCT is at
// least the time they had) and percentiles that fall on or above a censored entry marked as
// lower bounds. Pure functions: fabric.cc feeds them, the report pools them over seeds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace spraynet::fabric {

// One link a message crosses: its rate and its cable's propagation delay.
struct PathHop {
  double gbps = 0;
  uint64_t delay_ns = 0;
  // Parallel links one QP's packets may share on this hop (spraying across planes or uplinks,
  // per-packet load balancing): they take turns on them.
  uint32_t lanes = 1;
};

// The FCT of `bytes` alone over `hops` (store and forward, in order), until its last packet is
// acknowledged: its packets through the hops as a pipeline (a packet leaves hop i when it has
// arrived whole and hop i has sent the one before: with equal rates, the whole message
// serialised once plus its largest packet, the first, again on every other hop; with a
// slower hop, the whole message at that hop's rate), every cable's delay, then the ACK back
// over the same hops (its own serialisation on each, every delay again). A hop of several lanes
// sends the packets in turns on them (packet p on lane p mod lanes). Exact packet by packet up
// to 65536 packets; above, a closed form that may overstate a hop of several lanes by a
// packet or two. Frames as the RC engine builds them (roce_frame_bytes,
// the RETH on the first, LinkEmulator::wire_bits).
double ideal_fct_ns(uint64_t bytes, uint32_t mtu, const PathHop* hops, size_t n);
inline double ideal_fct_ns(uint64_t bytes, uint32_t mtu, const std::vector<PathHop>& hops) {
  return ideal_fct_ns(bytes, mtu, hops.data(), hops.size());
}
// An ACK's way back over the hops: its serialisation on each and every cable's delay.
double ack_return_ns(const PathHop* hops, size_t n);

// One message of a run inside the statistics window (started at or after the warm-up): its
// size, FCT over ideal, and whether it was unfinished when the run ended (then `slowdown` is
// the time it had over its ideal FCT: a lower bound). 16 bytes: runs keep these until the
// summary pools them over seeds.
struct SlowdownSample {
  double slowdown = 0;
  uint32_t bytes = 0;
  uint32_t censored = 0;  // 1: unfinished at the end
};

// --slowdown-bins: how messages are binned by size.
//   deciles   the flow-size CDF's decile edges (cdf: the default);
//   ventiles  HPCC's analysis/fct_analysis.py: the messages sorted by size, then 20 chunks of
//             5% of them each by rank (chunk k: ranks floor(k n / 20) .. floor((k+1) n / 20) - 1);
//             a size can straddle two chunks;
//   bdp       ConWeave: two bins, (0, BDP] and above, BDP = host rate x the base RTT of the
//             longest path (bdp_bytes);
//   list      byte edges "E1,E2,..": bins (0, E1], (E1, E2], .., and (Elast, 2^31] when Elast is
//             below 2^31 (no message is larger);
//   single    not a flag value: the other workloads' default, one bin of every message.
enum class SlowdownBinning : uint8_t { kSingle, kDeciles, kVentiles, kBdp, kList };
struct SlowdownBinSpec {
  SlowdownBinning kind = SlowdownBinning::kSingle;
  std::vector<uint64_t> edges;  // kList: as given
};
inline constexpr const char* kSlowdownBinNames =
    "deciles | ventiles | bdp | a comma list of increasing byte edges (e.g. 10000,100000,1000000)";
// Throws std::invalid_argument naming the allowed values.
SlowdownBinSpec parse_slowdown_bins(std::string_view text);
std::string_view to_string(SlowdownBinning kind);
inline constexpr uint64_t kMaxMessageBytes = uint64_t{1} << 31;  // the largest message posted

// A percentile of a bin: its value and whether it is a lower bound (an entry at or below its
// rank is censored, so the true value may be higher).
struct CensoredValue {
  double value = 0;
  bool censored = false;
};

struct SlowdownBin {
  uint64_t lo_bytes = 0;  // edge bins: (lo, hi]; ventiles: the chunk's smallest and largest size
  uint64_t hi_bytes = 0;
  uint64_t count = 0;       // messages in the bin, finished or not
  uint64_t unfinished = 0;  // of which censored
  CensoredValue mean, p50, p95, p99;
  // Pooled bins (RunResult has none): 95% confidence intervals of mean and p99 (ci_method).
  double mean_ci_lo = 0, mean_ci_hi = 0, p99_ci_lo = 0, p99_ci_hi = 0;
};

// The nearest-rank percentile of `sorted` (ascending by slowdown, a censored entry after an
// equal finished one): the entry at rank ceil(q n) (1-based, at least 1); censored when any
// entry at or below that rank is censored. 0 for an empty bin.
CensoredValue censored_percentile(const std::vector<SlowdownSample>& sorted, double q);
// count, unfinished, mean and the percentiles of one bin's samples (sorted here).
SlowdownBin bin_stats(std::vector<SlowdownSample> samples, uint64_t lo_bytes, uint64_t hi_bytes);
// The bins of `samples`: by `edges` (increasing; a message above the last goes in the last bin),
// or, with ventiles, HPCC's 20 rank chunks (edges ignored).
std::vector<SlowdownBin> bin_slowdowns(std::vector<SlowdownSample> samples, SlowdownBinning kind,
                                       const std::vector<uint64_t>& edges);
// The same split, the samples of each bin (for the bootstrap).
std::vector<std::vector<SlowdownSample>> split_bins(std::vector<SlowdownSample> samples,
                                                    SlowdownBinning kind,
                                                    const std::vector<uint64_t>& edges);
// 95% bootstrap intervals of a bin's mean and p99: `resamples` draws of its flows with
// replacement from mt19937_64(seed), the 2.5th and 97.5th nearest-rank percentiles of each.
struct BootstrapCi {
  double mean_lo = 0, mean_hi = 0, p99_lo = 0, p99_hi = 0;
};
BootstrapCi bootstrap_ci(const std::vector<SlowdownSample>& bin, uint32_t resamples, uint64_t seed);
// Student's t interval half-width factor for 95% two-sided with `n` - 1 degrees of freedom
// (n >= 2).
double t95(size_t n);

}  // namespace spraynet::fabric
