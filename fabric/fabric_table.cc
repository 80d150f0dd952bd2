// The table fabric_emu prints: one row per mode over its seeds, the legend, the load lines.
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

using report_detail::censored_text;
using report_detail::gather_mode;
using report_detail::ModeFigures;
using report_detail::modes_in_order;
using report_detail::pool_slowdown;
using report_detail::PooledSlowdown;
using report_detail::spread;
using report_detail::Spread;

namespace {}  // namespace

namespace report_detail {

ModeFigures gather_mode(const std::vector<RunResult>& runs, const std::string& mode) {
  ModeFigures f;
  for (const RunResult& r : runs) {
    if (r.mode != mode) continue;
    f.tp.push_back(r.throughput_fraction);
    f.cb.push_back(r.collective_bw_fraction);
    f.hum.push_back(r.host_uplink_util_mean);
    f.hui.push_back(r.host_uplink_util_imbalance);
    f.um.push_back(r.uplink_util_mean);
    f.ui.push_back(r.uplink_util_imbalance);
    f.dm.push_back(r.downlink_util_mean);
    f.di.push_back(r.downlink_util_imbalance);
    if (r.messages_completed > 0) {  // a run that completed nothing has no FCT, not 0
      f.p50.push_back(r.fct_p50_us);
      f.p99.push_back(r.fct_p99_us);
    }
    f.retx.push_back(r.retx_rate);
    f.naks.push_back(static_cast<double>(r.naks));
    f.reord.push_back(static_cast<double>(r.reorder_p99_depth));
    f.pfc.push_back(static_cast<double>(r.pfc_pause_frames));
    f.completed += r.messages_completed;
    f.posted += r.messages_posted;
    f.lossy += r.lossless_drops_queue_full + r.lossless_drops_headroom;
    f.warned += !r.warnings.empty();
  }
  return f;
}

}  // namespace report_detail

namespace {

// cdf: the offered load beside each mode's carried load (mean±stddev over seeds).
std::string format_load_lines(const std::vector<RunResult>& runs, const FabricConfig& c) {
  char line[256];
  std::snprintf(line, sizeof line, "  load: offered %.3f of the hosts' line rate", c.host_load());
  std::string out = line;
  if (c.inter_leaf_share() > 0) {
    std::snprintf(line, sizeof line, " (inter-leaf %.3f of the leaf uplinks)",
                  c.offered_network_load());
    out += line;
  }
  out +=
      "; carried (carried_load: bytes acknowledged within [warm-up, end of arrivals] over "
      "the hosts' line rate):";
  for (const std::string& mode : modes_in_order(runs)) {
    std::vector<double> v;
    for (const RunResult& r : runs) {
      if (r.mode == mode) v.push_back(r.carried_load);
    }
    const Spread a = spread(v);
    std::snprintf(line, sizeof line, " %s %.3f±%.3f", mode.c_str(), a.mean, a.stddev);
    out += line;
  }
  return out + "\n";
}

}  // namespace

std::string format_table(const std::vector<RunResult>& runs, const FabricConfig& config) {
  std::string out;
  char line[512];
  const bool allreduce = config.workload == Workload::kAllreduce;
  const bool cdf = config.workload == Workload::kCdf;
  // Headers are the JSON's names, shortened; the legend below the table spells them out.
  std::snprintf(line, sizeof line, "%-16s %5s %13s %14s %14s %14s %9s %9s %8s %6s %7s %8s %8s",
                "mode", "seeds", "done", allreduce ? "busbw/line" : "throughput", "uplink imbal",
                "downlink imbal", "fct p50", "fct p99", "retx", "naks", "reord99", "pauses",
                "ll drops");
  out += line;
  if (cdf) {
    std::snprintf(line, sizeof line, " %9s %9s %9s %9s", "small p50", "small p99", "large p50",
                  "large p99");
    out += line;
  }
  out += "\n";
  bool any_censored = false;
  bool any_warning = false;
  for (const std::string& mode : modes_in_order(runs)) {
    const ModeFigures f = gather_mode(runs, mode);
    const std::vector<double>& tp = allreduce ? f.cb : f.tp;
    const uint64_t warned = f.warned;
    any_warning = any_warning || warned > 0;
    const auto pm = [](const std::vector<double>& v) {
      const Spread a = spread(v);
      char b[32];
      std::snprintf(b, sizeof b, "%.3f±%.3f", a.mean, a.stddev);
      return std::string(b);
    };
    char done[32], f50[16] = "-", f99[16] = "-";
    std::snprintf(done, sizeof done, "%llu/%llu%s", static_cast<unsigned long long>(f.completed),
                  static_cast<unsigned long long>(f.posted), warned > 0 ? "!" : "");
    if (!f.p50.empty()) {
      std::snprintf(f50, sizeof f50, "%.1f", spread(f.p50).mean);
      std::snprintf(f99, sizeof f99, "%.1f", spread(f.p99).mean);
    }
    std::snprintf(line, sizeof line,
                  "%-16s %5zu %13s %14s %14s %14s %9s %9s %8.5f %6.0f %7.0f %8.0f %8llu\n",
                  mode.c_str(), tp.size(), done, pm(tp).c_str(), pm(f.ui).c_str(), pm(f.di).c_str(),
                  f50, f99, spread(f.retx).mean, spread(f.naks).mean, spread(f.reord).mean,
                  spread(f.pfc).mean, static_cast<unsigned long long>(f.lossy));
    out += line;
    out.pop_back();  // the newline: the slowdown columns follow
    if (cdf) {
      // The smallest and the largest size bin with messages, every seed's pooled.
      const PooledSlowdown sd = pool_slowdown(runs, mode, false);
      const SlowdownBin* small = nullptr;
      const SlowdownBin* large = nullptr;
      for (const SlowdownBin& b : sd.bins) {
        if (b.count == 0) continue;
        if (small == nullptr) small = &b;
        large = &b;
      }
      for (const SlowdownBin* b : {small, large}) {
        for (const CensoredValue* v : {b ? &b->p50 : nullptr, b ? &b->p99 : nullptr}) {
          std::snprintf(line, sizeof line, " %9s", v ? censored_text(*v, "%.2f").c_str() : "-");
          out += line;
          any_censored = any_censored || (v && v->censored);
        }
      }
    }
    out += "\n";
  }
  out += std::string("  done: messages_completed/messages_posted, all seeds") +
         (any_warning ? " (!: a run is unfinished or lossy, see stderr and runs[].warnings)" : "") +
         "; " +
         (allreduce ? "busbw/line: collective_bw_fraction"
          : cdf     ? "throughput: throughput_fraction, bytes acknowledged from 0 to the last "
                      "completion (drain included) over the senders' line rate, not the carried "
                      "load"
                    : "throughput: throughput_fraction") +
         ";\n  uplink/downlink imbal: uplink_util.imbalance (leaf->spine), downlink_util.imbalance "
         "(spine->leaf);\n  mean±stddev over seeds; fct p50/p99 (us): fct_us, the mean over seeds "
         "of each run's percentile;\n  retx: retx_rate; reord99: reorder.p99_depth; pauses: "
         "pfc.pause_frames; ll drops: lossless_drops\n  (queue_full + headroom_overflow on a PFC "
         "class, all seeds)\n";
  if (cdf) {
    out += std::string(
               "  small/large p50/p99: FCT slowdown (FCT over the message alone on an idle "
               "fabric) of the smallest and\n  the largest size bin, every seed's messages "
               "pooled (summary.<mode>.slowdown)") +
           (any_censored ? "; >=: a lower bound, unfinished messages at or below that rank" : "") +
           "\n";
  }
  if (cdf) out += format_load_lines(runs, config);
  return out;
}

}  // namespace spraynet::fabric
