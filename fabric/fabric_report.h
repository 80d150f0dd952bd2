// What one fabric_emu run measured, and how runs become the JSON report, the summary (mean and
// spread per mode over the seeds) and the table on stdout. Every number comes from counters the
// nodes keep and from the RC engines' completions (DESIGN.md "fabric_emu").
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dataplane/egress/egress_port.h"
#include "dataplane/memory_usage.h"
#include "fabric/fabric_config.h"
#include "fabric/slowdown.h"

namespace spraynet::fabric {

class Fabric;
class FlowSizeCdf;

// A run's FCT slowdown (JSON "slowdown", docs/fabric_emu.md "FCT slowdown"): its bins and what
// was left out. `samples` (every message in the window, finished or censored) stay with the run
// until summary_json pools them per mode.
struct SlowdownReport {
  SlowdownBinning binning = SlowdownBinning::kSingle;
  std::vector<uint64_t> edges;  // the bins' upper edges (none with ventiles)
  uint64_t warmup_ns = 0;       // messages started before it are left out
  uint64_t end_ns = 0;          // where the run stopped: unfinished messages are censored there
  uint64_t excluded_warmup = 0;
  uint64_t unfinished = 0;  // in the window
  std::vector<SlowdownBin> bins;
  std::vector<SlowdownSample> samples;
  bool empty() const { return bins.empty(); }
};

// One flow (a QP and its peer) of one run, for --csv's flows.csv.
struct FlowRecord {
  uint32_t src = 0, dst = 0;  // hosts, by index into RunResult::host_names
  uint32_t src_qpn = 0, dst_qpn = 0;
  uint32_t hops = 0;  // links on its path: 2 under one leaf, 4 across the spines
  uint64_t bytes_acked = 0;
  uint64_t bytes_completed = 0;
  uint64_t messages_completed = 0;
  double fct_mean_us = 0, fct_max_us = 0;
  double slowdown_mean = 0;     // FCT over the idle-fabric FCT over its own path, mean
  // Flows of one message (cdf, alltoall, incast): that message's post (or first send) time, its
  // completion (unfinished: none), size, ideal FCT and whether it started after the warm-up.
  bool single_message = false;
  uint64_t start_ns = 0;
  std::optional<uint64_t> end_ns;
  uint64_t size_bytes = 0;
  double ideal_fct_ns = 0;
  bool in_window = false;
  double throughput_gbps = 0;   // bytes acknowledged over the run's virtual time
  double window_gbps = 0;       // bytes acknowledged after the warm-up, over that time
  uint64_t packets_sent = 0, packets_retransmitted = 0, naks = 0, timeouts = 0;
  std::vector<uint64_t> packets_by_uplink;  // as the receiving NIC counted them, per plane
};

struct RunResult {
  std::string mode;
  std::string workload;
  uint64_t seed = 0;

  uint64_t virtual_ns = 0;       // where the run stopped
  uint64_t window_start_ns = 0;  // the throughput window (warm-up excluded)
  uint64_t window_end_ns = 0;
  bool completed = true;  // finite workloads: every message completed within the time limit
  uint64_t messages_completed = 0;
  uint64_t messages_expected = 0;  // finite workloads
  // Finite workloads: every message of the plan; permutation: the messages whose first packet
  // left (the table's "done" is messages_completed over this).
  uint64_t messages_posted = 0;
  // Buffer drops on a lossless (PFC) class, at switches and NIC uplinks: what PFC exists to
  // prevent, so never a result (run_warnings names them).
  uint64_t lossless_drops_queue_full = 0;
  uint64_t lossless_drops_headroom = 0;
  // Why this run is not a result: unfinished, lossy on a PFC class (run_warnings). Empty: ok.
  std::vector<std::string> warnings;

  double throughput_fraction = 0;
  // cdf: bytes acknowledged per second within [warm-up, end of arrivals] (whole sample
  // intervals: carried_window_ns) over every host's line rate; beside the offered host load.
  double carried_load = 0;
  std::pair<uint64_t, uint64_t> carried_window_ns{0, 0};
  double collective_bw_fraction = 0;  // allreduce: busbw / a host's line rate; else 0
  double receiver_goodput_fraction = 0;  // incast: the receiver's goodput / its line rate
  double algbw_gbps = 0;
  double busbw_gbps = 0;
  double uplink_util_mean = 0, uplink_util_max = 0, uplink_util_imbalance = 0;
  std::vector<double> uplink_util;  // per leaf->spine link, over the window
  std::vector<std::string> uplink_names;
  double downlink_util_mean = 0, downlink_util_max = 0, downlink_util_imbalance = 0;  // spine->leaf
  double host_uplink_util_mean = 0, host_uplink_util_max = 0, host_uplink_util_imbalance = 0;
  std::vector<FlowRecord> flows;  // one per QP flow of the workload (CSV only)
  std::vector<std::string> host_names;  // FlowRecord::src/dst's names (once, not per flow)
  // Leaf-spine links (both directions) that carried less than 5% of their rate over the window
  // while the fabric's mean was above 20%: what hash polarization leaves idle.
  uint32_t idle_links = 0;
  uint32_t fabric_links = 0;
  // Three tiers: the same figures per tier of switch-switch links (leaf-spine, then
  // spine-super-spine), up (towards the super-spines) and down; the fields above are then the
  // leaf-spine tier's. Empty for two tiers (the JSON then has no "tiers").
  struct TierUtil {
    std::string name;  // "leaf-spine" | "spine-super"
    double up_mean = 0, up_max = 0, up_imbalance = 0;
    double down_mean = 0, down_max = 0, down_imbalance = 0;
    uint32_t links = 0, idle_links = 0;  // both directions
    std::vector<std::pair<std::string, double>> up_by_link;
  };
  std::vector<TierUtil> tiers;
  double fct_p50_us = 0, fct_p99_us = 0, fct_max_us = 0;
  std::vector<double> fct_samples_us;  // at most kMaxFctSamples, evenly thinned
  SlowdownReport slowdown;
  uint64_t packets_sent = 0;
  uint64_t packets_retransmitted = 0;
  double retx_rate = 0;
  uint64_t naks = 0;
  uint64_t timeouts = 0;
  uint64_t retransmitted_acked = 0;  // resent although an ACK had overtaken the go-back
  uint64_t qp_errors = 0;            // requester QPs failed by a fatal NAK (rxe's error state)
  uint64_t qps_never_acked = 0;  // QPs that sent and never had a byte acknowledged
  std::string receive;  // the NICs' receive model in this run (FabricConfig::effective_receive)
  // transport irn (FabricConfig::transport): the BDP cap in force and the requesters' IRN
  // counters, summed (RcRequesterCounters).
  bool irn = false;
  uint32_t irn_bdp_packets = 0;
  uint64_t irn_sack_naks = 0;
  uint64_t irn_sacked_packets = 0;
  uint64_t irn_resends_skipped = 0;
  uint64_t irn_rto_low_timeouts = 0;
  // ooo-placement (0 otherwise): what the placement responders and selective requesters did.
  uint64_t placed_out_of_order = 0;
  uint64_t holes_naked = 0;
  uint64_t window_overflows = 0;
  uint64_t placement_duplicates = 0;
  uint64_t selective_retransmissions = 0;
  uint64_t reorder_max_depth = 0;
  uint64_t reorder_p99_depth = 0;
  uint64_t reorder_timeouts = 0;
  uint64_t reorder_held = 0;
  uint64_t reorder_resyncs = 0;  // go-back-N retransmissions that restarted a QP's sequence
  std::vector<std::pair<uint64_t, uint64_t>> reorder_depth_histogram;  // (depth, packets), > 0
  uint64_t pfc_pause_frames = 0;
  uint64_t pfc_watchdog_storms = 0;             // storms detected, all switches and priorities
  uint64_t pfc_watchdog_frames_suppressed = 0;  // PFC frames not sent to storming neighbours
  double pfc_paused_us = 0;
  double pfc_longest_pause_us = 0;
  std::vector<std::pair<double, uint64_t>> pfc_timeline;  // (t_us, paused ports)
  // How a PFC storm spreads and lasts, from every egress class of every switch port and NIC
  // uplink (EgressClassCounters): pause intervals, the ports and nodes ever paused, the
  // switches that sent a pause, and the storm from the first pause to the end of the last.
  uint64_t pfc_pause_intervals = 0;
  double pfc_mean_pause_us = 0;
  uint32_t pfc_ports_paused = 0;  // switch egress ports and NIC uplinks
  uint32_t pfc_nic_uplinks_paused = 0;
  double pfc_nic_paused_us = 0;    // of pfc_paused_us, the NIC uplinks' (hosts held back)
  uint32_t pfc_leaves_paused = 0;  // with at least one egress port paused
  uint32_t pfc_spines_paused = 0;
  uint32_t pfc_switches_pausing = 0;  // that sent at least one pause frame
  double pfc_first_pause_us = 0;
  double pfc_last_pause_end_us = 0;
  double pfc_storm_us = 0;  // last end - first start; 0 without a pause
  // The receiving NICs' PPCID readings, summed (absent, ok, bad_check, layout_mismatch,
  // unknown_path, wrong_uplink), the hosts that counted a layout mismatch, and every line the
  // NICs logged ("h3: ..."), in the order they logged them.
  std::map<std::string, uint64_t> ppcid;
  uint32_t ppcid_mismatch_hosts = 0;
  std::vector<std::string> nic_log;
  // Every packet the NICs took in from their uplinks, by what became of it: delivered to the
  // host, dropped under a named cause, held by the reorder engine at the end; `unaccounted` is
  // what is left and must be 0 (nothing vanishes silently).
  std::map<std::string, uint64_t> nic_rx;
  // Bytes acknowledged fabric-wide per sample interval, as a fraction of every host's line rate.
  std::vector<std::pair<double, double>> goodput_timeline;  // (t_us at the interval's end, fraction)
  // With a link-down event: the aggregate goodput over the samples before it (after warm-up),
  // its lowest sample after it, its mean over the second half of what follows (`after`), and
  // how long after the event it came back for good to 90% of the lower of `before` and `after`
  // (the end of the last interval below; 0: never below; -1: still below when the run ended).
  struct Failover {
    double event_us = 0;
    double before = 0;
    double min_after = 0;
    double after = 0;
    double recovery_us = -1;
  };
  std::optional<Failover> failover;
  uint64_t pfc_pool_bytes = 0;                            // each switch's shared lossless pool
  uint64_t pfc_pool_peak_bytes = 0;                       // the most any switch's pool held
  // The lossless PG whose headroom came nearest to full: its peak, and that over its size.
  uint64_t pfc_headroom_peak_bytes = 0;
  double pfc_headroom_peak_fraction = 0;
  std::map<std::string, uint64_t> drops;                  // by cause, fabric-wide
  uint64_t tcam_fallback_qps = 0;
  uint64_t flowlets_started = 0;
  // CONGA, every switch summed (mode conga; the report shows it then only).
  std::map<std::string, uint64_t> conga;
  std::map<std::string, uint64_t> reps;  // mode reps: the NICs' REPS counters, summed
  std::map<std::string, uint64_t> conweave;  // mode conweave: the leaves' counters, summed
  uint64_t control_publications = 0;  // weighted: bucket tables published, all switches
  // Weighted mode: per leaf, the buckets each uplink holds (null otherwise). Hosts with two or
  // more uplinks: how their bytes split between them (null otherwise). See fabric.cc.
  nlohmann::json buckets;
  nlohmann::json nic_split;
  uint64_t dead_link_frames = 0;        // frames that crossed a cable after it failed
  uint64_t dead_link_tx_after_1ms = 0;  // of which more than 1 ms after
  uint64_t packet_hops = 0;
  uint64_t node_events = 0;  // times a node was served
  double wall_s = 0;
  double hops_per_s = 0;
  double peak_rss_mb = 0;
  uint64_t mbufs_in_use_at_end = 0;  // after every node has freed what it held: must be 0
  // Where the memory went (JSON "memory", in MiB): the nodes' state by part, summed over every
  // node at the end of the run (SwitchNode / NicNode::memory_usage()), and the run's mbuf pools'
  // bytes. From the data structures, not the RSS: the same under --reproducible.
  MemoryUsage memory;
  uint64_t pool_bytes = 0;

  // Congestion control (FabricConfig::cc): what the switches marked, what the NICs sent and
  // took, and where the QPs' DCQCN rates were (JSON "cc").
  std::string cc_mode = "none";
  uint64_t ecn_marked = 0;       // CE marks set by every switch port
  uint64_t ce_received = 0;      // CE-marked data packets the receiving NICs saw
  uint64_t cnps_sent = 0;
  uint64_t cnps_suppressed = 0;  // within min_time_between_cnps of the QP's last
  uint64_t cnps_received = 0;
  // HPCC: INT records the switch ports pushed, and frames whose hop budget (E) or length (M)
  // left no room; the NICs' INT counters summed (nic_emu::NicCounters int_*, and int_malformed
  // drops).
  EgressIntCounters int_switch{};
  uint64_t int_inserted = 0, int_no_room = 0, int_stripped = 0, int_echoed = 0,
           int_acks_received = 0, int_malformed = 0;
  uint64_t rate_cuts = 0;
  uint64_t cc_qps = 0;              // QPs that sent under a reaction point
  uint64_t qps_at_min_rate = 0;     // of those, at rpg_min_rate when the run ended
  uint64_t qps_limited_at_end = 0;  // of those, below line rate when the run ended
  double mean_rate_fraction = 0;    // their time-mean rate over line rate, averaged over them
  // dctcp | timely | hpcc: the algorithm's figures (RateControl::figures) over the QPs live at
  // the end: their mean per QP, and their sum (for counters).
  uint64_t cc_figure_qps = 0;
  std::vector<std::pair<std::string, double>> cc_figure_sums;
  // The busiest lossless (class 3) switch queue over the window: its depth percentiles over
  // samples every interval_ns (JSON "queue_bytes"), and its ECN thresholds (0 without cc).
  struct QueueStats {
    std::string port;
    double mean = 0;
    uint64_t p50 = 0, p99 = 0, max = 0, samples = 0, interval_ns = 0, kmin = 0, kmax = 0;
  } queue;
  // The flows that sent, over the throughput window: their throughput's spread and Jain's
  // fairness index (JSON "flow_fairness").
  struct Fairness {
    uint64_t flows = 0;
    double jain = 0, min_gbps = 0, max_gbps = 0, mean_gbps = 0;
  } fairness;
  // With --timeseries / --plots: that queue and a few QPs' rates over the whole run.
  std::vector<double> cc_timeline_t_us;
  std::vector<uint32_t> cc_timeline_queue;
  std::vector<std::pair<std::string, std::vector<float>>> cc_timeline_rates;

  static constexpr size_t kMaxFctSamples = 20000;
};

nlohmann::json to_json(const RunResult& r);
// What makes a run not a result, one line each: a finite workload that ended with messages
// unfinished, drops on a lossless class. Empty when the run is a result.
// {"pools_mb", "tcam_mb", "routes_mb", "queues_mb", "rc_mb", "reorder_mb", "other_mb",
// "total_mb"}: MiB (2^20 bytes) to one decimal; total_mb is every byte (pools included)
// summed, then rounded.
nlohmann::json memory_json(const MemoryUsage& memory, uint64_t pool_bytes);

std::vector<std::string> run_warnings(const RunResult& r, const FabricConfig& config);
// Per mode: mean, stddev, min and max over the seeds of the headline numbers.
nlohmann::json summary_json(const std::vector<RunResult>& runs);
nlohmann::json config_json(const FabricConfig& c);
// The table on stdout: one row per mode, means over seeds with their spread (±stddev).
std::string format_table(const std::vector<RunResult>& runs, const FabricConfig& config);
// The lines above the table: the fabric (links per spine, oversubscription per tier), PFC, the
// events and, where the workload has one, the ideal ceiling of throughput_fraction.
// cdf: the CDF (with its mean when `cdf` is given), both loads and each mode's receive model.
std::string format_header(const FabricConfig& config, const FlowSizeCdf* cdf = nullptr);
// --csv: DIR/summary.csv (one row per mode: the table's figures with stddev), DIR/runs.csv (one
// row per run, failover columns with a link-down event) and DIR/flows.csv (one row per flow and
// run). `run` names a scenario's run (a column when not empty). Appends when `append`.
void write_csv(const std::string& dir, const std::vector<RunResult>& runs,
               const std::string& run, bool append);
// --timeseries: the run's rows (mode, seed, t_us, link, util, queue_bytes, paused), each after
// `prefix` (a scenario's run name and a comma, or nothing): every sampled fabric link, then
// with congestion control a few QPs' DCQCN rates as links "qp:SRC>DST/INDEX" (util: the rate
// over link_gbps).
void write_timeseries(std::ostream& out, const Fabric& f, const RunResult& r,
                      const std::string& prefix, double link_gbps);
// The payload share of a full frame at this MTU on the wire, and the ideal ceiling:
// min(1, capacity / offered load) x that share (permutation, alltoall, incast; else none).
double payload_share(uint32_t mtu);
// The RoCE frame carrying `payload` bytes: Eth, IPv4, UDP, BTH, RETH on the first packet, pad
// to 4, ICRC.
// Packets the network lost in run `r`: every drop cause but rxe's responder discarding what
// arrives after a gap (a receiver's choice, not a loss). What IRN's recovery is judged against.
uint64_t network_drops(const RunResult& r);
// packets_retransmitted / network_drops (0 with no drop).
double retransmitted_per_drop(const RunResult& r);

uint32_t roce_frame_bytes(uint32_t payload, bool reth);
std::optional<double> ideal_ceiling(const FabricConfig& config);

// Three tiers, spray: how the NICs' path ids split between the tiers. The leaf takes id %
// leaf_choices (through its bucket table: exactly that with a power-of-two uplink count), the
// spine id / leaf_choices; `spine_digits` of the spine's links are what one QP can reach at
// one spine (spine_choices when paths >= leaf_choices x spine_choices).
struct SpraySplit {
  uint32_t paths = 0;          // the path ids a NIC of the fabric's layout rotates through
  uint32_t leaf_choices = 0;   // a leaf's uplinks
  uint32_t spine_choices = 0;  // a spine's links up
  uint32_t spine_digits = 0;
};
SpraySplit spray_split(const FabricConfig& config);

}  // namespace spraynet::fabric
