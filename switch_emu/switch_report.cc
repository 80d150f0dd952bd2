#include "switch_emu/switch_report.h"

namespace spraynet::switch_emu {

using nlohmann::json;

json port_json(const std::string& name, const SwitchPortSnapshot& s) {
  json classes = json::array();
  for (uint8_t tc = 0; tc < EgressPort::kClasses; ++tc) {
    const auto& k = s.classes[tc];
    classes.push_back({{"enqueued", k.enqueued},
                       {"transmitted_packets", k.transmitted_packets},
                       {"transmitted_bytes", k.transmitted_bytes},
                       {"drops_queue_full", k.drops_queue_full},
                       {"drops_link_down", k.drops_link_down},
                       {"drops_watchdog", k.drops_watchdog},
                       {"drops_headroom_overflow", k.drops_headroom_overflow},
                       {"drops_bit_error", k.drops_bit_error},
                       {"drops_loss", k.drops_loss},
                       {"drops_delay_line_full", k.drops_delay_line_full},
                       {"paused_ns", k.paused_ns},
                       {"ecn_marked", k.ecn_marked},
                       {"ecn_not_ect", k.ecn_not_ect},
                       {"queued_bytes", s.class_queued_bytes[tc]}});
  }
  json j = {{"name", name},
            {"link_up", s.link_up != 0},
            {"rate_gbps", s.rate_gbps},
            {"queued_bytes", s.queued_bytes},
            {"classes", classes}};
  if (s.int_records.any()) {
    j["int"] = {{"records_pushed", s.int_records.pushed},
                {"hops_exceeded", s.int_records.hops_exceeded},
                {"mtu_exceeded", s.int_records.mtu_exceeded}};
  }
  s.counters.for_each([&j](std::string_view n, uint64_t v) { j[std::string(n)] = v; });
  // What arrived on this port and was dropped (bad_port, a port the node lacks, is never one).
  j["drops"] = drop_counters_json(s.drops);
  j["drops"].erase("bad_port");
  return j;
}

json port_json(const SwitchNode& node, uint16_t port, uint64_t now_ns) {
  return port_json(node.config().ports[port].name, port_snapshot(node, port, now_ns));
}

json drop_counters_json(const SwitchDropCounters& d) {
  json j = json::object();
  d.for_each([&j](std::string_view name, uint64_t v) { j[std::string(name)] = v; });
  j["total"] = d.total();
  return j;
}

json drops_json(const SwitchNode& node) {
  return drop_counters_json(node.drops());
}

json switch_counters_json(const SwitchCounters& c) {
  json j = json::object();
  c.for_each([&j](std::string_view name, uint64_t v) { j[std::string(name)] = v; });
  return j;
}

json counters_json(const SwitchNode& node) {
  return switch_counters_json(node.counters());
}

json group_json(SwitchNode& node, size_t g) {
  return group_json(node, g, group_snapshot(node, g));
}

json group_json(SwitchNode& node, size_t g, const SwitchGroupSnapshot& snapshot) {
  const PathSelector& sel = node.group(g);
  const auto& cfg = node.config();
  json members = json::array();
  for (uint16_t p : sel.member_ports()) members.push_back(cfg.ports[p].name);
  json packets = json::array();
  for (uint64_t v : snapshot.member_packets) packets.push_back(v);
  json buckets = json::array();
  for (size_t m = 0; m < sel.member_ports().size(); ++m) {
    buckets.push_back(sel.bucket_table().buckets_of(static_cast<uint16_t>(m)));
  }
  const auto& c = snapshot.counters;
  const auto& f = snapshot.flowlets;
  return {{"name", cfg.groups[g].name},
          {"mode", std::string(to_string(sel.mode()))},
          {"members", members},
          {"member_packets", packets},
          {"member_buckets", buckets},
          {"selected", c.selected},
          {"sprayed", c.sprayed},
          {"no_eligible_port", c.no_eligible_port},
          {"rehashed_ineligible", c.rehashed_ineligible},
          {"flowlets",
           {{"entries", sel.flowlet_table().entries()},
            {"gap_ns", sel.flowlet_table().gap_ns()},
            {"started", f.flowlets_started},
            {"moved", f.flowlets_moved},
            {"expired", f.flowlets_expired},
            {"collisions", f.collisions},
            {"rerouted_ineligible", f.rerouted_ineligible},
            {"no_eligible_member", f.no_eligible_member}}}};
}

json tcam_json(SwitchNode& node) {
  Tcam& t = node.tcam();
  const TcamCounters c = t.counters();
  json refused_by_cause, fallback_by_cause;
  for (size_t i = 1; i < kTcamRefusalCount; ++i) {
    const std::string cause(to_string(static_cast<TcamRefusal>(i)));
    refused_by_cause[cause] = c.refused_rules_by_cause[i];
    fallback_by_cause[cause] = c.fallback_packets_by_cause[i];
  }
  json rules = json::array();
  for (const auto& r : node.config().tcam.rules) {
    const auto refusal = t.refusal_of(r.id);
    rules.push_back({{"id", r.id},
                     {"action", r.action},
                     {"admitted", refusal && *refusal == TcamRefusal::kNone},
                     {"refusal", refusal ? std::string(to_string(*refusal)) : "unknown"},
                     {"hits", t.rule_hits(r.id)}});
  }
  return {{"capacity", t.config().capacity},
          {"spray_rule_limit", t.config().spray_rule_limit},
          {"admitted_rules", t.admitted_rules()},
          {"refused_rules", t.refused_rules()},
          {"classify_method", std::string(t.classify_method())},
          {"classified_packets", c.classified_packets},
          {"matched_packets", c.matched_packets},
          {"fallback_ecmp_packets", c.fallback_ecmp_packets},
          {"fallback_packets_by_cause", fallback_by_cause},
          {"refused_rules_by_cause", refused_by_cause},
          {"rules", rules}};
}

json pfc_json(const SwitchNode& node, uint16_t port) {
  if (node.pfc() == nullptr) return {{"enabled", false}};
  return pfc_json(node, port, pfc_port_snapshot(node, port));
}

json pfc_json(const SwitchNode& node, uint16_t port, const SwitchPfcPortSnapshot& s) {
  if (node.pfc() == nullptr) return {{"enabled", false}};
  const auto& c = s.counters;
  json prio = json::array();
  for (uint8_t p = 0; p < kPriorities; ++p) {
    const auto& k = c.priority[p];
    const auto& b = s.priority[p];
    prio.push_back({{"xoff_sent", k.xoff_sent},
                    {"xon_sent", k.xon_sent},
                    {"xoff_received", k.xoff_received},
                    {"xon_received", k.xon_received},
                    {"buffered_bytes", b.buffered_bytes},
                    {"shared_bytes", b.shared_bytes},
                    {"headroom_used_bytes", b.headroom_used_bytes},
                    {"headroom_peak_bytes", b.headroom_peak_bytes},
                    {"headroom_overflows", b.headroom_overflows},
                    {"xoff_asserted", b.xoff_asserted != 0},
                    {"watchdog_dropping", b.watchdog_dropping != 0},
                    {"watchdog_storming", b.watchdog_storming != 0},
                    {"watchdog_storms_detected", k.watchdog_storms_detected},
                    {"watchdog_restorations", k.watchdog_restorations},
                    {"watchdog_ingress_drops", k.watchdog_ingress_drops},
                    {"watchdog_frames_suppressed", k.watchdog_frames_suppressed}});
  }
  return {{"enabled", true},
          {"port", node.config().ports[port].name},
          {"frames_sent", c.frames_sent},
          {"frames_received", c.frames_received},
          {"ignored_priority_pauses", c.ignored_priority_pauses},
          {"headroom_bytes", s.headroom_bytes},
          {"priorities", prio}};
}

json pfc_buffer_json(const PfcState& pfc) {
  return pfc_buffer_json(pfc, pfc_buffer_snapshot(pfc));
}

json pfc_buffer_json(const PfcState& pfc, const SwitchPfcBufferSnapshot& s) {
  const SharedBuffer& b = pfc.buffer();
  return {{"pool_bytes", b.pool_bytes()},
          {"pool_used_bytes", s.pool_used_bytes},
          {"pool_peak_bytes", s.pool_peak_bytes},
          {"threshold", b.dynamic() ? "dynamic" : "static"},
          {"alpha", b.config().alpha},
          {"threshold_bytes", s.threshold_bytes},
          {"headroom_used_bytes", s.headroom_used_bytes},
          {"headroom_overflows", s.headroom_overflows},
          {"xoff_asserted", s.xoff_asserted}};
}

namespace {
json egress_accounting_json(const EgressAccounting& e) {
  return {{"offered", e.offered},     {"refused", e.refused},       {"dequeued", e.dequeued},
          {"lost", e.lost},           {"queued", e.queued},         {"in_flight", e.in_flight},
          {"freed_at_shutdown", e.freed_at_shutdown}, {"balanced", e.balanced()}};
}
}  // namespace

json accounting_json(const control::SwitchConfig& config, const SwitchCounterView& view) {
  const SwitchAccounting a = view.accounting();
  json ports = json::array();
  for (size_t p = 0; p < view.ports.size(); ++p) {
    json e = egress_accounting_json(view.ports[p].egress);
    e["name"] = config.ports[p].name;
    ports.push_back(e);
  }
  return {{"received", a.received},
          {"generated", a.generated},
          {"consumed", a.consumed},
          {"pipeline_dropped", a.pipeline_dropped},
          {"in_lane_handoff", a.in_lane_handoff},
          {"offered_to_egress", a.egress.offered},
          {"egress", egress_accounting_json(a.egress)},
          {"ports", ports},
          {"balanced", a.balanced()}};
}

json accounting_json(const SwitchNode& node) {
  SwitchCounterView view;
  fill_counter_view(node, 0, view);  // the accounting reads no time-dependent counter
  return accounting_json(node.config(), view);
}

json report_json(SwitchNode& node, uint64_t now_ns) {
  json ports = json::array(), groups = json::array(), pfc = json::array();
  for (uint16_t p = 0; p < node.port_count(); ++p) {
    json pj = port_json(node, p, now_ns);
    // Which lane sends on which of the port's tx queues, and what each sent: one queue owned by
    // a lane (the others hand it their frames), or one per lane.
    json tx = json::array();
    if (node.port_per_lane(p)) {
      for (unsigned l = 0; l < node.lane_count(); ++l) {
        tx.push_back({{"queue", l},
                      {"lane", l},
                      {"tx_packets", node.lane_port_counters(l, p).tx_packets},
                      {"forwarded_packets", node.lane_port_counters(l, p).forwarded_packets}});
      }
    } else {
      tx.push_back({{"queue", 0},
                    {"lane", node.lane_of_port(p)},
                    {"tx_packets", node.port_counters(p).tx_packets},
                    {"forwarded_packets", node.port_counters(p).forwarded_packets}});
    }
    pj["tx_queue_per_lane"] = node.port_per_lane(p);
    pj["node_tx_queues"] = std::move(tx);
    ports.push_back(std::move(pj));
    if (node.pfc()) pfc.push_back(pfc_json(node, p));
  }
  for (size_t g = 0; g < node.group_count(); ++g) groups.push_back(group_json(node, g));
  json j = {{"switch", node.config().name}, {"ports", ports},         {"drops", drops_json(node)},
            {"counters", counters_json(node)}, {"groups", groups}, {"tcam", tcam_json(node)}};
  if (node.pfc()) {
    j["pfc"] = pfc;
    j["pfc_buffer"] = pfc_buffer_json(*node.pfc());
  }
  if (node.conga_enabled()) j["conga"] = conga_json(node.config(), conga_snapshot(node, now_ns));
  if (node.conweave_tx() != nullptr) {
    j["conweave"] = conweave_json(node.config(), conweave_snapshot(node));
  }
  j["accounting"] = accounting_json(node);
  return j;
}

json conga_json(const control::SwitchConfig& config, const SwitchCongaSnapshot& conga) {
  const control::CongaSettings& k = config.conga;
  json j = {{"enabled", k.enabled}};
  if (!k.enabled) return j;
  j["role"] = k.leaf >= 0 ? "leaf" : "spine";
  if (k.leaf >= 0) j["leaf"] = k.leaf;
  conga.counters.for_each([&j](std::string_view name, uint64_t v) { j[std::string(name)] = v; });
  j["feedback_received"] = conga.tables.feedback_received;
  j["from_leaf_updates"] = conga.tables.arrivals;
  j["bad_leaf"] = conga.tables.bad_leaf;
  j["table_entries"] = conga.table_entries;
  return j;
}

json conweave_json(const control::SwitchConfig& config, const SwitchConweaveSnapshot& w) {
  json j = {{"enabled", config.conweave.enabled}};
  if (!config.conweave.enabled) return j;
  j["leaf"] = config.conweave.leaf;
  const ConweaveTxCounters& t = w.tx;
  j["source"] = {{"packets", t.packets},           {"epochs", t.epochs},
                 {"rtt_timeouts", t.timeouts},     {"expiries", t.expiries},
                 {"reroutes", t.reroutes},         {"no_good_path", t.no_good_path},
                 {"timely_replies", t.timely_replies}, {"late_replies", t.late_replies},
                 {"clears", t.clears},             {"notifies", t.notifies},
                 {"aged", t.aged},                 {"no_eligible_member", t.no_eligible_member}};
  const ConweaveRxCounters& x = w.rx;
  j["destination"] = {{"packets", x.packets},
                      {"held", x.held},
                      {"held_now", w.held_now},
                      {"voq_full", x.voq_full},
                      {"previous_epoch", x.previous_epoch},
                      {"released_by_tail", x.flushes_by_tail},
                      {"released_by_timeout", x.flushes_by_timeout},
                      {"late_after_timeout", x.late_after_timeout},
                      {"max_queue_depth", x.max_queue_depth},
                      {"rtt_replies", x.rtt_replies},
                      {"clears", x.clears},
                      {"notifies", x.notifies},
                      {"aged", x.aged}};
  return j;
}

}  // namespace spraynet::switch_emu
