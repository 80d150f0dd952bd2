// Every counter of a SwitchNode as JSON: for the end-of-run report (--stats), for telemetry
// commands and for tests. Names in JSON are the counter names used everywhere else.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "switch_emu/switch_counter_snapshot.h"
#include "switch_emu/switch_node.h"

namespace spraynet::switch_emu {

nlohmann::json port_json(const SwitchNode& node, uint16_t port, uint64_t now_ns);
// The same from a published copy of the port's counters (telemetry).
nlohmann::json port_json(const std::string& name, const SwitchPortSnapshot& port);
nlohmann::json drops_json(const SwitchNode& node);
// Every cause of SPRAYNET_SWITCH_DROP_CAUSES and every parse status but ok (parse_<status>), and
// "total": their sum. From any SwitchDropCounters (one lcore's, or several added up).
nlohmann::json drop_counters_json(const SwitchDropCounters& drops);
nlohmann::json counters_json(const SwitchNode& node);
// The accounting identity (SwitchAccounting) now: its terms, each port's egress, and whether
// they add up ("balanced"). Telemetry /spraynet/accounting; the report's "accounting".
nlohmann::json accounting_json(const SwitchNode& node);
nlohmann::json accounting_json(const control::SwitchConfig& config, const SwitchCounterView& view);
nlohmann::json switch_counters_json(const SwitchCounters& counters);
nlohmann::json group_json(SwitchNode& node, size_t group);
// The same with the packet counters from a published copy (its mode, members, buckets: node's).
nlohmann::json group_json(SwitchNode& node, size_t group, const SwitchGroupSnapshot& counters);
nlohmann::json tcam_json(SwitchNode& node);
nlohmann::json pfc_json(const SwitchNode& node, uint16_t port);
nlohmann::json pfc_json(const SwitchNode& node, uint16_t port, const SwitchPfcPortSnapshot& pfc);
// The shared lossless buffer: pool used and peak, threshold, headroom used, overflows.
nlohmann::json pfc_buffer_json(const PfcState& pfc);
// The same with what changes from a published copy (pool size, threshold mode, alpha: pfc's).
nlohmann::json pfc_buffer_json(const PfcState& pfc, const SwitchPfcBufferSnapshot& buffer);
// All of the above: {"switch", "ports": [...], "drops", "counters", "groups": [...], "tcam",
// "pfc": [...] (when enabled)}.
nlohmann::json report_json(SwitchNode& node, uint64_t now_ns);
// CONGA: the switch's role, its counters and its tables' (docs/switch_emu.md, "CONGA").
nlohmann::json conga_json(const control::SwitchConfig& config, const SwitchCongaSnapshot& conga);
// ConWeave: the leaf's source and destination counters (docs/switch_emu.md, "ConWeave").
nlohmann::json conweave_json(const control::SwitchConfig& config,
                             const SwitchConweaveSnapshot& conweave);

}  // namespace spraynet::switch_emu
