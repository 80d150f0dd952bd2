#include "nic_emu/nic_report.h"

#include <cmath>

#include <string>

#include "control/config_reader.h"

namespace spraynet::nic_emu {

using nlohmann::json;

json ports_json(const NicNode& node) {
  json ports = json::array();
  for (uint16_t p = 0; p < node.port_count(); ++p) {
    const bool host = node.has_host() && p == node.host_port();
    const auto& c = node.port_counters(p);
    uint64_t drops = 0;
    for (int tc = 0; tc < EgressPort::kClasses; ++tc) {
      const auto k = node.egress(p).counters(static_cast<uint8_t>(tc), 0);
      drops += k.drops_queue_full + k.drops_link_down + k.drops_watchdog +
               k.drops_headroom_overflow + k.drops_bit_error + k.drops_loss +
               k.drops_delay_line_full;
    }
    json j{{"name", host ? node.config().host->name : node.config().uplinks[p].name},
           {"role", host ? "host" : "uplink"},
           {"egress_drops", drops},
           {"link_up", node.egress(p).link_up()}};
    c.for_each([&j](std::string_view name, uint64_t v) { j[std::string(name)] = v; });
    if (!host) j["path_id"] = node.config().uplinks[p].path_id;
    ports.push_back(j);
  }
  return ports;
}

json drop_counters_json(const NicDropCounters& d) {
  json j = json::object();
  d.for_each([&j](std::string_view name, uint64_t v) { j[std::string(name)] = v; });
  j["total"] = d.total();
  return j;
}

json drops_json(const NicNode& node) {
  return drop_counters_json(node.drops());
}

json nic_counters_json(const NicCounters& c) {
  json j = json::object();
  c.for_each([&j](std::string_view name, uint64_t v) { j[std::string(name)] = v; });
  return j;
}

json spray_json(const NicNode& node) {
  const SprayEngine& s = node.spray();
  const auto& c = s.counters();
  json per_uplink = json::array();
  for (uint64_t v : s.uplink_packets()) per_uplink.push_back(v);
  json weights = json::array();
  for (uint32_t w : s.weights().weights) weights.push_back(w);
  return {{"mode", std::string(to_string(s.mode()))},
          {"ppcid_layout", std::string(to_string(s.layout()))},
          {"uplink_packets", per_uplink},
          {"weights", weights},
          {"sprayed", node.counters().sprayed},
          {"flow_hashed", node.counters().flow_hashed},
          {"no_eligible", c.no_eligible},
          {"weighted_rr_fallback", c.weighted_rr_fallback},
          {"ppcid_written", c.ppcid_written},
          {"ppcid_refused", c.ppcid_refused}};
}

json ppcid_json(const NicNode& node) {
  const auto& p = node.ppcid_counters();
  json by_path = json::object();
  for (size_t id = 0; id < node.path_arrivals().size(); ++id) {
    if (node.path_arrivals()[id] != 0) by_path[std::to_string(id)] = node.path_arrivals()[id];
  }
  json j = {{"checksum_restored", node.counters().checksum_restored}, {"by_path_id", by_path}};
  p.for_each([&j](std::string_view name, uint64_t v) { j[std::string(name)] = v; });
  return j;
}

json reorder_json(const NicNode& node) {
  const ReorderEngine* r = node.reorder();
  if (r == nullptr) return {{"enabled", false}};
  const auto& c = r->counters();
  // Reorder depth, as fabric_emu reports it: how far ahead of the expected PSN packets came.
  const auto& h = r->depth_histogram();
  uint64_t sequenced = 0, max_depth = 0, p99_depth = 0, seen = 0;
  json histogram = json::object();
  for (size_t d = 0; d < h.size(); ++d) {
    sequenced += h[d];
    if (h[d] == 0) continue;
    max_depth = d;
    histogram[std::to_string(d)] = h[d];
  }
  for (size_t d = 0; d < h.size() && sequenced > 0; ++d) {
    seen += h[d];
    if (seen * 100 >= sequenced * 99) {
      p99_depth = d;
      break;
    }
  }
  return {{"enabled", true},
          {"max_depth", max_depth},
          {"p99_depth", p99_depth},
          {"depth_histogram", histogram},
          {"window", r->config().window},
          {"hold_timeout_ns", r->config().hold_timeout_ns},
          {"qps", r->qp_count()},
          {"buffered", r->buffered()},
          {"in", c.in},
          {"released_in_order", c.released_in_order},
          {"released_after_hold", c.released_after_hold},
          {"duplicates", c.duplicates},
          {"duplicates_of_held", c.duplicates_of_held},
          {"unsequenced", c.unsequenced},
          {"not_roce", c.not_roce},
          {"qp_table_full", c.qp_table_full},
          {"buffer_full", c.buffer_full},
          {"gap_timeouts", c.gap_timeouts},
          {"gaps_forced", c.gaps_forced},
          {"window_slides", c.window_slides},
          {"psns_skipped", c.psns_skipped},
          {"qps_evicted", c.qps_evicted},
          {"resyncs", c.resyncs},
          {"read_requests", c.read_requests},
          {"read_ranges_announced", c.read_ranges_announced},
          {"read_responses_sequenced", c.read_responses_sequenced},
          {"read_responses_reordered", c.read_responses_reordered},
          {"read_ranges_rewound", c.read_ranges_rewound},
          {"response_gaps_full", c.response_gaps_full},
          {"max_buffered_seen", c.max_buffered_seen}};
}

json heat_map_json(const NicNode& node) {
  json qps = json::array();
  const QpHeatMap& heat = node.heat_map();
  for (size_t i = 0; i < heat.size(); ++i) {
    const QpArrivals& q = heat.entries()[i];
    json per = json::array();
    for (uint64_t v : heat.per_uplink(i)) per.push_back(v);
    qps.push_back(
        {{"src_ip", control::format_ipv4(q.src_ip)}, {"dest_qp", q.dest_qp}, {"per_uplink", per}});
  }
  return {{"qps", qps}, {"overflow", node.counters().heat_map_overflow}};
}

json cc_json(const NicNode& node) {
  const NicCounters& k = node.counters();
  json j = {{"mode", std::string(control::to_string(node.config().cc.mode))},
            {"ce_received", k.ce_received},
            {"cnps_sent", k.cnps_sent},
            {"cnps_suppressed", k.cnps_suppressed},
            {"cnp_no_qp", k.cnp_no_qp},
            {"cnp_pool_empty", k.cnp_pool_empty},
            {"cnps_received", k.cnps_received}};
  if (const json rc = rc_engine_json(node); !rc.is_null()) j["rc"] = rc["cc"];
  return j;
}

json rc_engine_json(const NicNode& node) {
  const RcTrafficEngine* e = node.rc_engine();
  if (e == nullptr) return nullptr;
  const auto rq = e->requester_totals();
  const auto rs = e->responder_totals();
  const auto pl = e->placement_totals();
  const auto& ct = e->completion_times();
  json placement = nullptr;
  if (e->config().ooo_placement) {
    placement = {{"window", e->config().placement_config().window},
                 {"nak_delay_ns", e->config().placement_nak_delay_ns},
                 {"packets_received", pl.packets_received},
                 {"placed", pl.placed},
                 {"placed_out_of_order", pl.placed_out_of_order},
                 {"duplicates", pl.duplicates},
                 {"window_overflows", pl.window_overflows},
                 {"holes_opened", pl.holes_opened},
                 {"holes_naked", pl.holes_naked},
                 {"naks_sent", pl.naks_sent},
                 {"acks_sent", pl.acks_sent},
                 {"bytes_written", pl.bytes_written},
                 {"messages_received", pl.messages_received},
                 {"max_distance", pl.max_distance},
                 {"icrc_errors", pl.icrc_errors},
                 {"sack_naks", pl.sack_naks},
                 {"becn_sent", pl.becn_sent}};
  }
  // transport irn: the BDP cap, the two timeouts and what the requesters made of the SACKs.
  json transport = {{"name", e->config().irn ? "irn" : "rc"}};
  if (e->config().irn) {
    transport.update({{"bdp_packets", e->config().max_in_flight},
                      {"rto_low_ns", e->config().irn_rto_low_ns},
                      {"rto_high_ns", e->config().retransmit_timeout_ns},
                      {"rto_low_packets", e->config().irn_rto_low_packets},
                      {"sack_naks", rq.sack_naks},
                      {"sacked_packets", rq.sacked_packets},
                      {"resends_skipped", rq.sack_resends_skipped},
                      {"sack_malformed", rq.sack_malformed},
                      {"rto_low_timeouts", rq.rto_low_timeouts}});
  }
  // Congestion control: each QP's DCQCN reaction point as of its last event (no clock here).
  json cc = {{"mode", std::string(control::to_string(node.config().cc.mode))}};
  if (e->config().dcqcn) {
    uint64_t cnps = 0, cuts = 0, deferred = 0, limited = 0, at_min = 0;
    json rates = json::array();
    for (uint32_t q = 0; q < e->qps(); ++q) {
      const auto* r = dynamic_cast<const DcqcnRateControl*>(e->rate_control(q));
      if (r == nullptr) continue;
      cnps += r->counters().cnps;
      cuts += r->counters().rate_cuts;
      deferred += r->counters().cuts_deferred;
      limited += r->limited();
      at_min += r->at_min_rate();
      // Mbit/s as integers: telemetry's arrays carry whole numbers only.
      rates.push_back(static_cast<uint64_t>(std::llround(r->rate_gbps() * 1000.0)));
    }
    cc.update({{"line_rate_gbps", e->config().dcqcn->line_rate_gbps},
               {"cnps", cnps},
               {"rate_cuts", cuts},
               {"cuts_deferred", deferred},
               {"qps_limited", limited},
               {"qps_at_min_rate", at_min},
               {"rate_mbps", rates},
               {"cnps_dropped_no_cc", e->counters().cnp_no_cc}});
  }
  // Entropy spraying of the UDP source ports (rc_engine entropy): REPS' reuse against new draws.
  json entropy = {{"mode", e->config().entropy_values > 1
                               ? (e->config().entropy_reps ? "reps" : "oblivious")
                               : "fixed"},
                  {"echo", e->config().echo_entropy}};
  if (e->config().entropy_values > 1) entropy["values"] = e->config().entropy_values;
  if (e->config().entropy_reps) {
    const RepsCounters r = e->reps_totals();
    entropy["reps"] = {{"reused", r.reused},           {"drawn", r.drawn},
                       {"explored", r.explored},       {"frozen_sent", r.frozen_sent},
                       {"recycled", r.recycled},       {"marked", r.marked},
                       {"marked_not_recycled", r.marked_not_recycled},
                       {"freezes", r.freezes}};
  }
  return {{"qps", e->qps()},
          {"cc", cc},
          {"entropy", entropy},
          {"receive", std::string(control::to_string(node.config().receive))},
          {"transport", transport},
          {"done", e->done()},
          {"requester",
           {{"messages_started", rq.messages_started},
            {"messages_completed", rq.messages_completed},
            {"packets_sent", rq.packets_sent},
            {"packets_retransmitted", rq.packets_retransmitted},
            {"naks_received", rq.naks_received},
            {"timeouts", rq.timeouts},
            {"selective_retransmissions", rq.selective_retransmissions},
            {"acks_received", rq.acks_received},
            {"bytes_acked", rq.bytes_acked},
            {"read_requests_sent", rq.read_requests_sent},
            {"read_responses_accepted", rq.read_responses_accepted},
            {"read_responses_out_of_order", rq.read_responses_out_of_order},
            {"read_response_errors", rq.read_response_errors},
            {"read_retries", rq.read_retries},
            {"read_bytes_received", rq.read_bytes_received},
            {"retransmitted_acked", rq.retransmitted_acked},
            {"fatal_naks", rq.fatal_naks},
            {"qp_errors", rq.qp_errors},
            {"messages_flushed", rq.messages_flushed}}},
          {"responder",
           {{"packets_received", rs.packets_received},
            {"accepted", rs.accepted},
            {"duplicates", rs.duplicates},
            {"out_of_order_dropped", rs.out_of_order_dropped},
            {"naks_sent", rs.naks_sent},
            {"acks_sent", rs.acks_sent},
            {"bytes_written", rs.bytes_written},
            {"messages_received", rs.messages_received},
            {"icrc_errors", rs.icrc_errors},
            {"read_requests", rs.read_requests},
            {"read_duplicates", rs.read_duplicates},
            {"read_responses_sent", rs.read_responses_sent},
            {"naks_invalid_request", rs.naks_invalid_request},
            {"qp_errors", rs.qp_errors}}},
          {"placement", placement},
          {"completion_ns",
           {{"count", ct.count()},
            {"min", ct.min_ns()},
            {"mean", ct.mean_ns()},
            {"p50", ct.percentile_ns(0.5)},
            {"p99", ct.percentile_ns(0.99)},
            {"max", ct.max_ns()}}}};
}

json probe_json(const NicNode& node) {
  const LatencyProbe* probe = node.probe();
  if (probe == nullptr) return nullptr;
  const auto& settings = *node.config().probe;
  json j = json::parse(probe->report().to_json());
  const auto& c = node.counters();
  j["uplink"] = settings.uplink;
  j["rate_pps"] = settings.probe.rate_pps;
  j["dst_ip"] = control::format_ipv4(settings.probe.dst_ip);
  j["dst_port"] = settings.probe.dst_port;
  j["sending"] = node.probes_sending();
  j["arrivals"] = c.probes_received;  // recognised probes, duplicates included
  j["pool_empty"] = c.probe_pool_empty;
  j["egress_refused"] = c.probe_egress_refused;
  return j;
}

namespace {
json egress_accounting_json(const EgressAccounting& e) {
  return {{"offered", e.offered},
          {"refused", e.refused},
          {"dequeued", e.dequeued},
          {"lost", e.lost},
          {"queued", e.queued},
          {"in_flight", e.in_flight},
          {"freed_at_shutdown", e.freed_at_shutdown},
          {"balanced", e.balanced()}};
}
}  // namespace

json accounting_json(const NicNode& node) {
  const NicAccounting a = node.accounting();
  json ports = json::array();
  for (uint16_t p = 0; p < node.port_count(); ++p) {
    const bool host = node.has_host() && p == node.host_port();
    json e = egress_accounting_json(node.egress(p).accounting());
    e["name"] = host ? node.config().host->name : node.config().uplinks[p].name;
    ports.push_back(e);
  }
  return {{"received", a.received},
          {"generated", a.generated},
          {"consumed", a.consumed},
          {"pipeline_dropped", a.pipeline_dropped},
          {"reorder_dropped", a.reorder_dropped},
          {"reorder_held", a.reorder_held},
          {"freed_at_shutdown", a.freed_at_shutdown},
          {"reorder_in", a.reorder_in},
          {"reorder_released", a.reorder_released},
          {"egress", egress_accounting_json(a.egress)},
          {"ports", ports},
          {"node_balanced", a.node_balanced()},
          {"reorder_balanced", a.reorder_balanced()},
          {"balanced", a.balanced()}};
}

json anomaly_json(const NicNode& node) {
  const PpcidAnomalyDetector* d = node.anomaly();
  if (d == nullptr) return {{"enabled", false}};
  json j = {{"enabled", true},
            {"threshold", d->config().threshold},
            {"qp_table_size", d->config().qp_table_size},
            {"qps_tracked", d->qps_tracked()}};
  d->counters().for_each([&j](std::string_view name, uint64_t v) { j[std::string(name)] = v; });
  json flagged = json::array();
  for (size_t i = 0; i < d->flagged_count(); ++i) {
    const AnomalyQp& q = d->flagged(i);
    const AnomalyFlag& f = node.anomaly_flags()[i];
    json by_reason = json::object();
    for (size_t r = 0; r < kAnomalyReasonCount; ++r) {
      by_reason[std::string(to_string(static_cast<AnomalyReason>(r)))] = q.by_reason[r];
    }
    flagged.push_back({{"dest_qp", q.dest_qp},
                       {"src_ip", control::format_ipv4(f.src_ip)},
                       {"dst_ip", control::format_ipv4(f.dst_ip)},
                       {"reason", to_string(q.reason)},
                       {"uplink", node.config().uplinks[q.uplink].name},
                       {"psn", q.psn},
                       {"first_seen_ns", q.first_ns},
                       {"last_seen_ns", q.last_ns},
                       {"flagged_ns", q.flagged_ns},
                       {"anomalous_packets", q.evidence},
                       {"packets", q.packets},
                       {"by_reason", by_reason}});
  }
  j["flagged"] = flagged;
  return j;
}

json report_json(const NicNode& node) {
  return {{"name", node.config().name},
          {"ports", ports_json(node)},
          {"drops", drops_json(node)},
          {"spray", spray_json(node)},
          {"ppcid", ppcid_json(node)},
          {"reorder", reorder_json(node)},
          {"heat_map", heat_map_json(node)},
          {"rc_engine", rc_engine_json(node)},
          {"probe", probe_json(node)},
          {"anomaly", anomaly_json(node)},
          {"counters", nic_counters_json(node.counters())},
          {"accounting", accounting_json(node)},
          {"delivered", node.counters().delivered},
          {"pfc_received", node.counters().pfc_received}};
}

}  // namespace spraynet::nic_emu
