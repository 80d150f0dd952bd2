// switch_emu's commands on DPDK's telemetry socket (dpdk-telemetry.py -f PREFIX), under
// /spraynet/. Reading: ports, port, drops, counters, accounting, groups, group, tcam, pfc,
// link_state, buckets. Acting, each validated and acknowledged ({"ok": true, ...}) or refused
// ({"error": reason}): link_set, link_rate, link_ber, link_loss, tcam_add, tcam_remove,
// group_mode — off unless enabled (telemetry.acting_commands, --telemetry-acting). The parameter
// syntax of every command is in its help text (/help,<command>).
//
// Handlers run on DPDK's telemetry threads. port, drops, counters and accounting read the copy
// of the counters the lcores publish (SwitchShared::counters) and take no lock: their
// "snapshot_age_ns" says how old it is. The others take SwitchShared::control_lock for anything
// the control side owns (control loop, TCAM rules, bucket tables) and SwitchShared::lock for the
// node's dataplane state, in that order, and wait for RCU grace periods without the node lock.
// Acting commands that change counters under the node lock publish them again.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>

#include "switch_emu/switch_lcore.h"

namespace spraynet::runtime {
class TscClock;
}

namespace spraynet::switch_emu {

// Registers every /spraynet/ command; `shared` and `clock` must outlive the registration (call
// control::TelemetryCommands::clear() before they go). Without `acting_commands` the acting
// ones answer a refusal (and log it); with it, each call is logged with its reply.
void register_switch_telemetry(SwitchShared& shared, const runtime::TscClock& clock,
                               bool acting_commands);

// The ethdev's own counters: what the PMD received, and lost before the pipeline saw it
// (imissed: rx ring full; rx_nombuf: no mbuf for a descriptor).
nlohmann::json ethdev_json(uint16_t port_id);

}  // namespace spraynet::switch_emu
