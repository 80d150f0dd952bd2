// Measurement at the end: the run's result (RunResult) from node counters, completions and
// the samplers' series.
#include "fabric/fabric.h"

#include <sys/resource.h>

#include <algorithm>

#include <cmath>
#include <map>
#include <string_view>

#include "fabric/fabric_detail.h"

namespace spraynet::fabric {

using detail::kNever;
using detail::percentile;

RunResult Fabric::collect(double wall_s) {
  RunResult r;
  r.mode = std::string(to_string(mode_));
  r.workload = std::string(to_string(config_.workload));
  r.seed = seed_;
  r.receive = config_.effective_receive(mode_);
  const bool finite = plan_.finite();
  // Finite workloads end at the last completion (or where the time limit stopped them);
  // permutation runs the whole duration.
  r.virtual_ns = !finite ? std::max(now_, config_.duration_ns) : done_ns_ != 0 ? done_ns_ : now_;
  r.window_start_ns = window_start_ns_;
  r.window_end_ns = r.virtual_ns;
  r.completed = !finite || done_ns_ != 0;
  r.messages_completed = completed_;
  r.messages_expected = finite ? plan_.messages_total() : 0;

  const double host_bps = config_.link_gbps * 1e9 * config_.planes;
  const double window_s = static_cast<double>(r.window_end_ns - r.window_start_ns) * 1e-9;
  // Every node's counters, from the rank that ran it: the rest reads figures_, never nodes_.
  figures_ = gather_node_figures(r.virtual_ns);

  RcRequesterCounters req;
  RcResponderCounters resp;
  RcPlacementResponderCounters place;
  std::array<uint64_t, ReorderEngine::kDepthBins> depth{};
  uint64_t nic_no_uplink = 0, nic_parse = 0, host_filter = 0;
  nic_emu::PpcidCounters ppcid;
  uint64_t rx = 0, delivered = 0, pfc_in = 0, mac_control = 0, dup_freed = 0, held = 0;
  for (const NodeFigures& f : figures_) {
    if (f.is_switch) continue;
    ppcid += f.ppcid;
    r.ppcid_mismatch_hosts += f.ppcid.layout_mismatch > 0;
    for (const NodeFigures::Port& u : f.ports) rx += u.rx_packets;
    delivered += f.nic_counters.delivered;
    pfc_in += f.nic_counters.pfc_received;
    mac_control += f.nic_drops.mac_control_not_pfc + f.nic_drops.pfc_malformed;
    host_filter += f.nic_drops.host_checksum_filter;
    if (f.has_reorder) {
      dup_freed += f.reorder.duplicates_of_held;
      held += f.reorder_held;
    }
    req += f.requester_totals;
    r.qps_never_acked += f.qps_never_acked;
    resp += f.responder_totals;
    place += f.placement_totals;
    if (f.has_reorder) {
      for (size_t i = 0; i < f.reorder_depth.size() && i < depth.size(); ++i) {
        depth[i] += f.reorder_depth[i];
      }
      r.reorder_timeouts += f.reorder.gap_timeouts;
      r.reorder_held += f.reorder.released_after_hold;
      r.reorder_resyncs += f.reorder.resyncs;
    }
    nic_no_uplink += f.nic_drops.no_uplink;
    for (uint64_t v : f.nic_drops.parse) nic_parse += v;
  }
  r.ppcid.clear();
  ppcid.for_each([&r](std::string_view name, uint64_t v) { r.ppcid[std::string(name)] = v; });
  for (uint32_t h = 0; h < nic_log_.size(); ++h) {
    const auto remote = remote_nic_log_.find(h);
    for (std::string line :
         remote != remote_nic_log_.end() ? remote->second : nic_log_[h]->last_formatted()) {
      while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
      r.nic_log.push_back(line);
    }
  }
  // Every packet in from an uplink: a PFC frame honoured, another MAC control frame dropped, a
  // parse drop (the RC engine's packets always parse, so these are RX's), delivered, dropped by
  // a host-side filter, a duplicate of a held PSN freed, or still held by the reorder engine.
  const uint64_t accounted =
      pfc_in + mac_control + nic_parse + delivered + host_filter + dup_freed + held;
  r.nic_rx = {{"received", rx},
              {"delivered", delivered},
              {"pfc_frames", pfc_in},
              {"mac_control_dropped", mac_control},
              {"parse_dropped", nic_parse},
              {"host_checksum_filter", host_filter},
              {"reorder_duplicates_freed", dup_freed},
              {"reorder_held_at_end", held},
              {"unaccounted", rx >= accounted ? rx - accounted : 0},
              {"overcounted", accounted > rx ? accounted - rx : 0}};
  const double acked = static_cast<double>(req.bytes_acked - window_acked_bytes_);
  if (window_s > 0 && plan_.senders() > 0) {
    r.throughput_fraction = acked * 8.0 / (window_s * host_bps * plan_.senders());
  }
  if (config_.workload == Workload::kIncast && window_s > 0) {
    // The one receiver's share of its own line rate: what an incast is judged by.
    r.receiver_goodput_fraction = acked * 8.0 / (window_s * host_bps);
  }
  if (config_.workload == Workload::kAllreduce && r.completed && r.virtual_ns > 0) {
    const double n = plan_.ranks();
    r.algbw_gbps =
        static_cast<double>(plan_.allreduce_bytes()) * 8.0 / static_cast<double>(r.virtual_ns);
    r.busbw_gbps = r.algbw_gbps * 2.0 * (n - 1) / n;
    r.collective_bw_fraction = r.busbw_gbps * 1e9 / host_bps;
  }
  r.messages_posted = finite ? plan_.messages_total() : req.messages_started;
  r.packets_sent = req.packets_sent;
  r.packets_retransmitted = req.packets_retransmitted;
  r.retx_rate =
      req.packets_sent == 0 ? 0 : static_cast<double>(req.packets_retransmitted) / req.packets_sent;
  r.naks = req.naks_received;
  r.timeouts = req.timeouts;
  r.retransmitted_acked = req.retransmitted_acked;
  r.qp_errors = req.qp_errors;
  r.placed_out_of_order = place.placed_out_of_order;
  r.holes_naked = place.holes_naked;
  r.window_overflows = place.window_overflows;
  r.placement_duplicates = place.duplicates;
  r.selective_retransmissions = req.selective_retransmissions;
  r.irn = config_.transport == "irn";
  if (r.irn) {
    r.irn_bdp_packets = config_.irn_bdp();
    r.irn_sack_naks = req.sack_naks;
    r.irn_sacked_packets = req.sacked_packets;
    r.irn_resends_skipped = req.sack_resends_skipped;
    r.irn_rto_low_timeouts = req.rto_low_timeouts;
  }

  uint64_t depth_total = 0;
  for (size_t i = 0; i < depth.size(); ++i) {
    depth_total += depth[i];
    if (depth[i] > 0) {
      r.reorder_max_depth = i;
      r.reorder_depth_histogram.emplace_back(i, depth[i]);
    }
  }
  if (depth_total > 0) {
    const uint64_t want = static_cast<uint64_t>(std::ceil(0.99 * static_cast<double>(depth_total)));
    uint64_t seen = 0;
    for (size_t i = 0; i < depth.size(); ++i) {
      seen += depth[i];
      if (seen >= want) {
        r.reorder_p99_depth = i;
        break;
      }
    }
  }

  // Links: the leaf-spine tier's in the two-tier fields, and with three tiers each tier's too.
  struct Spread {
    double mean = 0, max = 0, imbalance = 0;
  };
  const auto spread = [](const std::vector<double>& v) {
    Spread s;
    if (v.empty()) return s;
    double sum = 0, mn = 1e300;
    for (double u : v) {
      sum += u;
      s.max = std::max(s.max, u);
      mn = std::min(mn, u);
    }
    s.mean = sum / static_cast<double>(v.size());
    s.imbalance = s.mean > 0 ? (s.max - mn) / s.mean : 0;
    return s;
  };
  const uint8_t tier_count = config_.tiers == 3 ? 2 : 1;
  for (uint8_t tier = 1; tier <= tier_count; ++tier) {
    std::vector<double> up, down;
    RunResult::TierUtil t;
    t.name = tier == 1 ? "leaf-spine" : "spine-super";
    for (uint32_t i = 0; i < watched_.size(); ++i) {
      const Watched& w = watched_[i];
      if (w.tier != tier) continue;
      const uint64_t tx = figures_[w.node].ports[w.port].tx_bytes - w.window_tx_bytes;
      const double u = window_s > 0 ? static_cast<double>(tx) * 8.0 / (window_s * w.gbps * 1e9) : 0;
      if (!w.uplink) {
        down.push_back(u);
        continue;
      }
      up.push_back(u);
      if (tier == 1) {
        r.uplink_util.push_back(u);
        r.uplink_names.push_back(link_names_[i]);
      }
      if (tier_count > 1) t.up_by_link.emplace_back(link_names_[i], u);
    }
    const Spread su = spread(up), sd = spread(down);
    t.up_mean = su.mean;
    t.up_max = su.max;
    t.up_imbalance = su.imbalance;
    t.down_mean = sd.mean;
    t.down_max = sd.max;
    t.down_imbalance = sd.imbalance;
    t.links = static_cast<uint32_t>(up.size() + down.size());
    if ((su.mean + sd.mean) / 2 > 0.2) {
      for (const std::vector<double>* v : {&up, &down}) {
        for (double u : *v) t.idle_links += u < 0.05;
      }
    }
    if (tier == 1) {
      r.uplink_util_mean = su.mean;
      r.uplink_util_max = su.max;
      r.uplink_util_imbalance = su.imbalance;
      r.downlink_util_mean = sd.mean;
      r.downlink_util_max = sd.max;
      r.downlink_util_imbalance = sd.imbalance;
      r.fabric_links = t.links;
      r.idle_links = t.idle_links;
    }
    if (tier_count > 1) r.tiers.push_back(std::move(t));
  }

  // PFC and drops.
  uint64_t queue_full = 0, link_down = 0, watchdog = 0, bit_error = 0, loss = 0, headroom = 0;
  uint64_t paused_ns = 0, longest_ns = 0;
  uint64_t no_route = 0, no_eligible = 0, ttl = 0, sw_parse = 0, tcam_drop = 0;
  // The switches' other causes (switch_node.h's list), each under its own name, so that a cause
  // the lines below do not name is still in the table. Not there: the ones named below, MAC
  // control frames (consumed, not data), mirror copies not made (the packet went on),
  // egress_refused (the egress counters give those by cause) and what a switch frees when the
  // run stops (not a drop in flight; the run reports it unfinished).
  static constexpr std::string_view kNamed[] = {"no_route",
                                                "no_eligible_port",
                                                "ttl_expired",
                                                "tcam_drop",
                                                "pfc_watchdog_ingress",
                                                "mac_control_not_pfc",
                                                "mirror_no_mbuf",
                                                "egress_refused",
                                                "lane_handoff_unsent",
                                                "reorder_held_at_exit"};
  std::map<std::string, uint64_t> switch_other;
  uint64_t watchdog_ingress = 0;
  uint64_t first_pause = kNever, last_pause_end = 0;
  uint64_t nic_paused_ns = 0;  // of paused_ns, the hosts' NIC uplinks: the storm reaching hosts
  // Returns whether the port was ever paused.
  // Lossless classes: the switches' PFC priorities (the class is the priority here), which
  // the NICs honour on their uplinks too. A buffer drop there is what PFC exists to prevent.
  const uint8_t lossless = config_.pfc ? control::PfcSettings{}.priorities : 0;
  const auto add_egress = [&](const NodeFigures::Port& port) {
    bool ever = false;
    for (uint8_t tc = 0; tc < EgressPort::kClasses; ++tc) {
      const EgressClassCounters& c = port.classes[tc];
      if ((lossless >> tc) & 1) {
        r.lossless_drops_queue_full += c.drops_queue_full;
        r.lossless_drops_headroom += c.drops_headroom_overflow;
      }
      queue_full += c.drops_queue_full;
      link_down += c.drops_link_down;
      watchdog += c.drops_watchdog;
      headroom += c.drops_headroom_overflow;
      bit_error += c.drops_bit_error;
      loss += c.drops_loss;
      paused_ns += c.paused_ns;
      longest_ns = std::max(longest_ns, c.longest_pause_ns);
      r.pfc_pause_intervals += c.pause_intervals;
      if (c.pause_intervals > 0) {
        ever = true;
        first_pause = std::min(first_pause, c.first_pause_ns);
        last_pause_end = std::max(last_pause_end, c.last_pause_end_ns);
      }
    }
    return ever;
  };
  for (uint32_t id = 0; id < figures_.size(); ++id) {
    const NodeFigures& f = figures_[id];
    if (f.is_switch) {
      bool sw_paused = false;
      for (const NodeFigures::Port& port : f.ports) {
        const bool ever = add_egress(port);
        r.pfc_ports_paused += ever;
        sw_paused = sw_paused || ever;
      }
      const size_t si = id - topology_.hosts().size();
      if (sw_paused) ++(topology_.switches()[si].leaf ? r.pfc_leaves_paused : r.pfc_spines_paused);
      r.pfc_switches_pausing += f.sw_counters.pfc_frames_sent > 0;
      r.pfc_pause_frames += f.sw_counters.pfc_frames_sent;
      if (f.has_pfc) {
        // The fullest switch, and the fullest headroom against its size: "never over" at a look.
        r.pfc_pool_peak_bytes = std::max(r.pfc_pool_peak_bytes, f.pfc_pool_peak_bytes);
        if (f.pfc_headroom_peak_fraction > r.pfc_headroom_peak_fraction) {
          r.pfc_headroom_peak_fraction = f.pfc_headroom_peak_fraction;
          r.pfc_headroom_peak_bytes = f.pfc_headroom_peak_bytes;
        }
      }
      no_route += f.sw_drops.no_route;
      no_eligible += f.sw_drops.no_eligible_port;
      ttl += f.sw_drops.ttl_expired;
      tcam_drop += f.sw_drops.tcam_drop;
      f.sw_drops.for_each([&](std::string_view name, uint64_t v) {
        if (name.starts_with("parse_") || std::ranges::find(kNamed, name) != std::end(kNamed)) {
          return;
        }
        switch_other[std::string(name)] += v;
      });
      watchdog_ingress += f.sw_drops.pfc_watchdog_ingress;
      r.pfc_watchdog_storms += f.pfc_watchdog_storms;
      r.pfc_watchdog_frames_suppressed += f.pfc_watchdog_frames_suppressed;
      for (uint64_t v : f.sw_drops.parse) sw_parse += v;
      r.control_publications += f.control_publications;
      r.flowlets_started += f.flowlets_started;
      if (mode_ == FabricMode::kConga) {
        f.conga.for_each([&](std::string_view name, uint64_t v) { r.conga[std::string(name)] += v; });
        r.conga["feedback_received"] += f.conga_tables.feedback_received;
        r.conga["from_leaf_updates"] += f.conga_tables.arrivals;
        r.conga["bad_leaf"] += f.conga_tables.bad_leaf;
        r.conga["table_entries_at_end"] += f.conga_entries;
      }
      if (mode_ == FabricMode::kConweave) {
        const ConweaveTxCounters& t = f.conweave_tx;
        const ConweaveRxCounters& x = f.conweave_rx;
        for (const auto& [name, v] : std::initializer_list<std::pair<const char*, uint64_t>>{
                 {"epochs", t.epochs}, {"rtt_timeouts", t.timeouts}, {"expiries", t.expiries},
                 {"reroutes", t.reroutes}, {"no_good_path", t.no_good_path},
                 {"timely_replies", t.timely_replies}, {"late_replies", t.late_replies},
                 {"clears_received", t.clears}, {"notifies_received", t.notifies},
                 {"held", x.held}, {"voq_full", x.voq_full},
                 {"previous_epoch_packets", x.previous_epoch},
                 {"released_by_tail", x.flushes_by_tail},
                 {"released_by_timeout", x.flushes_by_timeout},
                 {"late_after_timeout", x.late_after_timeout},
                 {"rtt_replies_sent", x.rtt_replies}, {"clears_sent", x.clears},
                 {"notifies_sent", x.notifies},
                 {"control_no_mbuf", f.sw_counters.conweave_control_no_mbuf}}) {
          r.conweave[name] += v;
        }
        r.conweave["max_queue_depth"] =
            std::max(r.conweave["max_queue_depth"], x.max_queue_depth);
      }
    } else {
      for (const NodeFigures::Port& port : f.ports) {
        const uint64_t before = paused_ns;
        const bool ever = add_egress(port);
        nic_paused_ns += paused_ns - before;
        r.pfc_ports_paused += ever;
        r.pfc_nic_uplinks_paused += ever;
      }
      if (mode_ == FabricMode::kReps) {
        const RepsCounters& k = f.reps;
        for (const auto& [name, v] :
             {std::pair<const char*, uint64_t>{"reused", k.reused}, {"drawn", k.drawn},
              {"explored", k.explored}, {"frozen_sent", k.frozen_sent}, {"recycled", k.recycled},
              {"marked", k.marked}, {"marked_not_recycled", k.marked_not_recycled},
              {"freezes", k.freezes}}) {
          r.reps[name] += v;
        }
      }
    }
  }
  r.pfc_nic_paused_us = static_cast<double>(nic_paused_ns) / 1000.0;
  if (r.pfc_pause_intervals > 0) {
    r.pfc_mean_pause_us =
        static_cast<double>(paused_ns) / 1000.0 / static_cast<double>(r.pfc_pause_intervals);
    r.pfc_first_pause_us = static_cast<double>(first_pause) / 1000.0;
    r.pfc_last_pause_end_us = static_cast<double>(last_pause_end) / 1000.0;
    r.pfc_storm_us = r.pfc_last_pause_end_us - r.pfc_first_pause_us;
  }
  r.pfc_paused_us = static_cast<double>(paused_ns) / 1000.0;
  r.pfc_longest_pause_us = static_cast<double>(longest_ns) / 1000.0;
  r.pfc_timeline = pfc_timeline_;
  r.pfc_pool_bytes = config_.pfc ? config_.pfc_pool_bytes : 0;
  r.goodput_timeline = goodput_timeline_;
  if (config_.workload == Workload::kCdf) set_carried_load(r, req.bytes_acked);
  for (const FabricEvent& e : config_.events) {
    if (e.kind != FabricEvent::Kind::kLinkDown) continue;
    RunResult::Failover f;
    f.event_us = static_cast<double>(e.at_ns) / 1000.0;
    const double warm_us = static_cast<double>(config_.warmup()) / 1000.0;
    const double sample_us = static_cast<double>(config_.sample_ns) / 1000.0;
    double before_sum = 0, after_sum = 0;
    size_t before_n = 0, after_n = 0;
    std::vector<std::pair<double, double>> after;
    for (const auto& [t, g] : goodput_timeline_) {
      if (t - sample_us >= warm_us && t <= f.event_us) {
        before_sum += g;
        ++before_n;
      } else if (t > f.event_us) {
        after.emplace_back(t, g);
      }
    }
    f.before = before_n > 0 ? before_sum / static_cast<double>(before_n) : 0;
    f.min_after = after.empty() ? 0 : 1e300;
    int64_t last_low = -1;
    for (size_t i = 0; i < after.size(); ++i) {
      f.min_after = std::min(f.min_after, after[i].second);
      if (i >= after.size() / 2) {
        after_sum += after[i].second;
        ++after_n;
      }
    }
    f.after = after_n > 0 ? after_sum / static_cast<double>(after_n) : 0;
    // Settled: 90% of the lower of the level before and the level the fabric settles at (with
    // a link fewer, the level before may be out of reach). Recovered for good at the end of the
    // last interval below it (0: never below; -1: still below when the run ended).
    // Judged on the mean of three intervals, so that the ACK-paced noise of one interval (an
    // ACK covers up to 65 packets) does not read as a failure.
    const double settled = 0.9 * std::min(f.before, f.after);
    for (size_t i = 0; i < after.size(); ++i) {
      const size_t lo = i > 0 ? i - 1 : 0, hi = std::min(i + 1, after.size() - 1);
      double m = 0;
      for (size_t k = lo; k <= hi; ++k) m += after[k].second;
      if (m / static_cast<double>(hi - lo + 1) < settled) last_low = static_cast<int64_t>(i);
    }
    if (last_low < 0) {
      f.recovery_us = 0;
    } else if (static_cast<size_t>(last_low) + 1 < after.size()) {
      f.recovery_us = after[static_cast<size_t>(last_low)].first - f.event_us;
    }
    r.failover = f;
    break;  // the first failure
  }
  r.drops = {{"queue_full", queue_full},
             {"link_down", link_down + link_down_in_flight_},
             {"pfc_watchdog", watchdog},
             {"pfc_watchdog_ingress", watchdog_ingress},
             {"headroom_overflow", headroom},
             {"bit_error", bit_error},
             {"loss", loss},
             {"no_route", no_route},
             {"no_eligible_port", no_eligible},
             {"ttl_expired", ttl},
             {"tcam_drop", tcam_drop},
             {"switch_parse", sw_parse},
             {"nic_no_uplink", nic_no_uplink},
             {"nic_parse", nic_parse},
             {"responder_out_of_order", resp.out_of_order_dropped},
             {"checksum_filter", checksum_filter_drops_},
             {"host_checksum_filter", host_filter}};
  r.drops.insert(switch_other.begin(), switch_other.end());
  r.tcam_fallback_qps = tcam_fallback_qps_;
  r.buckets = bucket_report();
  r.nic_split = nic_split_report();

  // Completion times.
  std::vector<double> sorted;
  sorted.reserve(fct_ns_.size());
  for (uint64_t v : fct_ns_) sorted.push_back(static_cast<double>(v) / 1000.0);
  if (!sorted.empty()) {
    std::sort(sorted.begin(), sorted.end());
    r.fct_p50_us = percentile(sorted, 0.5);
    r.fct_p99_us = percentile(sorted, 0.99);
    r.fct_max_us = sorted.back();
    const size_t step = std::max<size_t>(
        1, (sorted.size() + RunResult::kMaxFctSamples - 1) / RunResult::kMaxFctSamples);
    for (size_t i = 0; i < sorted.size(); i += step) r.fct_samples_us.push_back(sorted[i]);
  }
  collect_slowdown(r);

  // One record per flow (QP): who, how much, how fast, how often resent, and which planes its
  // packets took (as the receiving NIC counted them by uplink).
  double fair_sum = 0, fair_sq = 0;
  if (record_flows_) {
    r.flows.reserve(plan_.flows().size());  // one per flow: no doubling at the run's peak
    for (const HostSpec& h : topology_.hosts()) r.host_names.push_back(h.name);
  }
  // A receiving host's heat map: the NIC's own in one process, the figures' copy across ranks.
  const auto heat_map_of = [&](uint32_t dst) -> const nic_emu::QpHeatMap& {
    return distributed() ? figures_[dst].heat_map.value() : nodes_[dst].nic->heat_map();
  };
  for (size_t i = 0; i < plan_.flows().size(); ++i) {
    const QpFlow& f = plan_.flows()[i];
    FlowRecord fr;
    fr.src = f.src;
    fr.dst = f.dst;
    fr.src_qpn = f.src_qpn;
    fr.dst_qpn = f.dst_qpn;
    fr.hops = path_hops(f.src, f.dst);
    const RcQpFlowCounters k = !distributed()
                                   ? nodes_[f.src].nic->rc_engine()->flow_counters(f.src_qp_index)
                               : f.src_qp_index < figures_[f.src].requesters.size()
                                   ? figures_[f.src].requesters[f.src_qp_index]
                                   : RcQpFlowCounters{};
    if (k.has_requester) {
      fr.bytes_acked = k.bytes_acked;
      fr.packets_sent = k.packets_sent;
      fr.packets_retransmitted = k.packets_retransmitted;
      fr.naks = k.naks_received;
      fr.timeouts = k.timeouts;
    }
    const FlowFct& ff = flow_fct_[i];
    if (const std::optional<Post> one = single_message(i)) {
      fr.single_message = true;
      fr.size_bytes = one->bytes;
      fr.start_ns = ff.messages > 0 ? ff.first_start_ns : one->at_ns;
      if (ff.messages > 0) fr.end_ns = ff.last_end_ns;
      fr.ideal_fct_ns = flow_ideal_fct_ns(one->bytes, i);
      fr.in_window = fr.start_ns >= config_.slowdown_warmup();
    }
    fr.messages_completed = ff.messages;
    fr.bytes_completed = ff.bytes;
    if (ff.messages > 0) {
      fr.fct_mean_us = ff.fct_sum_ns / static_cast<double>(ff.messages) / 1000.0;
      fr.fct_max_us = ff.fct_max_ns / 1000.0;
      fr.slowdown_mean = ff.slowdown_sum / static_cast<double>(ff.messages);
    }
    fr.throughput_gbps = r.virtual_ns > 0 ? static_cast<double>(fr.bytes_acked) * 8.0 /
                                                static_cast<double>(r.virtual_ns)
                                          : 0;
    const uint64_t window_ns = r.window_end_ns - std::min(r.window_end_ns, fair_start_ns_);
    const uint64_t at_start = i < flow_window_acked_.size() ? flow_window_acked_[i] : 0;
    fr.window_gbps = window_ns > 0 ? static_cast<double>(fr.bytes_acked - at_start) * 8.0 /
                                         static_cast<double>(window_ns)
                                   : 0;
    if (fr.packets_sent > 0) {
      ++r.fairness.flows;
      const double x = fr.window_gbps;
      fair_sum += x;
      fair_sq += x * x;
      r.fairness.min_gbps = r.fairness.flows == 1 ? x : std::min(r.fairness.min_gbps, x);
      r.fairness.max_gbps = std::max(r.fairness.max_gbps, x);
    }
    const NodeFigures& rx = figures_[f.dst];
    const uint32_t sip = topology_.hosts()[f.src].ip;
    const auto rx_uplinks = static_cast<uint16_t>(rx.ports.size());
    fr.packets_by_uplink.assign(rx_uplinks, 0);
    const nic_emu::QpHeatMap& heat = heat_map_of(f.dst);
    if (const std::optional<size_t> e = heat.find(sip, f.dst_qpn)) {
      const std::span<const uint64_t> per_uplink = heat.per_uplink(*e);
      for (uint16_t u = 0; u < rx_uplinks && u < per_uplink.size(); ++u) {
        fr.packets_by_uplink[u] = per_uplink[u];
      }
    }
    if (record_flows_) r.flows.push_back(std::move(fr));
  }
  if (r.fairness.flows > 0) {
    r.fairness.mean_gbps = fair_sum / static_cast<double>(r.fairness.flows);
    // Jain's index over the flows that sent: (sum x)^2 / (n sum x^2); 1 when all are equal.
    r.fairness.jain =
        fair_sq > 0 ? fair_sum * fair_sum / (static_cast<double>(r.fairness.flows) * fair_sq) : 0;
  }

  // Host uplinks (NIC -> leaf), the first tier, over the window.
  {
    std::vector<double> hu;
    for (uint32_t h = 0; h < topology_.hosts().size(); ++h) {
      const NodeFigures& nic = figures_[h];
      for (uint16_t u = 0; u < nic.ports.size(); ++u) {
        const uint64_t before =
            h < nic_tx_window_.size() && u < nic_tx_window_[h].size() ? nic_tx_window_[h][u] : 0;
        const uint64_t tx = nic.ports[u].tx_bytes - before;
        hu.push_back(window_s > 0
                         ? static_cast<double>(tx) * 8.0 / (window_s * config_.link_gbps * 1e9)
                         : 0);
      }
    }
    const Spread sh = spread(hu);
    r.host_uplink_util_mean = sh.mean;
    r.host_uplink_util_max = sh.max;
    r.host_uplink_util_imbalance = sh.imbalance;
  }

  r.dead_link_frames = dead_link_frames_;
  r.dead_link_tx_after_1ms = dead_link_frames_late_;
  r.packet_hops = hops_;
  r.node_events = serves_;
  r.wall_s = wall_s;
  r.hops_per_s = wall_s > 0 ? static_cast<double>(hops_) / wall_s : 0;
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  r.peak_rss_mb = static_cast<double>(ru.ru_maxrss) / 1024.0;
  for (const NodeFigures& f : figures_) r.memory += f.memory;
  collect_cc(r);
  r.warnings = run_warnings(r, config_);
  return r;
}

// cdf: the carried load, bytes acknowledged fabric-wide per second within [warm-up, end of
// arrivals] over every host's line rate. From the goodput samples (every sample_ns, each the
// bytes acknowledged in its interval over the hosts' capacity in it), so the window is the
// whole sample intervals within [warmup_ns, duration_ns]; when the run ended (every flow done)
// before the window's end, what was acknowledged after the last sample counts in it too.
void Fabric::set_carried_load(RunResult& r, uint64_t acked_total) const {
  const uint64_t s = config_.sample_ns;
  const uint64_t from = (config_.warmup_ns + s - 1) / s * s;
  uint64_t to = config_.duration_ns / s * s;
  if (to <= from) to = from + s;  // shorter than a sample: the one interval from the warm-up
  const double interval_s = static_cast<double>(s) * 1e-9;
  double bits = 0;  // over the hosts' capacity per second
  uint64_t last_t = 0;
  for (const auto& [t_us, g] : goodput_timeline_) {
    const auto t = static_cast<uint64_t>(std::llround(t_us * 1000.0));
    last_t = std::max(last_t, t);
    if (t > from && t <= to) bits += g * interval_s;
  }
  const double capacity_bps =
      static_cast<double>(config_.hosts()) * config_.planes * config_.link_gbps * 1e9;
  if (last_t < to && acked_total > last_sample_acked_bytes_) {
    bits += static_cast<double>(acked_total - last_sample_acked_bytes_) * 8.0 / capacity_bps;
  }
  r.carried_window_ns = {from, to};
  r.carried_load = bits / (static_cast<double>(to - from) * 1e-9);
}

}  // namespace spraynet::fabric
