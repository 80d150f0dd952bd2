// The cdf workload's load as papers state it, and its plan before it is drawn: what a run will
// ask for (flows, bytes), whether the CDF looks like one in kilobytes, the lines the header
// prints (the CDF, both loads, each mode's receive model) and the warnings the config deserves
// (an inter-leaf load above the uplinks' capacity). Nothing here touches DPDK.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fabric/fabric_config.h"

namespace spraynet::fabric {

class FlowSizeCdf;

// A cdf run expecting more flows than this is refused unless --force: the workload plan holds
// every flow (its QP spec and its post) from the start of the run, before the first packet.
inline constexpr uint64_t kMaxPlannedFlows = 50'000'000;
// A CDF is taken to be in kilobytes (refused unless --force) when its largest flow is below one
// Ethernet frame's payload or its mean below 100 bytes: every measured distribution the
// literature ships (websearch, alistorage2019, Hadoop) has a largest flow in the megabytes.
inline constexpr uint64_t kCdfMinLargestBytes = 1500;
inline constexpr double kCdfMinMeanBytes = 100;

struct CdfPlan {
  std::string cdf;  // as given (a built-in name or a path)
  double mean_bytes = 0;
  uint64_t max_bytes = 0;
  uint32_t hosts = 0;
  double host_load = 0;     // of each host's line rate
  double network_load = 0;  // inter-leaf offered load over the leaf uplinks' capacity
  double host_gbps = 0;     // each host's line rate, every plane
  double duration_s = 0;    // the arrival window
  double flows = 0;         // expected: hosts x arrivals per second x duration
  double bytes = 0;         // expected: flows x mean
  size_t runs = 0;          // modes x seeds

  // One line: the CDF, its mean, the loads and the expected flows and bytes.
  std::string describe() const;
  // Empty when the plan may run; else why not, with the figure and a hint (--force overrides).
  std::string refusal() const;
};

CdfPlan cdf_plan(const FabricConfig& config, const FlowSizeCdf& cdf);

// The header's cdf lines (each starting with two spaces, ending with '\n'): the CDF and its
// mean, the per-host load and the inter-leaf offered load against the uplinks' capacity, and
// each mode's receive model. Empty for other workloads. `cdf` may be null (then the mean is
// left out).
std::string cdf_header_lines(const FabricConfig& config, const FlowSizeCdf* cdf);

// What the config deserves a warning for before it runs (stderr and the JSON's "warnings"):
// a cdf load whose inter-leaf share offers more than the leaf uplinks' capacity. Empty: none.
std::vector<std::string> config_warnings(const FabricConfig& config);

// How a mode's receiving NICs take packets in, for the header: e.g. "reorder engine + rxe
// (reorder-buffer, the default for a per-packet mode)".
std::string describe_receive(const FabricConfig& config, FabricMode mode);

}  // namespace spraynet::fabric
