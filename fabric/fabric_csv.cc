// --csv DIR: summary.csv, runs.csv, flows.csv and slowdown.csv.
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
#include "fabric/fabric.h"
#include "fabric/report_detail.h"

namespace spraynet::fabric {

using report_detail::censored_text;
using report_detail::gather_mode;
using report_detail::ModeFigures;
using report_detail::modes_in_order;
using report_detail::pool_slowdown;
using report_detail::PooledSlowdown;
using report_detail::spread;

namespace {

// A CSV field: quoted when it holds a comma, a quote or a line break (RFC 4180).
std::string csv_field(const std::string& v) {
  if (v.find_first_of(",\"\n") == std::string::npos) return v;
  std::string out = "\"";
  for (char c : v) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.6g", v);
  return b;
}

void open_csv(std::ofstream& out, const std::string& path, bool append, const std::string& header) {
  const bool fresh = !append || !std::filesystem::exists(path);
  out.open(path, fresh ? std::ios::trunc : std::ios::app);
  if (!out) throw std::runtime_error("cannot write " + path);
  if (fresh) out << header << "\n";
}

}  // namespace

void write_csv(const std::string& dir, const std::vector<RunResult>& runs, const std::string& run,
               bool append) {
  const std::string pre = run.empty() ? "" : csv_field(run) + ",";
  const std::string pre_h = run.empty() ? "" : "run,";
  std::ofstream summary, per_run, flows;
  open_csv(summary, dir + "/summary.csv", append,
           pre_h +
               "mode,seeds,messages_completed,messages_posted,throughput_fraction,"
               "throughput_fraction_stddev,collective_bw_fraction,host_uplink_util_mean,"
               "host_uplink_util_imbalance,uplink_util_mean,uplink_util_imbalance,"
               "uplink_util_imbalance_stddev,downlink_util_mean,downlink_util_imbalance,"
               "fct_p50_us_mean,fct_p99_us_mean,slowdown_p50,slowdown_p99,"
               "retx_rate,naks,reorder_p99_depth,pfc_pause_frames,lossless_drops,"
               "runs_with_warnings");
  for (const std::string& mode : modes_in_order(runs)) {
    const ModeFigures f = gather_mode(runs, mode);
    const auto m = [](const std::vector<double>& v) { return num(spread(v).mean); };
    // Slowdown: every seed's messages pooled, all bins ("all" of summary.<mode>.slowdown).
    const PooledSlowdown sd = pool_slowdown(runs, mode, false);
    const bool sd_any = sd.any && sd.all.count > 0;
    summary << pre << csv_field(mode) << "," << f.tp.size() << "," << f.completed << "," << f.posted
            << "," << m(f.tp) << "," << num(spread(f.tp).stddev) << "," << m(f.cb) << ","
            << m(f.hum) << "," << m(f.hui) << "," << m(f.um) << "," << m(f.ui) << ","
            << num(spread(f.ui).stddev) << "," << m(f.dm) << "," << m(f.di) << ","
            << (f.p50.empty() ? "" : m(f.p50)) << "," << (f.p99.empty() ? "" : m(f.p99)) << ","
            << (sd_any ? censored_text(sd.all.p50, "%.6g") : "") << ","
            << (sd_any ? censored_text(sd.all.p99, "%.6g") : "") << "," << m(f.retx) << ","
            << m(f.naks) << "," << m(f.reord) << "," << m(f.pfc) << "," << f.lossy << ","
            << f.warned << "\n";
  }
  open_csv(per_run, dir + "/runs.csv", append,
           pre_h +
               "mode,seed,completed,messages_completed,messages_posted,throughput_fraction,"
               "collective_bw_fraction,host_uplink_util_mean,host_uplink_util_imbalance,"
               "uplink_util_mean,uplink_util_imbalance,downlink_util_mean,"
               "downlink_util_imbalance,fct_p50_us,fct_p99_us,fct_max_us,retx_rate,"
               "packets_retransmitted,naks,timeouts,pfc_pause_frames,pfc_paused_us,"
               "lossless_drops,failover_event_us,failover_before,failover_dip,"
               "failover_after,failover_recovery_us,cc_mode,ecn_marked,cnps_sent,"
               "cc_mean_rate_fraction,queue_p99_bytes,int_records_pushed,transport,"
               "network_drops,retransmitted_per_drop,warnings");
  for (const RunResult& r : runs) {
    std::string warnings;
    for (const std::string& w : r.warnings) warnings += (warnings.empty() ? "" : "; ") + w;
    per_run << pre << csv_field(r.mode) << "," << r.seed << "," << (r.completed ? 1 : 0) << ","
            << r.messages_completed << "," << r.messages_posted << "," << num(r.throughput_fraction)
            << "," << num(r.collective_bw_fraction) << "," << num(r.host_uplink_util_mean) << ","
            << num(r.host_uplink_util_imbalance) << "," << num(r.uplink_util_mean) << ","
            << num(r.uplink_util_imbalance) << "," << num(r.downlink_util_mean) << ","
            << num(r.downlink_util_imbalance) << ",";
    if (r.messages_completed > 0) {
      per_run << num(r.fct_p50_us) << "," << num(r.fct_p99_us) << "," << num(r.fct_max_us);
    } else {
      per_run << ",,";
    }
    per_run << "," << num(r.retx_rate) << "," << r.packets_retransmitted << "," << r.naks << ","
            << r.timeouts << "," << r.pfc_pause_frames << "," << num(r.pfc_paused_us) << ","
            << (r.lossless_drops_queue_full + r.lossless_drops_headroom) << ",";
    if (r.failover) {
      const RunResult::Failover& f = *r.failover;
      // dip: the lowest goodput sample after the failure, as a fraction of the one before.
      per_run << num(f.event_us) << "," << num(f.before) << ","
              << num(f.before > 0 ? f.min_after / f.before : 0) << "," << num(f.after) << ","
              << num(f.recovery_us);
    } else {
      per_run << ",,,,";
    }
    // Congestion control: its mode, the signals it ran on (CE marks and CNPs; HPCC's INT records
    // pushed by the switches), the QPs' mean rate and the busiest lossless queue's p99.
    per_run << "," << csv_field(r.cc_mode) << "," << r.ecn_marked << "," << r.cnps_sent << ","
            << num(r.mean_rate_fraction) << "," << r.queue.p99 << "," << r.int_switch.pushed;
    // The transport (rc | irn), what the network dropped and the retransmissions per drop.
    per_run << "," << (r.irn ? "irn" : "rc") << "," << network_drops(r) << ","
            << num(retransmitted_per_drop(r));
    per_run << "," << csv_field(warnings) << "\n";
  }
  size_t max_uplinks = 0;
  for (const RunResult& r : runs) {
    for (const FlowRecord& f : r.flows)
      max_uplinks = std::max(max_uplinks, f.packets_by_uplink.size());
  }
  std::string uplink_cols;
  for (size_t u = 0; u < max_uplinks; ++u) uplink_cols += ",packets_plane" + std::to_string(u);
  open_csv(flows, dir + "/flows.csv", append,
           pre_h +
               "mode,seed,src,dst,src_qpn,dst_qpn,hops,bytes_acked,bytes_completed,"
               "messages_completed,fct_mean_us,fct_max_us,slowdown_mean,throughput_gbps,"
               "packets_sent,packets_retransmitted,naks,timeouts" +
               uplink_cols + ",start_ns,end_ns,size_bytes,ideal_fct_ns,in_window");
  for (const RunResult& r : runs) {
    for (const FlowRecord& f : r.flows) {
      flows << pre << csv_field(r.mode) << "," << r.seed << "," << r.host_names.at(f.src) << ","
            << r.host_names.at(f.dst) << "," << f.src_qpn << "," << f.dst_qpn << "," << f.hops
            << "," << f.bytes_acked << "," << f.bytes_completed << "," << f.messages_completed
            << ",";
      if (f.messages_completed > 0) {
        flows << num(f.fct_mean_us) << "," << num(f.fct_max_us) << "," << num(f.slowdown_mean);
      } else {
        flows << ",,";
      }
      flows << "," << num(f.throughput_gbps) << "," << f.packets_sent << ","
            << f.packets_retransmitted << "," << f.naks << "," << f.timeouts;
      for (size_t u = 0; u < max_uplinks; ++u) {
        flows << "," << (u < f.packets_by_uplink.size() ? f.packets_by_uplink[u] : 0);
      }
      // A flow of one message: that message (end empty when unfinished); else all empty.
      if (f.single_message) {
        char ideal[40];
        std::snprintf(ideal, sizeof ideal, "%.17g", f.ideal_fct_ns);
        flows << "," << f.start_ns << "," << (f.end_ns ? std::to_string(*f.end_ns) : "") << ","
              << f.size_bytes << "," << ideal << "," << (f.in_window ? 1 : 0);
      } else {
        flows << ",,,,,";
      }
      flows << "\n";
    }
  }
  // slowdown.csv: per mode, every seed's messages pooled (seed "pooled", with the 95% intervals),
  // then each run's own bins (its seed, no intervals).
  std::ofstream slowdown;
  open_csv(slowdown, dir + "/slowdown.csv", append,
           pre_h +
               "mode,seed,binning,bin,lo_bytes,hi_bytes,count,unfinished,mean,p50,p95,p99,"
               "mean_ci95_lo,mean_ci95_hi,p99_ci95_lo,p99_ci95_hi,ci_method");
  const auto bin_row = [&](const std::string& mode, const std::string& seed,
                           SlowdownBinning binning, size_t i, const SlowdownBin& b,
                           const std::string& ci) {
    slowdown << pre << csv_field(mode) << "," << seed << "," << to_string(binning) << "," << i
             << "," << b.lo_bytes << "," << b.hi_bytes << "," << b.count << "," << b.unfinished
             << "," << censored_text(b.mean, "%.6g") << "," << censored_text(b.p50, "%.6g") << ","
             << censored_text(b.p95, "%.6g") << "," << censored_text(b.p99, "%.6g") << ",";
    if (ci.empty()) {
      slowdown << ",,,,";
    } else {
      slowdown << num(b.mean_ci_lo) << "," << num(b.mean_ci_hi) << "," << num(b.p99_ci_lo) << ","
               << num(b.p99_ci_hi) << "," << ci;
    }
    slowdown << "\n";
  };
  for (const std::string& mode : modes_in_order(runs)) {
    const PooledSlowdown sd = pool_slowdown(runs, mode, true);
    for (size_t i = 0; i < sd.bins.size(); ++i) {
      bin_row(mode, "pooled", sd.binning, i, sd.bins[i], sd.ci_method[i]);
    }
    for (const RunResult& r : runs) {
      if (r.mode != mode) continue;
      for (size_t i = 0; i < r.slowdown.bins.size(); ++i) {
        bin_row(mode, std::to_string(r.seed), r.slowdown.binning, i, r.slowdown.bins[i], "");
      }
    }
  }
  for (std::ofstream* o : {&summary, &per_run, &flows, &slowdown}) {
    o->flush();
    if (!*o) throw std::runtime_error("cannot write the CSV files in " + dir);
  }
}

void write_timeseries(std::ostream& out, const Fabric& f, const RunResult& r,
                      const std::string& prefix, double link_gbps) {
  char line[256];
  for (const LinkSample& s : f.timeseries()) {
    out << prefix;
    std::snprintf(line, sizeof line, "%s,%llu,%.1f,%s,%.4f,%llu,%d\n", r.mode.c_str(),
                  static_cast<unsigned long long>(r.seed), static_cast<double>(s.t_ns) / 1000.0,
                  f.link_names()[s.link].c_str(), s.util,
                  static_cast<unsigned long long>(s.queue_bytes), s.paused ? 1 : 0);
    out << line;
  }
  // With congestion control: a few QPs' DCQCN rates, as rows of link "qp:SRC>DST/INDEX" whose
  // util is the rate over the link rate (queue_bytes and paused 0).
  for (const auto& [name, gbps] : r.cc_timeline_rates) {
    for (size_t i = 0; i < gbps.size() && i < r.cc_timeline_t_us.size(); ++i) {
      out << prefix;
      std::snprintf(line, sizeof line, "%s,%llu,%.1f,qp:%s,%.4f,0,0\n", r.mode.c_str(),
                    static_cast<unsigned long long>(r.seed), r.cc_timeline_t_us[i], name.c_str(),
                    static_cast<double>(gbps[i]) / link_gbps);
      out << line;
    }
  }
}

}  // namespace spraynet::fabric
