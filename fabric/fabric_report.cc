#include "fabric/fabric_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string_view>

#include "dataplane/egress/link_emulator.h"
#include "fabric/cdf_plan.h"
#include "fabric/report_detail.h"

namespace spraynet::fabric {

using report_detail::modes_in_order;
using report_detail::spread;
using report_detail::Spread;
using report_detail::PooledSlowdown;
using report_detail::pool_slowdown;

namespace {

nlohmann::json spread_json(const Spread& s) {
  return {{"mean", s.mean}, {"stddev", s.stddev}, {"min", s.min}, {"max", s.max}, {"n", s.n}};
}

// The headline numbers the summary and the table carry, by name.
const std::vector<std::pair<const char*, double (*)(const RunResult&)>>& metrics() {
  static const std::vector<std::pair<const char*, double (*)(const RunResult&)>> m = {
      {"throughput_fraction", [](const RunResult& r) { return r.throughput_fraction; }},
      {"collective_bw_fraction", [](const RunResult& r) { return r.collective_bw_fraction; }},
      {"uplink_util_mean", [](const RunResult& r) { return r.uplink_util_mean; }},
      {"uplink_util_imbalance", [](const RunResult& r) { return r.uplink_util_imbalance; }},
      {"fct_p50_us", [](const RunResult& r) { return r.fct_p50_us; }},
      {"fct_p99_us", [](const RunResult& r) { return r.fct_p99_us; }},
      {"retx_rate", [](const RunResult& r) { return r.retx_rate; }},
      {"naks", [](const RunResult& r) { return static_cast<double>(r.naks); }},
      {"reorder_p99_depth", [](const RunResult& r) { return static_cast<double>(r.reorder_p99_depth); }},
      {"pfc_pause_frames", [](const RunResult& r) { return static_cast<double>(r.pfc_pause_frames); }},
      {"pfc_paused_us", [](const RunResult& r) { return r.pfc_paused_us; }},
      {"pfc_pool_peak_bytes", [](const RunResult& r) { return static_cast<double>(r.pfc_pool_peak_bytes); }},
      {"flowlets_started", [](const RunResult& r) { return static_cast<double>(r.flowlets_started); }},
      {"hops_per_s", [](const RunResult& r) { return r.hops_per_s; }},
  };
  return m;
}

nlohmann::json bin_json(const SlowdownBin& b) {
  return {{"lo_bytes", b.lo_bytes},
          {"hi_bytes", b.hi_bytes},
          {"count", b.count},
          {"unfinished", b.unfinished},
          {"mean", b.mean.value},
          {"p50", b.p50.value},
          {"p95", b.p95.value},
          {"p99", b.p99.value},
          {"mean_censored", b.mean.censored},
          {"p50_censored", b.p50.censored},
          {"p95_censored", b.p95.censored},
          {"p99_censored", b.p99.censored}};
}

nlohmann::json slowdown_json(const SlowdownReport& s) {
  nlohmann::json bins = nlohmann::json::array();
  for (const SlowdownBin& b : s.bins) bins.push_back(bin_json(b));
  // Every message of this run in one: what a scenario measures (slowdown.all.mean), as
  // summary.<mode>.slowdown.all pools it over the seeds.
  nlohmann::json all = bin_json(bin_stats(s.samples, 0, 0));
  all.erase("lo_bytes");
  all.erase("hi_bytes");
  return {{"binning", std::string(to_string(s.binning))},
          {"percentile", "nearest-rank"},
          {"warmup_ns", s.warmup_ns},
          {"end_ns", s.end_ns},
          {"messages", s.samples.size()},
          {"unfinished", s.unfinished},
          {"excluded_warmup", s.excluded_warmup},
          {"all", all},
          {"bins", bins}};
}

// pool_slowdown's (report_detail.h): bootstrap draws, and what counts as few messages.
constexpr uint32_t kBootstrapResamples = 200;
constexpr uint64_t kFewMessages = 100;

}  // namespace

namespace report_detail {

PooledSlowdown pool_slowdown(const std::vector<RunResult>& runs, const std::string& mode,
                             bool with_ci) {
  PooledSlowdown p;
  std::vector<SlowdownSample> samples;
  std::vector<uint64_t> edges;
  std::vector<const RunResult*> mine;
  for (const RunResult& r : runs) {
    if (r.mode != mode || r.slowdown.empty()) continue;
    if (!p.any) {
      p.binning = r.slowdown.binning;
      edges = r.slowdown.edges;
    }
    p.any = true;
    mine.push_back(&r);
    ++p.runs;
    p.unfinished += r.slowdown.unfinished;
    p.excluded_warmup += r.slowdown.excluded_warmup;
    samples.insert(samples.end(), r.slowdown.samples.begin(), r.slowdown.samples.end());
    // One bin of every message: as wide as the largest run's.
    if (!edges.empty() && !r.slowdown.edges.empty()) {
      edges.back() = std::max(edges.back(), r.slowdown.edges.back());
    }
  }
  if (!p.any) return p;
  p.messages = samples.size();
  p.all = bin_stats(samples, 0, 0);
  for (const SlowdownSample& m : samples)
    p.all.hi_bytes = std::max<uint64_t>(p.all.hi_bytes, m.bytes);
  auto split = split_bins(samples, p.binning, edges);
  p.bins = bin_slowdowns(std::move(samples), p.binning, edges);
  p.ci_method.assign(p.bins.size(), "");
  for (size_t i = 0; i < p.bins.size(); ++i) {
    SlowdownBin& b = p.bins[i];
    char what[160];
    // By size only: the other workloads' one bin of every message is no size study.
    if (b.count < kFewMessages && p.binning != SlowdownBinning::kSingle) {
      std::snprintf(
          what, sizeof what,
          "slowdown: %s bin %s%llu, %llu] has %llu messages over %llu runs (fewer than "
          "%llu: its p99 is near its maximum)",
          mode.c_str(), p.binning == SlowdownBinning::kVentiles ? "[" : "(",
          static_cast<unsigned long long>(b.lo_bytes), static_cast<unsigned long long>(b.hi_bytes),
          static_cast<unsigned long long>(b.count), static_cast<unsigned long long>(p.runs),
          static_cast<unsigned long long>(kFewMessages));
      p.warnings.emplace_back(what);
    }
    if (!with_ci || b.count == 0) continue;
    std::vector<double> means, p99s;
    for (const RunResult* r : mine) {
      if (i < r->slowdown.bins.size() && r->slowdown.bins[i].count > 0) {
        means.push_back(r->slowdown.bins[i].mean.value);
        p99s.push_back(r->slowdown.bins[i].p99.value);
      }
    }
    if (means.size() >= 3) {
      const auto ci = [](const std::vector<double>& v, double& lo, double& hi) {
        const Spread a = spread(v);
        // spread's stddev is the sample one (n - 1).
        const double half = t95(v.size()) * a.stddev / std::sqrt(static_cast<double>(v.size()));
        lo = a.mean - half;
        hi = a.mean + half;
      };
      ci(means, b.mean_ci_lo, b.mean_ci_hi);
      ci(p99s, b.p99_ci_lo, b.p99_ci_hi);
      p.ci_method[i] = "across-seeds-t";
    } else {
      const BootstrapCi ci = bootstrap_ci(split[i], kBootstrapResamples, 0x5EEDull + i);
      b.mean_ci_lo = ci.mean_lo;
      b.mean_ci_hi = ci.mean_hi;
      b.p99_ci_lo = ci.p99_lo;
      b.p99_ci_hi = ci.p99_hi;
      p.ci_method[i] = "bootstrap-flows";
    }
  }
  return p;
}

}  // namespace report_detail

nlohmann::json memory_json(const MemoryUsage& m, uint64_t pool_bytes) {
  const auto mb = [](uint64_t bytes) {
    return std::round(static_cast<double>(bytes) / double(1 << 20) * 10.0) / 10.0;
  };
  return {{"pools_mb", mb(pool_bytes)}, {"tcam_mb", mb(m.tcam)},
          {"routes_mb", mb(m.routes)},  {"queues_mb", mb(m.queues)},
          {"rc_mb", mb(m.rc)},          {"reorder_mb", mb(m.reorder)},
          {"other_mb", mb(m.other)},    {"total_mb", mb(pool_bytes + m.total())}};
}

nlohmann::json to_json(const RunResult& r) {
  nlohmann::json j;
  j["mode"] = r.mode;
  j["workload"] = r.workload;
  j["seed"] = r.seed;
  j["virtual_us"] = static_cast<double>(r.virtual_ns) / 1000.0;
  j["window_us"] = {static_cast<double>(r.window_start_ns) / 1000.0,
                    static_cast<double>(r.window_end_ns) / 1000.0};
  j["completed"] = r.completed;
  j["messages_completed"] = r.messages_completed;
  if (r.messages_expected != 0) j["messages_expected"] = r.messages_expected;
  j["messages_posted"] = r.messages_posted;
  j["cc"] = {{"mode", r.cc_mode},
             {"ecn_marked", r.ecn_marked},
             {"ce_received", r.ce_received},
             {"cnps_sent", r.cnps_sent},
             {"cnps_suppressed", r.cnps_suppressed},
             {"cnps_received", r.cnps_received},
             {"rate_cuts", r.rate_cuts},
             {"qps", r.cc_qps},
             {"qps_at_min_rate", r.qps_at_min_rate},
             {"qps_limited_at_end", r.qps_limited_at_end},
             {"mean_rate_fraction", r.mean_rate_fraction}};
  if (!r.cc_figure_sums.empty()) {
    // Only for the ACK-clocked controls: DCQCN's runs keep their JSON as it was.
    nlohmann::json mean = nlohmann::json::object(), total = nlohmann::json::object();
    for (const auto& [name, sum] : r.cc_figure_sums) {
      total[name] = sum;
      mean[name] = r.cc_figure_qps > 0 ? sum / static_cast<double>(r.cc_figure_qps) : 0.0;
    }
    j["cc"][r.cc_mode] = {{"qps", r.cc_figure_qps}, {"mean_per_qp", mean}, {"total", total}};
  }
  if (r.cc_mode == "hpcc") {
    // The telemetry HPCC runs on, end to end: inserted by the sending NICs, a record pushed at
    // every switch egress, stripped by the receiving NICs, echoed in ACKs, read by the senders.
    j["cc"]["int"] = {{"inserted", r.int_inserted},
                      {"records_pushed", r.int_switch.pushed},
                      {"hops_exceeded", r.int_switch.hops_exceeded},
                      {"mtu_exceeded", r.int_switch.mtu_exceeded},
                      {"stripped", r.int_stripped},
                      {"echoed", r.int_echoed},
                      {"acks_received", r.int_acks_received},
                      {"no_room", r.int_no_room},
                      {"malformed_drops", r.int_malformed}};
  }
  j["flow_fairness"] = {{"flows", r.fairness.flows},
                        {"jain", r.fairness.jain},
                        {"min_gbps", r.fairness.min_gbps},
                        {"max_gbps", r.fairness.max_gbps},
                        {"mean_gbps", r.fairness.mean_gbps}};
  j["queue_bytes"] = {{"port", r.queue.port},        {"mean", r.queue.mean},
                      {"p50", r.queue.p50},          {"p99", r.queue.p99},
                      {"max", r.queue.max},          {"samples", r.queue.samples},
                      {"interval_us", static_cast<double>(r.queue.interval_ns) / 1000.0},
                      {"kmin", r.queue.kmin},        {"kmax", r.queue.kmax}};
  if (!r.cc_timeline_t_us.empty()) {
    nlohmann::json rates = nlohmann::json::object();
    for (const auto& [name, v] : r.cc_timeline_rates) rates[name] = v;
    j["cc_timeline"] = {{"t_us", r.cc_timeline_t_us},
                        {"queue_bytes", r.cc_timeline_queue},
                        {"qp_rate_gbps", rates}};
  }
  j["lossless_drops"] = {{"queue_full", r.lossless_drops_queue_full},
                         {"headroom_overflow", r.lossless_drops_headroom}};
  j["warnings"] = r.warnings;
  j["ok"] = r.warnings.empty();
  j["throughput_fraction"] = r.throughput_fraction;
  j["collective_bw_fraction"] = r.collective_bw_fraction;
  if (r.workload == "incast") j["receiver_goodput_fraction"] = r.receiver_goodput_fraction;
  if (r.workload == "cdf") {
    j["carried_load"] = r.carried_load;
    j["carried_window_us"] = {static_cast<double>(r.carried_window_ns.first) / 1000.0,
                              static_cast<double>(r.carried_window_ns.second) / 1000.0};
  }
  if (r.workload == "allreduce") {
    j["algbw_gbps"] = r.algbw_gbps;
    j["busbw_gbps"] = r.busbw_gbps;
  }
  j["uplink_util"] = {{"mean", r.uplink_util_mean},
                      {"max", r.uplink_util_max},
                      {"imbalance", r.uplink_util_imbalance}};
  nlohmann::json per_link = nlohmann::json::object();
  for (size_t i = 0; i < r.uplink_util.size(); ++i) per_link[r.uplink_names[i]] = r.uplink_util[i];
  j["uplink_util_by_link"] = per_link;
  j["downlink_util"] = {{"mean", r.downlink_util_mean},
                        {"max", r.downlink_util_max},
                        {"imbalance", r.downlink_util_imbalance}};
  j["host_uplink_util"] = {{"mean", r.host_uplink_util_mean},
                           {"max", r.host_uplink_util_max},
                           {"imbalance", r.host_uplink_util_imbalance}};
  j["idle_links"] = r.idle_links;
  j["fabric_links"] = r.fabric_links;
  if (!r.tiers.empty()) {
    // By tier name, so that a scenario's metric can name one (tiers.spine-super.idle_links).
    nlohmann::json tiers = nlohmann::json::object();
    for (const RunResult::TierUtil& t : r.tiers) {
      nlohmann::json by_link = nlohmann::json::object();
      for (const auto& [name, u] : t.up_by_link) by_link[name] = u;
      tiers[t.name] = {
          {"uplink_util", {{"mean", t.up_mean}, {"max", t.up_max}, {"imbalance", t.up_imbalance}}},
          {"downlink_util",
           {{"mean", t.down_mean}, {"max", t.down_max}, {"imbalance", t.down_imbalance}}},
          {"idle_links", t.idle_links},
          {"links", t.links},
          {"uplink_util_by_link", by_link}};
    }
    j["tiers"] = tiers;
  }
  nlohmann::json goodput = nlohmann::json::array();
  for (const auto& [t, g] : r.goodput_timeline) goodput.push_back({t, g});
  j["goodput_timeline"] = goodput;
  if (r.failover) {
    j["failover"] = {{"event_us", r.failover->event_us},
                     {"before", r.failover->before},
                     {"min_after", r.failover->min_after},
                     {"after", r.failover->after},
                     {"recovery_us", r.failover->recovery_us}};
  }
  j["fct_us"] = {{"p50", r.fct_p50_us}, {"p99", r.fct_p99_us}, {"max", r.fct_max_us}};
  j["fct_samples_us"] = r.fct_samples_us;
  if (!r.slowdown.empty()) j["slowdown"] = slowdown_json(r.slowdown);
  j["packets_sent"] = r.packets_sent;
  j["packets_retransmitted"] = r.packets_retransmitted;
  j["retx_rate"] = r.retx_rate;
  j["naks"] = r.naks;
  j["retransmit_timeouts"] = r.timeouts;
  j["retransmitted_acked"] = r.retransmitted_acked;
  j["qp_errors"] = r.qp_errors;
  j["qps_never_acked"] = r.qps_never_acked;
  j["receive"] = r.receive;
  // What the network lost and what recovering it cost: IRN's figure, for every transport alike.
  j["network_drops"] = network_drops(r);
  j["retransmitted_per_drop"] = retransmitted_per_drop(r);
  if (r.irn) {
    j["irn"] = {{"bdp_packets", r.irn_bdp_packets},
                {"sack_naks", r.irn_sack_naks},
                {"sacked_packets", r.irn_sacked_packets},
                {"resends_skipped", r.irn_resends_skipped},
                {"rto_low_timeouts", r.irn_rto_low_timeouts}};
  }
  j["placement"] = {{"placed_out_of_order", r.placed_out_of_order},
                    {"holes_naked", r.holes_naked},
                    {"window_overflows", r.window_overflows},
                    {"duplicates", r.placement_duplicates},
                    {"selective_retransmissions", r.selective_retransmissions}};
  nlohmann::json hist = nlohmann::json::array();
  for (const auto& [d, n] : r.reorder_depth_histogram) hist.push_back({d, n});
  j["reorder"] = {{"max_depth", r.reorder_max_depth},
                  {"p99_depth", r.reorder_p99_depth},
                  {"timeouts", r.reorder_timeouts},
                  {"held", r.reorder_held},
                  {"resyncs", r.reorder_resyncs},
                  {"depth_histogram", hist}};
  nlohmann::json timeline = nlohmann::json::array();
  for (const auto& [t, n] : r.pfc_timeline) timeline.push_back({t, n});
  j["pfc"] = {{"pause_frames", r.pfc_pause_frames},
              {"watchdog_storms", r.pfc_watchdog_storms},
              {"watchdog_frames_suppressed", r.pfc_watchdog_frames_suppressed},
              {"paused_us", r.pfc_paused_us},
              {"longest_pause_us", r.pfc_longest_pause_us},
              {"pool_bytes", r.pfc_pool_bytes},
              {"pool_peak_bytes", r.pfc_pool_peak_bytes},
              {"headroom_peak_bytes", r.pfc_headroom_peak_bytes},
              {"headroom_peak_fraction", r.pfc_headroom_peak_fraction},
              {"pause_intervals", r.pfc_pause_intervals},
              {"mean_pause_us", r.pfc_mean_pause_us},
              {"ports_paused", r.pfc_ports_paused},
              {"nic_uplinks_paused", r.pfc_nic_uplinks_paused},
              {"nic_paused_us", r.pfc_nic_paused_us},
              {"leaves_paused", r.pfc_leaves_paused},
              {"spines_paused", r.pfc_spines_paused},
              {"switches_pausing", r.pfc_switches_pausing},
              {"first_pause_us", r.pfc_first_pause_us},
              {"last_pause_end_us", r.pfc_last_pause_end_us},
              {"storm_us", r.pfc_storm_us},
              {"timeline", timeline}};
  j["ppcid"] = r.ppcid;
  j["ppcid_mismatch_hosts"] = r.ppcid_mismatch_hosts;
  j["nic_log"] = r.nic_log;
  j["nic_log_lines"] = r.nic_log.size();
  j["nic_rx"] = r.nic_rx;
  j["drops"] = r.drops;
  j["tcam_fallback_qps"] = r.tcam_fallback_qps;
  j["flowlets_started"] = r.flowlets_started;
  if (!r.conga.empty()) j["conga"] = r.conga;  // mode conga only
  if (!r.reps.empty()) j["reps"] = r.reps;     // mode reps only
  if (!r.conweave.empty()) j["conweave"] = r.conweave;  // mode conweave only
  j["control_publications"] = r.control_publications;
  j["dead_link_frames"] = r.dead_link_frames;
  j["dead_link_frames_after_1ms"] = r.dead_link_tx_after_1ms;
  j["packet_hops"] = r.packet_hops;
  j["node_events"] = r.node_events;
  if (!r.buckets.is_null()) j["buckets"] = r.buckets;
  if (!r.nic_split.is_null()) j["nic_split"] = r.nic_split;
  j["memory"] = memory_json(r.memory, r.pool_bytes);
  j["mbufs_in_use_at_end"] = r.mbufs_in_use_at_end;
  j["mempool_whole"] = r.mbufs_in_use_at_end == 0;
  return j;
}

std::vector<std::string> run_warnings(const RunResult& r, const FabricConfig& config) {
  std::vector<std::string> w;
  char line[256];
  if (!r.completed) {
    std::snprintf(line, sizeof line,
                  "unfinished: %llu of %llu messages completed when the run stopped at its "
                  "time limit, %.0f us (%s)",
                  static_cast<unsigned long long>(r.messages_completed),
                  static_cast<unsigned long long>(r.messages_expected),
                  static_cast<double>(r.virtual_ns) / 1000.0,
                  config.workload == Workload::kCdf ? "5 x --duration + 1 ms" : "--duration");
    w.emplace_back(line);
  }
  const uint64_t lossy = r.lossless_drops_queue_full + r.lossless_drops_headroom;
  if (lossy > 0) {
    std::snprintf(line, sizeof line,
                  "lossy: %llu packets dropped on a lossless (PFC) class (queue_full %llu, "
                  "headroom_overflow %llu)",
                  static_cast<unsigned long long>(lossy),
                  static_cast<unsigned long long>(r.lossless_drops_queue_full),
                  static_cast<unsigned long long>(r.lossless_drops_headroom));
    w.emplace_back(line);
  }
  return w;
}

uint64_t network_drops(const RunResult& r) {
  uint64_t dropped = 0;
  for (const auto& [cause, n] : r.drops) {
    if (cause != "responder_out_of_order") dropped += n;
  }
  return dropped;
}

double retransmitted_per_drop(const RunResult& r) {
  const uint64_t dropped = network_drops(r);
  return dropped == 0 ? 0.0
                      : static_cast<double>(r.packets_retransmitted) / static_cast<double>(dropped);
}

uint32_t roce_frame_bytes(uint32_t payload, bool reth) {
  return 14 + 20 + 8 + 12 + (reth ? 16 : 0) + ((payload + 3) & ~3u) + 4;
}

double payload_share(uint32_t mtu) {
  // A full RoCE WRITE MIDDLE frame on the wire with its FCS, preamble and gap: the most of the
  // line rate that is payload.
  return static_cast<double>(mtu) * 8.0 /
         static_cast<double>(LinkEmulator::wire_bits(roce_frame_bytes(mtu, false)));
}

std::optional<double> ideal_ceiling(const FabricConfig& c) {
  const double share = payload_share(c.mtu);
  const double up = static_cast<double>(c.spines) * c.links_per_spine;  // a leaf's uplinks, per plane
  const double H = c.hosts_per_leaf;
  switch (c.workload) {
    case Workload::kPermutation:
      // Every host sends to a host under another leaf: a leaf's uplinks carry all its hosts'
      // traffic (with one leaf, nothing crosses a spine).
      if (c.tiers == 3) {
        // At most every leaf's traffic crosses pods: the spines' up links carry it all too.
        const double leaf_up = up * c.leaf_spine_rate() / c.link_gbps;
        const double spine_up =
            c.pods > 1
                ? static_cast<double>(c.super_spines) * c.links_per_super * c.spine_super_rate() /
                      (static_cast<double>(c.leaves) * c.links_per_spine * c.leaf_spine_rate())
                : 1.0;
        return share *
               (c.total_leaves() > 1 ? std::min({1.0, leaf_up / H, leaf_up / H * spine_up}) : 1.0);
      }
      return share *
             (c.leaves > 1 ? std::min(1.0, up * c.leaf_spine_rate() / c.link_gbps / H) : 1.0);
    case Workload::kAlltoall: {
      if (c.hosts() < 2) return std::nullopt;
      const double cross =
          c.total_leaves() > 1 ? (c.total_leaves() - 1) * H / (c.hosts() - 1.0) : 0.0;
      return share * (cross > 0 ? std::min(1.0, up / (H * cross)) : 1.0);
    }
    case Workload::kIncast:
      // The one receiver's link, shared by the senders (throughput_fraction is per sender).
      return c.incast_senders > 0 ? share / c.incast_senders : share;
    default:
      return std::nullopt;  // allreduce (rank placement per seed), cdf (offered load)
  }
}

std::string format_header(const FabricConfig& c, const FlowSizeCdf* cdf) {
  std::string out;
  char line[512];
  if (c.tiers == 3) {
    std::snprintf(
        line, sizeof line,
        "fabric_emu: 3 tiers, %u pods x (%u leaves x %u spines) x %u super-spines per "
        "plane, %u hosts per leaf%s (%u hosts), %u link%s per spine, %u per super-spine, "
        "%g/%g/%g Gbit/s (host/leaf-spine/spine-super), MTU %u, workload %s, seeds %llu-%llu\n",
        c.pods, c.leaves, c.spines, c.super_spines, c.hosts_per_leaf,
        c.planes > 1 ? (" x " + std::to_string(c.planes) + " planes").c_str() : "", c.hosts(),
        c.links_per_spine, c.links_per_spine == 1 ? "" : "s", c.links_per_super, c.link_gbps,
        c.leaf_spine_rate(), c.spine_super_rate(), c.mtu,
        std::string(to_string(c.workload)).c_str(), static_cast<unsigned long long>(c.seed_first),
        static_cast<unsigned long long>(c.seed_last));
    out += line;
    const uint32_t up = c.spines * c.links_per_spine;
    const uint32_t sup = c.super_spines * c.links_per_super;
    std::snprintf(
        line, sizeof line,
        "  oversubscription: leaf %u:%u (host ports : uplinks) = %.2f, spine %u:%u "
        "(leaf ports : super-spine ports) = %.2f in bandwidth; PFC %s; congestion "
        "control %s; events: ",
        c.hosts_per_leaf, up,
        up > 0 ? c.hosts_per_leaf * c.link_gbps / (up * c.leaf_spine_rate()) : 0.0,
        c.leaves * c.links_per_spine, sup,
        sup > 0 ? c.leaves * c.links_per_spine * c.leaf_spine_rate() / (sup * c.spine_super_rate())
                : 0.0,
        c.pfc ? "on" : "off",
        c.cc.enabled() ? std::string(control::to_string(c.cc.mode)).c_str() : "none");
    out += line;
  } else {
    std::snprintf(line, sizeof line,
                  "fabric_emu: %u leaves x %u spines x %u hosts per leaf%s, %u link%s per spine, "
                  "%g Gbit/s, MTU %u, workload %s, seeds %llu-%llu\n",
                  c.leaves, c.spines, c.hosts_per_leaf,
                  c.planes > 1 ? (" x " + std::to_string(c.planes) + " planes").c_str() : "",
                  c.links_per_spine, c.links_per_spine == 1 ? "" : "s", c.link_gbps, c.mtu,
                  std::string(to_string(c.workload)).c_str(),
                  static_cast<unsigned long long>(c.seed_first),
                  static_cast<unsigned long long>(c.seed_last));
    out += line;
    const uint32_t up = c.spines * c.links_per_spine;
    std::snprintf(line, sizeof line,
                  "  oversubscription: leaf %u:%u (host ports : uplinks) = %.2f, spine 1:1 (every "
                  "port faces a leaf); PFC %s; congestion control %s; events: ",
                  c.hosts_per_leaf, up,
                  up > 0 ? c.hosts_per_leaf * c.link_gbps / (up * c.leaf_spine_rate()) : 0.0,
                  c.pfc ? "on" : "off",
                  !c.cc.enabled() ? "none"
                  : c.cc.marks_ecn()
                      ? (std::string(control::to_string(c.cc.mode)) + " (ECN " +
                         (c.ecn_kmin_bytes != 0 ? "kmin/kmax given" : c.effective_ecn_preset()) +
                         ", marked at " + c.ecn_mark_at + ")")
                            .c_str()
                      : (std::string(control::to_string(c.cc.mode)) +
                         (c.cc.mode == control::CcMode::kHpcc
                              ? " (no ECN: INT records from every switch, echoed in ACKs)"
                              : " (no ECN: RTT from ACKs)"))
                            .c_str());
    out += line;
  }
  // Both: the events, then the ideal ceiling.
  if (c.events.empty()) out += "none";
  for (size_t i = 0; i < c.events.size(); ++i) out += (i ? ", " : "") + c.events[i].text;
  out += "\n";
  if (c.transport == "irn") {
    std::snprintf(line, sizeof line,
                  "  transport irn: lossy RoCE (PFC off on the data class), NAKs with a SACK, "
                  "selective repeat, BDP cap %u packets, RTO_low %g us (<= %u in flight) / "
                  "RTO_high %g us\n",
                  c.irn_bdp(), static_cast<double>(c.irn_rto_low_ns) / 1000.0,
                  c.irn_rto_low_packets, static_cast<double>(c.irn_rto_high_ns) / 1000.0);
    out += line;
  }
  out += cdf_header_lines(c, cdf);
  if (const auto ceiling = ideal_ceiling(c)) {
    std::snprintf(line, sizeof line,
                  "  ideal ceiling: %.3f of the line rate (capacity over offered load, at most 1, "
                  "x the payload share %.3f)\n",
                  *ceiling, payload_share(c.mtu));
    out += line;
  }
  const bool sprays = std::any_of(c.modes.begin(), c.modes.end(), is_spray);
  if (c.tiers == 3 && sprays) {
    // How the path id is split between the tiers, and when it cannot name every pair of
    // choices, that it falls short and what happens then.
    const SpraySplit sp = spray_split(c);
    std::snprintf(line, sizeof line,
                  "  spray: %u path ids; the leaf takes id %% %u (its uplinks), the spine id / %u "
                  "(of its %u links up)",
                  sp.paths, sp.leaf_choices, sp.leaf_choices, sp.spine_choices);
    out += line;
    if (sp.paths >= sp.leaf_choices * sp.spine_choices) {
      out += ": every pair of choices\n";
    } else {
      std::snprintf(line, sizeof line,
                    "; %u x %u pairs do not fit %u ids (%s), so one QP reaches %u of a spine's "
                    "%u links up (its flow hash spreads the QPs over them all)%s\n",
                    sp.leaf_choices, sp.spine_choices, sp.paths,
                    c.fabric_paths != 0 ? "--fabric-paths" : c.effective_ppcid_layout().c_str(),
                    sp.spine_digits, sp.spine_choices,
                    c.effective_ppcid_layout() == "ts-high" && c.fabric_paths == 0
                        ? "; path-high holds 256"
                        : "");
      out += line;
    }
  }
  return out;
}

SpraySplit spray_split(const FabricConfig& c) {
  SpraySplit sp;
  sp.leaf_choices = c.leaf_uplinks();
  sp.spine_choices = c.spine_uplinks();
  const uint32_t layout_ids = c.effective_ppcid_layout() == "ts-high" ? 16 : 256;
  sp.paths = c.fabric_paths != 0 ? c.fabric_paths : c.auto_fabric_paths(layout_ids);
  // Distinct values of id / leaf_choices over ids 0..paths-1 (each one spine link per QP).
  sp.spine_digits = std::min(sp.spine_choices, (sp.paths + sp.leaf_choices - 1) / sp.leaf_choices);
  return sp;
}

nlohmann::json summary_json(const std::vector<RunResult>& runs) {
  nlohmann::json out = nlohmann::json::object();
  for (const std::string& mode : modes_in_order(runs)) {
    nlohmann::json m = nlohmann::json::object();
    for (const auto& [name, get] : metrics()) {
      const bool fct = std::string_view(name).starts_with("fct_");
      std::vector<double> v;
      for (const RunResult& r : runs) {
        // FCTs of runs that completed no message do not exist; they are left out, not 0.
        if (r.mode == mode && (!fct || r.messages_completed > 0)) v.push_back(get(r));
      }
      m[name] = spread_json(spread(v));
    }
    if (const PooledSlowdown sd = pool_slowdown(runs, mode, true); sd.any) {
      nlohmann::json bins = nlohmann::json::array();
      for (size_t i = 0; i < sd.bins.size(); ++i) {
        nlohmann::json b = bin_json(sd.bins[i]);
        if (!sd.ci_method[i].empty()) {
          b["mean_ci95"] = {sd.bins[i].mean_ci_lo, sd.bins[i].mean_ci_hi};
          b["p99_ci95"] = {sd.bins[i].p99_ci_lo, sd.bins[i].p99_ci_hi};
          b["ci_method"] = sd.ci_method[i];
        }
        bins.push_back(b);
      }
      nlohmann::json all = bin_json(sd.all);
      all.erase("lo_bytes");
      all.erase("hi_bytes");
      m["slowdown"] = {{"binning", std::string(to_string(sd.binning))},
                       {"percentile", "nearest-rank"},
                       {"runs", sd.runs},
                       {"messages", sd.messages},
                       {"unfinished", sd.unfinished},
                       {"excluded_warmup", sd.excluded_warmup},
                       {"bootstrap_resamples", kBootstrapResamples},
                       {"all", all},
                       {"bins", bins},
                       {"warnings", sd.warnings}};
    }
    // cdf only: other workloads' summaries stay as they were.
    std::vector<double> carried;
    for (const RunResult& r : runs) {
      if (r.mode == mode && r.workload == "cdf") carried.push_back(r.carried_load);
    }
    if (!carried.empty()) m["carried_load"] = spread_json(spread(carried));
    out[mode] = m;
  }
  return out;
}

nlohmann::json config_json(const FabricConfig& c) {
  std::string modes;
  for (FabricMode m : c.modes) modes += (modes.empty() ? "" : ",") + std::string(to_string(m));
  nlohmann::json events = nlohmann::json::array();
  for (const FabricEvent& e : c.events) events.push_back(e.text);
  nlohmann::json layout_hosts = nlohmann::json::array();
  for (const auto& [host, layout] : c.ppcid_layout_hosts)
    layout_hosts.push_back(host + "=" + layout);
  nlohmann::json cc = {{"mode", std::string(control::to_string(c.cc.mode))}};
  if (c.cc.marks_ecn()) {  // DCQCN's and DCTCP's marking; TIMELY has none
    cc["ecn_preset"] = c.effective_ecn_preset();
    cc["ecn_kmin"] = c.ecn_kmin_bytes;
    cc["ecn_kmax"] = c.ecn_kmax_bytes;
    cc["ecn_pmax"] = c.effective_ecn_pmax();
    cc["ecn_mark_at"] = c.ecn_mark_at;
  }
  if (c.cc.enabled()) cc["ack_class"] = c.cc.ack_class == control::AckClass::kHigh ? "high" : "data";
  if (c.cc.dcqcn_mode()) {
    // DCTCP and TIMELY send no CNPs; their parameters are the classes' ns-3 defaults.
    cc["min_time_between_cnps_us"] = static_cast<double>(c.cc.cnp_interval_ns()) / 1000.0;
    cc["cnp_dscp"] = c.cc.cnp_dscp;
    // Every reaction-point parameter in force (the preset with the overrides), ConnectX's units.
    const DcqcnConfig d = c.cc.dcqcn(c.link_gbps);
    nlohmann::json rp;
    for (const control::DcqcnParameter& p : control::dcqcn_parameters()) rp[p.name] = p.get(d);
    cc["rp"] = rp;
  }
  nlohmann::json j = {
      {"cc", cc},
      {"leaves", c.leaves},
      {"spines", c.spines},
      {"hosts_per_leaf", c.hosts_per_leaf},
      {"links_per_spine", c.links_per_spine},
      {"planes", c.planes},
      {"link_gbps", c.link_gbps},
      {"delay_ns", c.delay_ns},
      {"cable_spread_ns", c.cable_spread_ns},
      {"mtu", c.mtu},
      {"queue_bytes", c.queue_bytes},
      {"pfc", c.pfc},
      {"pfc_pool_bytes", c.pfc_pool_bytes},
      {"pfc_alpha", c.pfc_alpha},
      {"pfc_static_threshold_bytes", c.pfc_static_threshold_bytes},
      {"pfc_headroom_bytes", c.pfc_headroom_bytes},
      {"pfc_xoff_offset_bytes", c.pfc_xoff_offset_bytes},
      {"pfc_xon_offset_bytes", c.pfc_xon_offset_bytes},
      {"fast_feedback", c.fast_feedback},
      {"pfc_watchdog", c.pfc_watchdog},
      {"pfc_watchdog_action", c.pfc_watchdog_action},
      {"workload", std::string(to_string(c.workload))},
      {"qps_per_host", c.qps_per_host},
      {"msg_bytes", c.msg_bytes},
      {"bytes", c.bytes},
      {"channels", c.channels},
      {"incast_senders", c.incast_senders},
      {"cdf", c.cdf},
      {"load", c.load},
      {"op", c.op},
      {"mode", modes},
      {"spray_policy", c.spray_policy},
      {"hash_seed", c.same_hash_seed ? "same" : "per-switch"},
      {"udp_sport", c.udp_sport_fixed ? "fixed" : "per-qp"},
      {"ppcid_layout", c.ppcid_layout},
      {"ppcid_layout_host", layout_hosts},
      {"fabric_paths",
       c.fabric_paths == 0 ? nlohmann::json("auto") : nlohmann::json(c.fabric_paths)},
      {"nic_restore_checksum", c.nic_restore_checksum},
      {"receive", c.receive},
      {"transport", c.transport},
      {"irn_rto_low_us", static_cast<double>(c.irn_rto_low_ns) / 1000.0},
      {"irn_rto_high_us", static_cast<double>(c.irn_rto_high_ns) / 1000.0},
      {"irn_rto_low_packets", c.irn_rto_low_packets},
      {"irn_bdp_packets", c.transport == "irn" ? nlohmann::json(c.irn_bdp())
                                               : nlohmann::json(c.irn_bdp_packets)},
      {"irn_reorder_wait_us", static_cast<double>(c.irn_reorder_wait_ns) / 1000.0},
      {"payload", c.payload},
      {"control_period_us", static_cast<double>(c.control_period_ns) / 1000.0},
      {"nic_control_period_us", static_cast<double>(c.nic_control_period_ns) / 1000.0},
      {"reorder_hold_us", static_cast<double>(c.reorder_hold_ns) / 1000.0},
      {"reorder_window", c.reorder_window},
      {"tcam_spray_rules", c.tcam_spray_rules},
      {"tcam_capacity", c.tcam_capacity},
      {"tcam_roce_partition", c.tcam_roce_partition},
      {"events", events},
      {"duration_us", static_cast<double>(c.duration_ns) / 1000.0},
      {"warmup_us", static_cast<double>(c.warmup()) / 1000.0},
      {"seeds", std::to_string(c.seed_first) + "-" + std::to_string(c.seed_last)}};
  if (!c.slowdown_bins.empty()) j["slowdown_bins"] = c.slowdown_bins;  // only when given
  if (c.spray_rules != "per-qp") j["spray_rules"] = c.spray_rules;  // only when not the default
  if (std::find(c.modes.begin(), c.modes.end(), FabricMode::kLetflow) != c.modes.end()) {
    j["letflow_timeout_us"] = static_cast<double>(c.letflow_timeout_ns) / 1000.0;
  }
  if (std::find(c.modes.begin(), c.modes.end(), FabricMode::kConga) != c.modes.end()) {
    j["conga"] = {{"flowlet_timeout_us", static_cast<double>(c.conga_flowlet_ns) / 1000.0},
                  {"t_dre_us", static_cast<double>(c.conga_dre_ns) / 1000.0},
                  {"alpha", c.conga_alpha},
                  {"quantisation_bits", c.conga_bits},
                  {"aging_us", static_cast<double>(c.conga_aging_ns) / 1000.0}};
  }
  if (std::find(c.modes.begin(), c.modes.end(), FabricMode::kConweave) != c.modes.end()) {
    const auto us = [](uint64_t ns) { return static_cast<double>(ns) / 1000.0; };
    j["conweave"] = {{"reply_extra_us", us(c.conweave.reply_extra_ns)},
                     {"path_pause_us", us(c.conweave.path_pause_ns)},
                     {"tx_expiry_us", us(c.conweave.tx_expiry_ns)},
                     {"voq_flush_extra_us", us(c.conweave.voq_flush_extra_ns)},
                     {"voq_default_wait_us", us(c.conweave.voq_default_wait_ns)},
                     {"base_rtt_us", us(4 * c.delay_ns)}};
  }
  if (std::any_of(c.modes.begin(), c.modes.end(), is_entropy_spray)) {
    j["entropy_values"] = c.entropy_values;
  }
  if (c.tiers == 3) {
    // Only three-tier configs say so: a two-tier report stays as it always was.
    j["tiers"] = c.tiers;
    j["pods"] = c.pods;
    j["super_spines"] = c.super_spines;
    j["links_per_super"] = c.links_per_super;
    j["spine_super_gbps"] = c.spine_super_rate();
    const SpraySplit sp = spray_split(c);
    j["spray_split"] = {{"paths", sp.paths},
                        {"leaf_choices", sp.leaf_choices},
                        {"spine_choices", sp.spine_choices},
                        {"spine_digits", sp.spine_digits},
                        {"fits", sp.paths >= sp.leaf_choices * sp.spine_choices}};
  }
  if (c.workload == Workload::kCdf) {
    // The per-host load the arrivals were drawn at (network_load converted when given), and the
    // inter-leaf offered load against the leaf uplinks' capacity; which of the two was given.
    j["load"] = c.host_load();
    j["network_load"] = c.inter_leaf_share() > 0 ? c.offered_network_load() : 0.0;
    j["load_given"] = c.network_load > 0 ? "network_load" : "load";
  }
  if (c.leaf_spine_gbps > 0) j["leaf_spine_gbps"] = c.leaf_spine_gbps;
  if (!c.oversubscription.empty()) {
    // Only when given: a report without it stays as it was. The rates it set, beside it.
    j["oversubscription"] = format_oversubscription(c.oversubscription);
    j["leaf_spine_gbps"] = c.leaf_spine_rate();
    if (c.tiers == 3) j["spine_super_gbps"] = c.spine_super_rate();
  }
  return j;
}

}  // namespace spraynet::fabric
