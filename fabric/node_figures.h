// One node's figures at the end of a run: every counter the run's report reads from a switch or a
// NIC, taken where the node runs and packed for the rank that writes the report (fabric_emu
// --mpi runs a fabric's nodes in several processes; Fabric::collect reads figures, never nodes,
// so one process and several give the same report).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "control/control_loop.h"
#include "dataplane/egress/egress_port.h"
#include "dataplane/memory_usage.h"
#include "fabric/kernel/rank_bytes.h"
#include "nic_emu/nic_node.h"
#include "switch_emu/switch_node.h"

namespace spraynet::fabric {

struct NodeFigures {
  using ClassCounters = std::array<EgressClassCounters, EgressPort::kClasses>;
  struct Port {
    uint64_t rx_packets = 0;
    uint64_t tx_bytes = 0;
    ClassCounters classes{};  // the port's egress, per class
    EgressIntCounters int_records{};  // HPCC's INT records the port pushed (or could not)
  };
  bool is_switch = false;
  std::vector<Port> ports;  // a switch's ports; a NIC's uplinks
  MemoryUsage memory;

  // Switch.
  switch_emu::SwitchCounters sw_counters{};
  switch_emu::SwitchDropCounters sw_drops{};
  bool has_pfc = false;
  uint64_t pfc_pool_peak_bytes = 0;
  double pfc_headroom_peak_fraction = 0;  // the fullest lossless PG's headroom (first, by port)
  uint64_t pfc_headroom_peak_bytes = 0;
  uint64_t pfc_watchdog_storms = 0;
  uint64_t pfc_watchdog_frames_suppressed = 0;
  uint64_t control_publications = 0;
  uint64_t flowlets_started = 0;
  // CONGA (a switch with a conga: block).
  switch_emu::CongaCounters conga{};
  CongaTableCounters conga_tables{};
  uint64_t conga_entries = 0;  // live table entries at the end
  // ConWeave (a leaf with a conweave: block).
  ConweaveTxCounters conweave_tx{};
  ConweaveRxCounters conweave_rx{};

  // NIC.
  nic_emu::PpcidCounters ppcid{};
  nic_emu::NicCounters nic_counters{};
  nic_emu::NicDropCounters nic_drops{};
  bool has_reorder = false;
  ReorderCounters reorder{};
  uint64_t reorder_held = 0;
  std::vector<uint64_t> reorder_depth;  // the depth histogram (has_reorder)
  RcRequesterCounters requester_totals{};
  RcResponderCounters responder_totals{};
  RcPlacementResponderCounters placement_totals{};
  RcCcSummary cc{};
  RepsCounters reps{};  // mode reps: every requester's
  uint64_t qps_never_acked = 0;
  std::vector<RcQpFlowCounters> requesters;  // per QP index: its flow's (has_requester set)
  std::optional<nic_emu::QpHeatMap> heat_map;  // per_qp only

  // `now_ns`: the egress counters' moment; `cc_at_ns`: the congestion control summary's.
  static NodeFigures of(const switch_emu::SwitchNode& sw, const control::ControlLoop* control,
                        uint64_t now_ns);
  // `per_qp`: copy the per-QP figures (requesters, the heat map) too, for figures that cross
  // ranks; one process reads them from the NIC itself (a million flows' worth at 0.1 s of cdf).
  static NodeFigures of(nic_emu::NicNode& nic, uint64_t now_ns, uint64_t cc_at_ns,
                        bool per_qp);  // cc_summary settles rates
  void write(ByteWriter& w) const;
  static NodeFigures read(ByteReader& r);
};

}  // namespace spraynet::fabric
