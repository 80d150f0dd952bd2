// Logging for the runtime and the programs: one named spdlog logger per component, all writing
// to one shared stderr sink, and DPDK's own log lines routed into the same place.
#pragma once

#include <spdlog/spdlog.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace spraynet::runtime {

// The logger for `component` ("port", "poll_loop", "dpdk", ...), created on first use with
// the shared stderr sink and the current level. Safe to call from any thread.
std::shared_ptr<spdlog::logger> logger(std::string_view component);

// Route DPDK's log stream into logger("dpdk"), each line at the level DPDK logged it with.
// Call before rte_eal_init so that EAL's start-up lines are caught too (Eal does).
void bridge_dpdk_log();

// The last few error-level lines DPDK logged (oldest first): what a failed call's rte_errno
// often does not say (rte_eal_init fails with rte_errno 0 when the file prefix is in use).
std::vector<std::string> recent_dpdk_errors();

// Set the level of every logger, present and future, from one of
// trace|debug|info|warn|error|critical|off. Throws std::invalid_argument naming those values.
void set_level(std::string_view level);

}  // namespace spraynet::runtime
