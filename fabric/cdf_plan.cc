#include "fabric/cdf_plan.h"

#include <algorithm>
#include <cstdio>

#include "fabric/flow_size_cdf.h"

namespace spraynet::fabric {

namespace {

// 1234567 -> "1.23 M", 12345 -> "12345".
std::string count(double n) {
  char b[48];
  if (n >= 1e6) {
    std::snprintf(b, sizeof b, "%.3g M", n / 1e6);
  } else {
    std::snprintf(b, sizeof b, "%.0f", n);
  }
  return b;
}

std::string bytes_text(double n) {
  char b[48];
  if (n >= 1e9) {
    std::snprintf(b, sizeof b, "%.3g GB", n / 1e9);
  } else if (n >= 1e6) {
    std::snprintf(b, sizeof b, "%.3g MB", n / 1e6);
  } else {
    std::snprintf(b, sizeof b, "%.0f bytes", n);
  }
  return b;
}

}  // namespace

CdfPlan cdf_plan(const FabricConfig& c, const FlowSizeCdf& cdf) {
  CdfPlan p;
  p.cdf = c.cdf;
  p.mean_bytes = cdf.mean_bytes();
  p.max_bytes = cdf.max_bytes();
  p.hosts = c.hosts();
  p.host_load = c.host_load();
  p.network_load = c.inter_leaf_share() > 0 ? c.offered_network_load() : 0;
  p.host_gbps = c.link_gbps * c.planes;
  p.duration_s = static_cast<double>(c.duration_ns) * 1e-9;
  // WorkloadPlan draws each host's arrivals at host_load x line rate / (8 x mean) a second.
  if (p.mean_bytes > 0) {
    p.flows = p.hosts * p.host_load * p.host_gbps * 1e9 / (8.0 * p.mean_bytes) * p.duration_s;
  }
  p.bytes = p.flows * p.mean_bytes;
  p.runs = c.modes.size() * (c.seed_last - c.seed_first + 1);
  return p;
}

std::string CdfPlan::describe() const {
  char line[640];
  std::snprintf(line, sizeof line,
                "cdf plan: %s, mean flow %.0f bytes (largest %llu); %u hosts x %.3f of %g "
                "Gbit/s (inter-leaf load %.3f of the uplinks) x %g ms of arrivals: about %s "
                "flows and %s per run, %zu run%s",
                cdf.c_str(), mean_bytes, static_cast<unsigned long long>(max_bytes), hosts,
                host_load, host_gbps, network_load, duration_s * 1e3, count(flows).c_str(),
                bytes_text(bytes).c_str(), runs, runs == 1 ? "" : "s");
  return line;
}

std::string CdfPlan::refusal() const {
  char line[640];
  if (max_bytes < kCdfMinLargestBytes || mean_bytes < kCdfMinMeanBytes) {
    std::snprintf(line, sizeof line,
                  "--cdf %s: its largest flow is %llu bytes and its mean %.1f bytes (below %llu "
                  "or %.0f: the sizes look like kilobytes); sizes are in bytes (websearch's "
                  "largest is 30000000): multiply them by 1000, or --force to run it as it is",
                  cdf.c_str(), static_cast<unsigned long long>(max_bytes), mean_bytes,
                  static_cast<unsigned long long>(kCdfMinLargestBytes), kCdfMinMeanBytes);
    return line;
  }
  if (flows > static_cast<double>(kMaxPlannedFlows)) {
    std::snprintf(line, sizeof line,
                  "cdf plan: about %s flows per run, above the limit of %s (the plan holds "
                  "every flow from the start): shorten --duration, lower --load or "
                  "--network-load, or --force",
                  count(flows).c_str(), count(static_cast<double>(kMaxPlannedFlows)).c_str());
    return line;
  }
  return {};
}

std::string describe_receive(const FabricConfig& c, FabricMode mode) {
  const std::string r = c.effective_receive(mode);
  if (r == "reorder-buffer") {
    return spreads_per_packet(mode)
               ? "reorder engine + rxe (receive reorder-buffer: the default for a mode that "
                 "reorders per packet)"
               : "reorder engine + rxe";
  }
  if (r == "ooo-placement") return "out-of-order placement, selective retransmission";
  if (mode == FabricMode::kSprayNoReorder) return "rxe alone (spray-noreorder)";
  return c.receive == "none" ? "rxe alone (receive none)" : "rxe alone";
}

std::string cdf_header_lines(const FabricConfig& c, const FlowSizeCdf* cdf) {
  if (c.workload != Workload::kCdf) return {};
  std::string out;
  char line[640];
  std::string mean;
  if (cdf != nullptr) {
    std::snprintf(line, sizeof line, ", mean flow %.0f bytes (largest %llu)", cdf->mean_bytes(),
                  static_cast<unsigned long long>(cdf->max_bytes()));
    mean = line;
  }
  const double share = c.inter_leaf_share();
  std::snprintf(line, sizeof line, "  cdf %s%s, Poisson arrivals over %g us\n", c.cdf.c_str(),
                mean.c_str(), static_cast<double>(c.duration_ns) / 1000.0);
  out += line;
  if (share > 0) {
    std::snprintf(line, sizeof line,
                  "  load: %.3f of each host's line rate%s; inter-leaf offered load %.3f of the "
                  "leaf uplinks' capacity (%sinter-leaf share %.3f, uplinks / host ports %.3f)\n",
                  c.host_load(), c.network_load > 0 ? " (from network-load)" : " (load)",
                  c.offered_network_load(), c.network_load > 0 ? "given; " : "", share,
                  c.uplink_ratio());
  } else {
    std::snprintf(line, sizeof line,
                  "  load: %.3f of each host's line rate (load); one leaf: nothing crosses "
                  "the uplinks\n",
                  c.host_load());
  }
  out += line;
  out += "  receive:";
  for (size_t i = 0; i < c.modes.size(); ++i) {
    out += (i ? "; " : " ") + std::string(to_string(c.modes[i])) + " " +
           describe_receive(c, c.modes[i]);
  }
  out += "\n";
  return out;
}

std::vector<std::string> config_warnings(const FabricConfig& c) {
  std::vector<std::string> w;
  if (c.workload != Workload::kCdf || c.inter_leaf_share() <= 0) return w;
  const double offered = c.offered_network_load();
  if (offered > 1.0) {
    char line[512];
    std::snprintf(line, sizeof line,
                  "overload: the inter-leaf traffic offers %.3f of the leaf uplinks' capacity "
                  "(per-host load %.3f x inter-leaf share %.3f / uplinks over host ports %.3f): "
                  "the uplinks cannot carry it, queues grow for as long as arrivals last",
                  offered, c.host_load(), c.inter_leaf_share(), c.uplink_ratio());
    w.emplace_back(line);
  }
  return w;
}

}  // namespace spraynet::fabric
