// fabric_emu's discrete-event driver: the real SwitchNode and NicNode pipelines wired by cables
// (DESIGN.md "fabric_emu, the main job"), run as logical processes (LPs) in conservative rounds.
//
// LPs. A rack (the leaf with that index in every plane, and the hosts under it) is one LP, each
// spine another; the cables between them (leaf-spine) are the cut. The partition depends on the
// fabric alone, never on the thread count. The lookahead is the smallest propagation delay of a
// cut cable: a frame that starts on one at t reaches the far end at t + delay or later.
//
// Rounds. Each round takes T, the earliest thing due anywhere, and lets every LP run its own
// events before E = min(T + lookahead, the next fabric-wide event). Within an LP an event queue
// ordered by (time, sequence number) holds "node N is due at t". Serving a node at t: a switch
// runs its control loop tick (weighted mode) and its timers (poll: PFC frames, watchdog), then
// hands every frame its egress has carried to the far end by t straight to the node there
// (receive at t: the cable's delay and serialisation are the egress port's own); a NIC first
// transmits, then polls (reorder timeouts, the RC engine's packets, which it takes only as its
// uplinks drain). Every node touched is rescheduled at its next_event_ns. At the end of its
// round, an LP takes the frames that have started on its cut cables (they arrive at E or later)
// out of the delay lines and posts them, with their arrival times, to the far LP's mailbox,
// which that LP merges next round in a fixed order: (arrival time, source LP, source sequence).
// An all-reduce step that makes a rank under another rack send reaches it the same way, one
// lookahead later. So the run is the same on 1 thread or 8: the threads only decide who runs an
// LP's round, never what it does. Nothing else models the network: results come only from node
// counters and RC completions.
//
// Fabric-wide events (link down/up, BER, rate, background) and the sampler (per-link utilisation
// and queue every sample_ns, the PFC timeline) run between rounds at their exact times, before
// the node events of that time. A link going down also withdraws the spine from the other
// leaves' groups towards the leaf it lost (as BGP would), at once, and frees the frames on their
// way over it. Three tiers (topology.h): each super-spine is an LP too (the spine-super-spine
// cables are cut as well), and a super-spine link going down withdraws what can no longer reach
// a pod from the routes towards that pod, at the spines and at the leaves.
#pragma once

#include <rte_mbuf.h>
#include <spdlog/sinks/ringbuffer_sink.h>

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "control/control_loop.h"
#include "dataplane/wire/payload_store.h"
#include "fabric/kernel/conservative_kernel.h"
#include "fabric/kernel/due_queue.h"
#include "fabric/fabric_config.h"
#include "fabric/fabric_report.h"
#include "fabric/flow_path_delays.h"
#include "fabric/node_figures.h"
#include "fabric/kernel/rank_link.h"
#include "fabric/topology.h"
#include "fabric/workload.h"
#include "nic_emu/nic_node.h"
#include "switch_emu/switch_node.h"

namespace spraynet::fabric {

class FlowSizeCdf;

// One timeseries row: a fabric link direction over one sample interval.
struct LinkSample {
  uint64_t t_ns = 0;
  uint32_t link = 0;  // index into Fabric::link_names()
  float util = 0;
  uint64_t queue_bytes = 0;
  bool paused = false;
};

// What crosses from one LP to another (the kernel's message body): a frame that started on a
// cut cable (delivered to node's port at the message's time, its arrival), or a post for host
// `node` (frame null: an all-reduce step's, bytes > 0, or a one-shot flow's end, bytes 0).
struct FabricMessage {
  rte_mbuf* frame = nullptr;
  uint32_t node = 0;
  uint32_t cable_or_qp = 0;  // frame: the cable it crossed; post: the QP index
  uint32_t bytes = 0;        // post
  uint16_t port = 0;
};

// The fabric model: topology, nodes, cables, events, workloads, and what is measured of them,
// run by the conservative kernel (fabric/kernel/) as LPs.
class Fabric : private ConservativeKernel<FabricMessage>::Model {
 public:
  // Builds every node. Throws std::invalid_argument for configs the nodes refuse.
  // `segment_pool`: the small mbufs of shared payloads (config.payload "shared"); null: `pool`.
  Fabric(const FabricConfig& config, FabricMode mode, uint64_t seed, rte_mempool* pool,
         const FlowSizeCdf* cdf, rte_mempool* segment_pool = nullptr);
  ~Fabric();
  Fabric(const Fabric&) = delete;
  Fabric& operator=(const Fabric&) = delete;

  // Runs to the end (duration, or every message done / the time limit), then frees every mbuf.
  // `progress` (may be empty) is called about every 0.2 s of wall time with (virtual ns, hops).
  RunResult run(const std::function<void(uint64_t, uint64_t)>& progress = {});

  // Threads that run the logical processes (1: the caller's thread alone). The results do not
  // depend on it. Call before run().
  void set_threads(uint32_t n) { threads_ = n == 0 ? 1 : n; }
  // Shares the LPs out among the ranks of `link` (fabric_emu --mpi; null: this process runs them
  // all). Every rank builds the whole fabric and runs its own LPs; frames that cross between
  // ranks go through RankLink, and every rank ends with the same RunResult, the one a single
  // process gives. Call before run().
  void set_ranks(RankLink* link) { ranks_ = link; }
  // Called between rounds, when no thread touches the pools (the driver grows them there).
  void set_between_rounds(std::function<void()> hook) {
    kernel_->set_between_rounds(std::move(hook));
  }

  // Kept when record_timeseries: the fabric links' samples (leaf->spine and spine->leaf).
  void record_timeseries(bool on) { record_timeseries_ = on; }
  // Kept when record_flows (on by default): RunResult::flows, one record per flow for flows.csv
  // (about 200 B a flow; a 0.1 s cdf run has a million). Off, the per-flow figures that feed the
  // JSON (fairness, slowdown) are still computed.
  void record_flows(bool on) { record_flows_ = on; }
  const std::vector<LinkSample>& timeseries() const { return samples_; }
  const std::vector<std::string>& link_names() const { return link_names_; }
  const Topology& topology() const { return topology_; }
  uint64_t now_ns() const { return now_; }
  uint64_t rounds() const { return kernel_->rounds(); }  // the rounds run() ran

 private:
  struct Peer {
    uint32_t node = UINT32_MAX;
    uint16_t port = 0;
    uint32_t cable = 0;
  };
  struct Node {
    std::unique_ptr<switch_emu::SwitchNode> sw;
    std::unique_ptr<nic_emu::NicNode> nic;
    std::unique_ptr<control::ControlLoop> control;  // weighted mode; NICs: weighted spraying
    // Weighted mode: every group's weights summed over the ticks in the throughput window.
    std::vector<std::vector<double>> weight_sums;
    std::vector<std::vector<double>> util_sums;  // the link-state utilisation each member read
    uint64_t weight_ticks = 0;
    std::vector<Peer> peers;                        // by port
    uint64_t scheduled = UINT64_MAX;
    bool dirty = false;
  };
  // A fabric link direction the sampler watches: node's egress port.
  struct Watched {
    uint32_t node;
    uint16_t port;
    uint64_t last_tx_bytes = 0;
    uint64_t window_tx_bytes = 0;  // at the window start
    bool uplink = false;           // leaf -> spine, spine -> super-spine
    uint8_t tier = 1;              // 1: leaf-spine, 2: spine-super-spine
    double gbps = 0;               // its line rate
  };

  // Background load on one port: the share of its line rate taken by traffic outside the
  // experiment since since_ns, and the wire bytes that traffic carried before (cumulative).
  struct Background {
    double fraction = 0;
    double line_gbps = 0;  // 0: the port never had background load
    uint64_t since_ns = 0;
    double wire_bytes = 0;
  };
  void set_background(uint32_t node, uint16_t port, double fraction);
  // What a port's counters show on real hardware, where background traffic crosses them too.
  void add_background(uint32_t node, uint16_t port, uint64_t now_ns,
                      control::PortSample& sample) const;
  void add_nic_control(uint32_t host);

  // Every completed message's size and slowdown (fabric/slowdown.h): its FCT over the FCT
  // alone on an idle fabric over its own path (flow_ideal_fct_ns), computed as it completes.
  using SizedFct = SlowdownSample;
  // A message posted during the run (an all-reduce step): its flow, its rank among the flow's
  // posts made during the run, when and how big. Unfinished at the end when the flow completed
  // fewer messages than its initial posts and this rank.
  struct DynamicPost {
    uint32_t flow = 0;
    uint32_t bytes = 0;
    uint64_t seq = 0;
    uint64_t at_ns = 0;
  };
  using Kernel = ConservativeKernel<FabricMessage>;
  // The model's side of an LP (the kernel keeps its clock and mail).
  struct Lp {
    uint32_t index = 0;
    std::vector<std::pair<uint32_t, uint16_t>> cut_ports;  // switch ports on cut cables
    DueQueue queue;
    std::vector<uint32_t> touched;    // nodes that received frames while serving
    std::vector<uint16_t> due_ports;  // serve(): the switch ports with frames due (scratch)
    std::vector<MessageCompletion> completions;  // scratch
    std::vector<Post> due_posts;                 // scratch
    // Its share of the run's figures, merged in LP order at the end.
    std::vector<uint64_t> fct_ns;
    std::vector<SizedFct> sized_fct;  // in the slowdown window
    uint64_t excluded_warmup = 0;     // completed messages that started before it
    std::vector<DynamicPost> dynamic_posts;
    uint64_t completed = 0;
    uint64_t last_completion_ns = 0;
    uint64_t hops = 0;
    uint64_t serves = 0;
    uint64_t dead_link_frames = 0;
    uint64_t dead_link_frames_late = 0;
    uint64_t checksum_filter_drops = 0;
  };
  void partition();
  // Ranks (set_ranks): which rank runs each LP.
  bool distributed() const { return kernel_->distributed(); }
  bool mine(uint32_t lp) const { return kernel_->mine(lp); }
  bool node_mine(uint32_t id) const { return mine(lp_of_[id]); }
  uint64_t now_of(const Lp& lp) const { return kernel_->now(lp.index); }
  // The kernel's Model: an LP's own events, its mail, what leaves it, messages between ranks.
  uint64_t next_event(uint32_t lp) override;
  void serve_next(uint32_t lp) override;
  void deliver_due(uint32_t lp) override { deliver_mail(*lps_[lp]); }
  void end_round(uint32_t lp) override { take_cut_frames(*lps_[lp]); }
  void pack(ByteWriter& w, const FabricMessage& m) override;
  FabricMessage unpack(ByteReader& r) override;
  void discard(FabricMessage& m) override;
  // Item i's value, read where node_of(i) runs, on every rank (items in order).
  template <class T, class NodeOf, class Read>
  std::vector<T> gather(size_t n, NodeOf node_of, Read read);
  // The same for any T: put(w, value) and get(r) carry it between ranks.
  template <class T, class NodeOf, class Read, class Put, class Get>
  std::vector<T> gather_with(size_t n, NodeOf node_of, Read read, Put put, Get get);
  // At the end: the LPs' own figures (completions, hops, log lines) from the ranks that ran them.
  void gather_lp_figures();
  std::vector<NodeFigures> gather_node_figures(uint64_t cc_at_ns);
  // The frames that started on the LP's cut cables, sent to the LPs at their far ends.
  void take_cut_frames(Lp& lp);
  void send(Lp& from, uint32_t to, uint64_t t, const FabricMessage& m) {
    kernel_->send(from.index, to, t, m);
  }
  void deliver_mail(Lp& lp);
  void free_mail();
  // Frees the frames on their way over a cable that went down at now_ (arriving after it).
  void drop_mail_on_cable(uint32_t cable);
  void settle(Lp& lp);
  void serve(Lp& lp, uint32_t id);
  void deliver(Lp& lp, const Peer& to, rte_mbuf** frames, uint16_t n);
  void schedule(Lp& lp, uint32_t id, bool served);
  void schedule_at(uint32_t id, uint64_t now_ns);  // between rounds
  uint64_t node_next(uint32_t id, uint64_t now_ns) const;
  void apply_event(const FabricEvent& e);
  // Frees the frames a filtered cable drops; returns how many are left (compacted in place).
  uint16_t filter_frames(Lp& lp, rte_mbuf** frames, uint16_t n);
  void set_cable_up(uint32_t cable, bool up);
  void withdraw(uint32_t plane, uint32_t leaf, uint32_t spine, bool withdrawn);
  void withdraw_across_pods(uint32_t plane);
  void sample();
  // Congestion control's view, every cc_sample_ns_: each switch port's lossless-class queue
  // depth (the busiest one's percentiles go in the JSON) and a few QPs' DCQCN rates. Reads only,
  // so the run is the same with or without it.
  void sample_cc();
  void collect_cc(RunResult& r);
  void take_completions(Lp& lp, uint32_t host);
  void post(const Post& p);
  // Posts whose time has come at `host` (cdf: a flow starts, its QP is made).
  void post_arrived(uint32_t host, uint64_t now_ns);
  void retire_receiver(Lp& lp, const QpFlow& f);
  // cdf: per host, its next post and the end of its posts in plan_.initial_posts().
  std::vector<size_t> post_next_, post_end_;
  // A post made during the run (the next all-reduce step), recorded for the unfinished count.
  void post_dynamic(Lp& lp, const Post& p);
  void install_spray_rules();
  void snapshot_window_start();
  RunResult collect(double wall_s);
  std::vector<NodeFigures> figures_;  // collect()'s view of every node
  std::map<uint32_t, nlohmann::json> bucket_entries_;            // by leaf node (weighted mode)
  std::map<uint32_t, std::vector<std::string>> remote_nic_log_;  // other ranks' hosts' lines

  const FabricConfig& config_;
  uint32_t threads_ = 1;
  RankLink* ranks_ = nullptr;
  FabricMode mode_;
  uint64_t seed_;
  rte_mempool* pool_;
  rte_mempool* segment_pool_;
  const FlowSizeCdf* cdf_;
  Topology topology_;
  WorkloadPlan plan_;
  // Before nodes_: the payloads their packets carry outlive them (config_.payload "shared").
  PayloadStore payload_store_;
  std::vector<Node> nodes_;
  std::vector<std::unique_ptr<Lp>> lps_;
  std::unique_ptr<Kernel> kernel_;  // made by partition(), with lps_
  std::vector<uint32_t> lp_of_;     // per node
  uint64_t lookahead_ns_ = UINT64_MAX;
  uint64_t link_down_in_flight_ = 0;  // frames on their way over a cable when it went down
  uint64_t now_ = 0;  // between rounds: the fabric-wide time; at the end, where the run stopped
  std::vector<FabricEvent> events_;  // sorted by time
  size_t next_event_ = 0;
  uint64_t next_sample_ns_ = 0;
  uint64_t next_cc_sample_ns_ = 0;
  uint64_t cc_sample_ns_ = 0;
  struct QueueSeries {
    uint32_t node = 0;
    uint16_t port = 0;
    std::vector<uint32_t> bytes;  // one per cc sample
  };
  std::vector<QueueSeries> queue_series_;  // every switch egress port
  std::vector<uint64_t> cc_sample_t_ns_;
  struct RateSeries {
    uint32_t host = 0;
    uint32_t qp_index = 0;
    std::string name;
    std::vector<float> gbps;
  };
  std::vector<RateSeries> rate_series_;
  // The flows' fairness window: from fair_start_ns_ (the warm-up) to the end of the run.
  void snapshot_flows();
  void set_carried_load(RunResult& r, uint64_t acked_total) const;
  uint64_t fair_start_ns_ = 0;
  std::vector<uint64_t> flow_window_acked_;  // per flow: its bytes acknowledged at its start  // the first few flows' sending QPs
  uint64_t hops_ = 0;

  std::vector<Watched> watched_;
  std::vector<std::string> link_names_;
  std::vector<LinkSample> samples_;
  bool record_timeseries_ = false;
  bool record_flows_ = true;
  std::vector<std::pair<double, uint64_t>> pfc_timeline_;
  std::vector<std::pair<double, double>> goodput_timeline_;
  uint64_t last_sample_acked_bytes_ = 0;
  std::vector<uint64_t> down_since_ns_;  // per cable: when it went down (UINT64_MAX: up)
  std::vector<std::vector<Background>> background_;  // per node, per port
  double background_wire_bytes(uint32_t node, uint16_t port, uint64_t now_ns) const;
  // Hosts with more than one uplink: the split of their bytes between them (nic_split).
  std::vector<std::pair<uint32_t, uint16_t>> host_uplinks_;  // every (host, uplink), in order
  std::vector<std::vector<uint64_t>> nic_tx_last_;    // per host, per uplink: at the last sample
  std::vector<std::vector<uint64_t>> nic_tx_window_;  // at the window start
  std::vector<std::vector<double>> nic_bg_last_;      // background wire bytes at the last sample
  double split_error_sum_ = 0;
  uint64_t split_error_n_ = 0;
  void sample_nic_split(double dt_ns);
  nlohmann::json bucket_report();
  nlohmann::json bucket_entry(uint32_t switch_index) const;  // one leaf's, where it runs
  nlohmann::json nic_split_report() const;
  // Per cable: a filter drops RoCEv2 packets with a non-zero UDP checksum crossing it (pitfall
  // 5's security group), counted in checksum_filter_drops_.
  std::vector<uint8_t> cable_filter_;
  uint64_t checksum_filter_drops_ = 0;
  // What the NICs log (a layout mismatch, a bad PPCID check), "hN: message", for the report.
  // One sink per host, read in host order: each is written by its LP's thread alone.
  std::vector<std::shared_ptr<spdlog::sinks::ringbuffer_sink_st>> nic_log_;

  // Completions and what they are worth (the LPs', merged at the end of the run).
  std::vector<uint64_t> fct_ns_;
  std::vector<SizedFct> sized_fct_;
  uint64_t excluded_warmup_ = 0;
  std::vector<DynamicPost> dynamic_posts_;
  struct FlowFct {
    uint64_t messages = 0, bytes = 0;
    double fct_sum_ns = 0, fct_max_ns = 0, slowdown_sum = 0;
    uint64_t first_start_ns = UINT64_MAX;  // its first completed message's post
    uint64_t last_end_ns = 0;              // its last completion
    uint64_t dynamic_posts = 0;            // posts made during the run (post_dynamic)
  };
  std::vector<FlowFct> flow_fct_;  // per flow
  // The flow (index into plan_.flows()) host's QP `qp_index` sends, or -1.
  int32_t flow_of(uint32_t host, uint32_t qp_index) const {
    return path_delays_->flow_sent(host, qp_index);
  }
  // The FCT of `bytes` from host src to host dst alone on an idle fabric, over the fastest path
  // between them (fabric/slowdown.h ideal_fct_ns): the tables below, built once.
  double ideal_fct_ns(uint64_t bytes, uint32_t src, uint32_t dst) const;
  // The same over the flow's own path each way (path_delays_; docs/fabric_emu.md "FCT
  // slowdown"): what its packets met when alone, the fastest path's where none came back.
  double flow_ideal_fct_ns(uint64_t bytes, size_t flow) const;
  // Its parts: the message through the hops at their rates without any cable delay, and the
  // least cable delay one way between the pair.
  double serialisation_fct_ns(uint64_t bytes, uint32_t src, uint32_t dst) const;
  // The hops from src to dst at their rates and lanes, no delays; returns how many.
  size_t rate_hops(uint32_t src, uint32_t dst, std::array<PathHop, 6>& hops) const;
  uint64_t pair_delay_ns(uint32_t src, uint32_t dst) const;
  std::unique_ptr<FlowPathDelays> path_delays_;
  // Builds the tables below; returns every cable's delay (its lower end's link), by cable.
  std::vector<uint32_t> build_ideal_paths();
  std::vector<std::vector<uint64_t>> host_cable_delay_;  // per host, per plane (its uplink)
  // Per plane, per (source leaf, destination leaf), global numbers: the fastest route's fabric
  // cables' delays summed (0 under one leaf).
  std::vector<std::vector<uint64_t>> leaf_pair_delay_;
  double host_gbps_ = 0, leaf_spine_gbps_ = 0, spine_super_gbps_ = 0;
  // Parallel links a QP's packets may share (spray: every plane and uplink; drill: the uplinks).
  uint32_t host_lanes_ = 1, leaf_spine_lanes_ = 1, spine_super_lanes_ = 1;
  // Every message unfinished when the run stopped: fn(flow, post time, bytes).
  template <class Fn>
  void for_each_unfinished(uint64_t end_ns, Fn fn) const;
  void collect_slowdown(RunResult& r);
  // Per flow: the posts it had at the start (plan_.initial_posts()), and the first's index.
  std::vector<uint32_t> flow_initial_posts_;
  std::vector<int64_t> flow_first_post_;
  // The flow's one message when it has exactly one (cdf, alltoall, incast), its post time (0
  // for a message the engine sends by itself); after collect_slowdown.
  std::optional<Post> single_message(size_t flow) const;
  // The requester spec of flow f, from its sender's engine (which holds the only copy).
  const RcQpSpec& sender_spec(const QpFlow& f) const;
  uint32_t path_hops(uint32_t src, uint32_t dst) const;
  uint64_t completed_ = 0;
  uint64_t done_ns_ = 0;
  uint64_t window_start_ns_ = 0;
  bool window_started_ = false;
  uint64_t window_acked_bytes_ = 0;
  uint64_t tcam_fallback_qps_ = 0;
  uint64_t dead_link_frames_ = 0;
  uint64_t dead_link_frames_late_ = 0;
  uint64_t serves_ = 0;  // node events served (also paces the progress callback)
};

}  // namespace spraynet::fabric
