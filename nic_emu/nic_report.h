// JSON views of a NicNode's counters, for telemetry and the end-of-run report (--stats).
#pragma once

#include <nlohmann/json.hpp>

#include "nic_emu/nic_node.h"

namespace spraynet::nic_emu {

nlohmann::json ports_json(const NicNode& node);
nlohmann::json drops_json(const NicNode& node);
// Every cause of SPRAYNET_NIC_DROP_CAUSES and every parse status but ok (parse_<status>), and
// "total": their sum. From any NicDropCounters (one lcore's, or several added up).
nlohmann::json drop_counters_json(const NicDropCounters& drops);
// Every NicCounters counter by its name (the report's "counters").
nlohmann::json nic_counters_json(const NicCounters& counters);
nlohmann::json spray_json(const NicNode& node);
nlohmann::json ppcid_json(const NicNode& node);
nlohmann::json reorder_json(const NicNode& node);
// Per QP: source IP, DestQP and arrivals per uplink (the spraying heat map).
nlohmann::json heat_map_json(const NicNode& node);
nlohmann::json rc_engine_json(const NicNode& node);  // null without an RC engine
// Congestion control: the notification point's counters and, with an RC engine, its QPs'
// reaction points (rc_engine_json's "cc"); telemetry /spraynet/cc.
nlohmann::json cc_json(const NicNode& node);
// The latency probe's report (LatencyReport's fields) with its uplink, rate and counters; null
// without a probe. It sorts the stored latencies: O(n log n) in the samples kept.
nlohmann::json probe_json(const NicNode& node);
// The accounting identity (NicAccounting) now: its terms, each port's egress, and whether they
// add up ("balanced"). Telemetry /spraynet/accounting; the report's "accounting".
nlohmann::json accounting_json(const NicNode& node);

// The PPCID anomaly detector: {"enabled": false} when off, else its counters and every flagged
// QP (reason, uplink, PSN, first and last anomalous packet, counts by reason).
nlohmann::json anomaly_json(const NicNode& node);
nlohmann::json report_json(const NicNode& node);

}  // namespace spraynet::nic_emu
