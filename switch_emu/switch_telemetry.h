// switch_emu's commands on DPDK's telemetry socket (dpdk-telemetry.py -f PREFIX), under
// /spraynet/. Reading: ports, port, drops, counters, accounting, groups, group, tcam, pfc,
// link_state, buckets. Acting, each validated and acknowledged ({"ok": true, ...}) or refused
// ({"error": reason}): link_set, link_rate, link_ber, link_loss, tcam_add, tcam_remove,
// group_mode — off unless enabled (telemetry.acting_commands, --telemetry-acting). The parameter
// syntax of every command is in its help text (/help,<command>).
//
// Handlers run on DPDK's telemetry threads and never take the node lock to read: counters come
// from the copy the lcores publish (SwitchShared::counters; port and accounting say how old it
// is in "snapshot_age_ns"), TCAM counters are atomics, and what the control side owns (control
// loop, TCAM rules, bucket tables, group modes) is read under SwitchShared::control_lock, which
// no lcore takes. Acting commands take control_lock, then SwitchShared::lock for the node's
// dataplane state, wait for RCU grace periods without the node lock, and publish the counters
// again after a change.
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
