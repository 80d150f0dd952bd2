#include "switch_emu/switch_telemetry.h"

#include <rte_ethdev.h>

#include <cmath>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "control/config_reader.h"
#include "control/control_loop.h"
#include "control/telemetry_commands.h"
#include "dataplane/runtime/logging.h"
#include "dataplane/runtime/rcu_domain.h"
#include "dataplane/runtime/tsc_clock.h"
#include "switch_emu/switch_report.h"

namespace spraynet::switch_emu {

using control::TelemetryCommands;
using nlohmann::json;

namespace {

// "a,b,c" -> {"a", "b", "c"}; surrounding spaces trimmed.
std::vector<std::string> split_params(std::string_view params) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    const size_t comma = params.find(',', start);
    std::string_view part =
        params.substr(start, comma == std::string_view::npos ? params.npos : comma - start);
    while (!part.empty() && part.front() == ' ') part.remove_prefix(1);
    while (!part.empty() && part.back() == ' ') part.remove_suffix(1);
    out.emplace_back(part);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

void expect_params(const std::vector<std::string>& p, size_t n, const char* usage) {
  if (p.size() != n || (n > 0 && p[0].empty())) {
    throw std::invalid_argument(std::string("parameters: ") + usage);
  }
}

uint16_t port_of(const SwitchNode& node, const std::string& p) {
  const int idx = node.config().port_index(p);
  if (idx >= 0) return static_cast<uint16_t>(idx);
  const auto v = control::parse_uint(p);
  if (!v || *v >= node.port_count()) {
    throw std::invalid_argument("port must be an index 0.." +
                                std::to_string(node.port_count() - 1) + " or a port name, got \"" +
                                p + "\"");
  }
  return static_cast<uint16_t>(*v);
}

size_t group_of(const SwitchNode& node, const std::string& g) {
  const auto& groups = node.config().groups;
  for (size_t i = 0; i < groups.size(); ++i) {
    if (groups[i].name == g) return i;
  }
  const auto v = control::parse_uint(g);
  if (!v || *v >= groups.size()) {
    throw std::invalid_argument("group must be an index 0.." + std::to_string(groups.size() - 1) +
                                " or a group name, got \"" + g + "\"");
  }
  return static_cast<size_t>(*v);
}

double number_of(const std::string& s, const char* what) {
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0' || !std::isfinite(v)) {
    throw std::invalid_argument(std::string(what) + " must be a number, got \"" + s + "\"");
  }
  return v;
}

json link_json(const control::LinkState& l) {
  return {{"identity", l.identity},
          {"path_id", l.path_id},
          {"up", l.up},
          {"rate_gbps", l.rate_gbps},
          {"utilisation", l.utilisation},
          {"last_utilisation", l.last_utilisation},
          {"queued_bytes", l.queued_bytes},
          {"paused", l.paused},
          {"paused_fraction", l.paused_fraction},
          {"watchdog_dropping", l.watchdog_dropping},
          {"ber", l.ber},
          {"frame_loss_ratio", l.frame_loss_ratio},
          {"health", l.health},
          {"updated_ns", l.updated_ns}};
}

// The lcores' latest published copy of the counters, read without any lock an lcore takes.
SwitchCounterView published(const SwitchShared& s) {
  if (!s.counters) throw std::invalid_argument("no published counters in this process");
  std::optional<SwitchCounterView> v = s.counters->read();
  // Every try overlapped a publication: the publishing lcore was preempted mid-copy.
  if (!v) throw std::invalid_argument("the counters were being published on every try: ask again");
  return std::move(*v);
}

// After a change made under the node lock: readers see it now, not at an lcore's next publish.
void republish(SwitchShared& s, uint64_t now_ns) {
  if (s.counters) s.counters->publish(*s.node, now_ns);  // every lane's part: all are stopped
}

// Waits until no lcore can still hold a retired TCAM snapshot, then frees them.
void reclaim_tcam(SwitchShared& s) {
  if (s.rcu != nullptr) s.rcu->synchronize();
  s.node->tcam().reclaim_retired();
}

uint64_t age_ns(const SwitchCounterView& v, const runtime::TscClock& clock) {
  const uint64_t now = clock.now_ns();
  return now > v.published_ns ? now - v.published_ns : 0;
}

void register_reading(SwitchShared& s, const runtime::TscClock& clock) {
  TelemetryCommands::add("/spraynet/ports", "Port names, in node port order. No parameters",
                         [&s](std::string_view) {
                           json names = json::array();
                           for (const auto& p : s.node->config().ports) names.push_back(p.name);
                           return names;
                         });
  TelemetryCommands::add("/spraynet/port", "Counters of one port. Parameter: port index or name",
                         [&s, &clock](std::string_view params) {
                           const uint16_t p = port_of(*s.node, std::string(params));
                           const SwitchCounterView v = published(s);
                           json j = port_json(s.node->config().ports[p].name, v.ports[p]);
                           j["snapshot_age_ns"] = age_ns(v, clock);
                           j["dpdk"] = ethdev_json(s.dpdk_port[p]);
                           return j;
                         });
  TelemetryCommands::add("/spraynet/drops", "Pipeline drops by cause. No parameters",
                         [&s](std::string_view) { return drop_counters_json(published(s).drops); });
  TelemetryCommands::add(
      "/spraynet/counters", "Switch-wide counters. No parameters",
      [&s](std::string_view) { return switch_counters_json(published(s).counters); });
  TelemetryCommands::add("/spraynet/accounting",
                         "Received + made = consumed + dropped + at egress, now. No parameters",
                         [&s, &clock](std::string_view) {
                           const SwitchCounterView v = published(s);
                           json j = accounting_json(s.node->config(), v);
                           j["snapshot_age_ns"] = age_ns(v, clock);
                           return j;
                         });
  TelemetryCommands::add("/spraynet/groups", "ECMP group names. No parameters",
                         [&s](std::string_view) {
                           json names = json::array();
                           for (const auto& g : s.node->config().groups) names.push_back(g.name);
                           return names;
                         });
  TelemetryCommands::add(
      "/spraynet/group", "One ECMP group: mode, members, packets, buckets. Parameter: group",
      [&s](std::string_view params) {
        const size_t g = group_of(*s.node, std::string(params));
        const SwitchCounterView v = published(s);
        std::lock_guard<std::mutex> c(s.control_lock);  // the bucket table stays published
        return group_json(*s.node, g, v.groups[g]);
      });
  TelemetryCommands::add("/spraynet/tcam", "TCAM counters. No parameters", [&s](std::string_view) {
    // The rules are the control side's; the packet counters are atomics any thread may read.
    std::lock_guard<std::mutex> c(s.control_lock);
    json j = tcam_json(*s.node);
    j.erase("rules");  // per-rule detail does not fit telemetry's flat model; see --stats
    return j;
  });
  TelemetryCommands::add("/spraynet/pfc", "PFC state of one port. Parameter: port index or name",
                         [&s](std::string_view params) {
                           const uint16_t p = port_of(*s.node, std::string(params));
                           if (s.node->pfc() == nullptr) return json{{"enabled", false}};
                           json j = pfc_json(*s.node, p, published(s).pfc[p]);
                           if (j.contains("priorities")) {
                             // Flatten per priority into arrays indexed by priority.
                             json flat;
                             for (const auto& pr : j["priorities"]) {
                               for (const auto& [k, v] : pr.items()) flat[k].push_back(v);
                             }
                             j["priorities"] = flat;
                           }
                           return j;
                         });
  TelemetryCommands::add("/spraynet/conga",
                         "CONGA: role, packets tunnelled and decapsulated, CE raised, feedback "
                         "carried and received, live table entries. No parameters",
                         [&s](std::string_view) {
                           return conga_json(s.node->config(), published(s).conga);
                         });
  TelemetryCommands::add("/spraynet/conweave",
                         "ConWeave: the source leaf's epochs, timeouts, reroutes and replies, the "
                         "destination's held packets and releases. No parameters",
                         [&s](std::string_view) {
                           return conweave_json(s.node->config(), published(s).conweave);
                         });
  TelemetryCommands::add("/spraynet/pfc_buffer",
                         "The shared lossless buffer: pool used and peak, threshold, headroom used "
                         "and overflows. No parameters",
                         [&s](std::string_view) {
                           if (s.node->pfc() == nullptr) return json{{"enabled", false}};
                           return pfc_buffer_json(*s.node->pfc(), published(s).pfc_buffer);
                         });
  TelemetryCommands::add(
      "/spraynet/link_state",
      "Link-state table: per port up, utilisation EWMA, queued bytes, paused, BER, health, "
      "path id. No parameters",
      [&s](std::string_view) {
        std::lock_guard<std::mutex> c(s.control_lock);
        if (s.control == nullptr) throw std::invalid_argument("no control loop in this process");
        const control::ControlLoop& loop = *s.control;
        json links = json::array();
        for (size_t i = 0; i < loop.table().size(); ++i) {
          json l = link_json(loop.table().at(i));
          l["port"] = s.node->config().ports[i].name;
          links.push_back(l);
        }
        const auto& k = loop.counters();
        return json{{"links", links},
                    {"period_ns", loop.config().period_ns},
                    {"ticks", k.ticks},
                    {"publications", k.publications},
                    {"immediate_publications", k.immediate_publications},
                    {"missed_periods", k.missed_periods},
                    {"sequence", loop.current() ? loop.current()->sequence : 0},
                    {"grace_periods", loop.publisher_counters().grace_periods}};
      });
  TelemetryCommands::add(
      "/spraynet/buckets",
      "A group's published bucket table (size, buckets per member, table if <= 256). "
      "Parameter: group",
      [&s](std::string_view params) {
        const size_t g = group_of(*s.node, std::string(params));
        std::lock_guard<std::mutex> c(s.control_lock);  // no publication while we read
        const PathSelector& sel = s.node->group(g);
        const BucketTable& t = sel.bucket_table();
        json members = json::array(), counts = json::array();
        for (size_t m = 0; m < sel.member_ports().size(); ++m) {
          members.push_back(s.node->config().ports[sel.member_ports()[m]].name);
          counts.push_back(t.buckets_of(static_cast<uint16_t>(m)));
        }
        json j{
            {"group", s.node->config().groups[g].name},
            {"mode", std::string(to_string(sel.mode()))},
            {"size", t.size()},
            {"members", members},
            {"member_buckets", counts},
            // What the operator configured (empty: equal); member_buckets is it scaled by the
            // link state.
            {"configured_weights", s.node->config().groups[g].weights},
            {"sequence", s.control && s.control->current() ? s.control->current()->sequence : 0}};
        if (t.size() <= 256) {
          json b = json::array();
          for (uint16_t m : t.buckets()) b.push_back(m);
          j["table"] = b;
        }
        return j;
      });
}

// An acting command: refused, and the refusal logged, unless acting commands are enabled
// (telemetry.acting_commands or --telemetry-acting); when enabled, every call is logged with its
// parameters and its reply: the log says what was changed and when.
void add_acting(bool enabled, const std::shared_ptr<spdlog::logger>& log, const std::string& command,
                const std::string& help, TelemetryCommands::Handler handler) {
  TelemetryCommands::add(
      command, help,
      [enabled, log, command, handler](std::string_view params) -> json {
        if (!enabled) {
          log->warn("telemetry: refused {},{}: acting commands are disabled", command, params);
          return json{{"error",
                       "acting commands are disabled: set telemetry.acting_commands: true in the "
                       "config or start switch_emu with --telemetry-acting"}};
        }
        json reply;
        try {
          reply = handler(params);
        } catch (const std::exception& e) {
          log->info("telemetry: {},{} refused: {}", command, params, e.what());
          throw;
        }
        log->info("telemetry: {},{} -> {}", command, params, reply.dump());
        return reply;
      });
}

void register_acting(SwitchShared& s, const runtime::TscClock& clock, bool enabled) {
  auto log = runtime::logger("telemetry");
  add_acting(enabled, log,
      "/spraynet/link_set",
      "Link up or down; down is published at once, up at the next tick. Parameters: "
      "port,up|down",
      [&s, &clock, log](std::string_view params) {
        const auto p = split_params(params);
        expect_params(p, 2, "port,up|down");
        const uint16_t port = port_of(*s.node, p[0]);
        if (p[1] != "up" && p[1] != "down") {
          throw std::invalid_argument("state must be up or down, got \"" + p[1] + "\"");
        }
        const bool up = p[1] == "up";
        std::lock_guard<std::mutex> c(s.control_lock);
        const uint64_t now = clock.now_ns();
        {
          std::lock_guard<runtime::NodeGate> g(s.lock);
          s.node->set_link_up(port, up, now);
          republish(s, now);
        }
        json reply{{"ok", 1}, {"port", s.node->config().ports[port].name}, {"state", p[1]}};
        if (s.control != nullptr && !up) {
          s.control->on_link_down(port, now);  // publishes and waits out the grace period
          reply["published"] = "now";
          reply["sequence"] = s.control->current()->sequence;
        } else {
          reply["published"] = s.control != nullptr ? "next tick" : "no control loop";
        }
        log->info("telemetry: link {} {}", s.node->config().ports[port].name, p[1]);
        return reply;
      });
  // One emulated-link property: `port,value`, set through the node (which throws with the
  // allowed range), acknowledged with the value the link now has.
  struct LinkProperty {
    const char* command;
    const char* help;
    const char* key;
    void (SwitchNode::*set)(uint16_t, double, uint64_t);
    double (LinkEmulator::*get)() const;
  };
  const LinkProperty properties[] = {
      {"/spraynet/link_rate",
       "Set a port's emulated link rate. Parameters: port,Gbit/s (0.001-10000)", "rate_gbps",
       &SwitchNode::set_link_rate_gbps, &LinkEmulator::rate_gbps},
      {"/spraynet/link_ber",
       "Set a port's emulated bit error rate. Parameters: port,BER (0-1)", "ber",
       &SwitchNode::set_link_ber, &LinkEmulator::bit_error_rate},
      {"/spraynet/link_loss", "Set a port's emulated frame loss rate. Parameters: port,rate (0-1)",
       "loss_rate", &SwitchNode::set_link_loss, &LinkEmulator::loss_rate},
  };
  for (const LinkProperty& prop : properties) {
    add_acting(enabled, log,
        prop.command, prop.help, [&s, &clock, log, prop](std::string_view params) {
          const auto p = split_params(params);
          expect_params(p, 2, (std::string("port,") + prop.key).c_str());
          const uint16_t port = port_of(*s.node, p[0]);
          const double value = number_of(p[1], prop.key);
          // The config's limits, not only the link emulator's: what a file refuses, this does.
          if (const std::string why = control::check_link_value(prop.key, value); !why.empty()) {
            throw std::invalid_argument(std::string(prop.key) + ": " + why);
          }
          std::lock_guard<std::mutex> c(s.control_lock);
          std::lock_guard<runtime::NodeGate> g(s.lock);
          const uint64_t now = clock.now_ns();
          (s.node->*prop.set)(port, value, now);
          republish(s, now);
          const std::string& name = s.node->config().ports[port].name;
          log->info("telemetry: link {} {} {}", name, prop.key, value);
          return json{
              {"ok", 1}, {"port", name}, {prop.key, (s.node->egress(port).link().*prop.get)()}};
        });
  }
  add_acting(enabled, log,
      "/spraynet/tcam_add",
      "Add a TCAM rule. Parameter: a YAML map like a tcam.rules entry, e.g. "
      "{id: 7, match: {dst: 10.0.2.0/24}, action: spray}",
      [&s, log](std::string_view params) {
        const auto node = control::ConfigNode::load_string(std::string(params), "tcam_add");
        if (!node.is_map()) throw std::invalid_argument("tcam_add: the rule must be a YAML map");
        const control::TcamRuleSettings rule = control::parse_tcam_rule(s.node->config(), node);
        std::lock_guard<std::mutex> c(s.control_lock);
        Tcam& tcam = s.node->tcam();
        const TcamRefusal refusal = tcam.add(control::to_tcam_rule(rule));
        json reply{{"id", rule.id}, {"action", rule.action}};
        if (refusal == TcamRefusal::kDuplicateId || refusal == TcamRefusal::kInvalidRule) {
          reply["error"] = "refused: " + std::string(to_string(refusal)) + " (not kept)";
          reply["refused"] = std::string(to_string(refusal));
          return reply;  // not kept: nothing to publish
        }
        if (!tcam.commit()) {
          throw std::runtime_error("rte_acl could not build the new TCAM; the old one stays");
        }
        reclaim_tcam(s);
        reply["admitted"] = refusal == TcamRefusal::kNone ? 1 : 0;
        if (refusal == TcamRefusal::kNone) {
          reply["ok"] = 1;
        } else {
          // Kept as refused: its traffic is counted as ECMP fallback until tcam_remove.
          reply["error"] = "refused: " + std::string(to_string(refusal)) +
                           " (kept: its traffic goes by ECMP until tcam_remove)";
          reply["refused"] = std::string(to_string(refusal));
        }
        log->info("telemetry: TCAM rule {} {}", rule.id,
                  refusal == TcamRefusal::kNone ? "admitted" : to_string(refusal));
        return reply;
      });
  add_acting(enabled, log,
      "/spraynet/tcam_remove", "Remove a TCAM rule. Parameter: rule id",
      [&s, log](std::string_view params) {
        const auto id = control::parse_uint(params);
        if (!id || *id > UINT32_MAX) {
          throw std::invalid_argument("parameter: a rule id");
        }
        std::lock_guard<std::mutex> c(s.control_lock);
        Tcam& tcam = s.node->tcam();
        if (!tcam.remove(static_cast<uint32_t>(*id))) {
          return json{{"error", "no rule " + std::to_string(*id)}};
        }
        if (!tcam.commit()) {
          throw std::runtime_error("rte_acl could not build the new TCAM");
        }
        reclaim_tcam(s);
        log->info("telemetry: TCAM rule {} removed", *id);
        return json{{"ok", 1}, {"id", *id}};
      });
  add_acting(enabled, log,
      "/spraynet/group_mode", "Set a group's mode. Parameters: group,ecmp|weighted|dlb|drill|letflow",
      [&s, log](std::string_view params) {
        const auto p = split_params(params);
        expect_params(p, 2, "group,mode");
        const size_t g = group_of(*s.node, p[0]);
        const auto mode = parse_lb_mode(p[1]);
        if (!mode || *mode == LbMode::kConga || *mode == LbMode::kConweave) {
          throw std::invalid_argument("mode must be ecmp, weighted, dlb, drill or letflow, got \"" + p[1] +
                                      "\"");
        }
        if (s.node->config().groups[g].overlay_leaf >= 0) {
          // Its packets are tunnelled to its leaf: that is the config's (conga: block, leaf:).
          throw std::invalid_argument("group " + p[0] +
                                      " tunnels to a leaf: its mode is the config's");
        }
        std::lock_guard<std::mutex> c(s.control_lock);
        s.node->group(g).set_mode(*mode);
        log->info("telemetry: group {} mode {}", s.node->config().groups[g].name, p[1]);
        return json{{"ok", 1}, {"group", s.node->config().groups[g].name}, {"mode", p[1]}};
      });
}

}  // namespace

json ethdev_json(uint16_t port_id) {
  rte_eth_stats st{};
  if (rte_eth_stats_get(port_id, &st) != 0) return {{"error", "rte_eth_stats_get failed"}};
  json j = {{"ipackets", st.ipackets}, {"opackets", st.opackets},  {"ibytes", st.ibytes},
            {"obytes", st.obytes},     {"imissed", st.imissed},    {"ierrors", st.ierrors},
            {"oerrors", st.oerrors},   {"rx_nombuf", st.rx_nombuf}};
  // Per queue, as the PMD counts them (ethdev keeps RTE_ETHDEV_QUEUE_STAT_CNTRS of each; a PMD
  // that counts none reports zeros).
  rte_eth_dev_info info{};
  if (rte_eth_dev_info_get(port_id, &info) == 0) {
    json rx = json::array(), tx = json::array();
    for (uint16_t q = 0; q < info.nb_rx_queues && q < RTE_ETHDEV_QUEUE_STAT_CNTRS; ++q) {
      rx.push_back({{"queue", q},
                    {"packets", st.q_ipackets[q]},
                    {"bytes", st.q_ibytes[q]},
                    {"errors", st.q_errors[q]}});
    }
    for (uint16_t q = 0; q < info.nb_tx_queues && q < RTE_ETHDEV_QUEUE_STAT_CNTRS; ++q) {
      tx.push_back({{"queue", q}, {"packets", st.q_opackets[q]}, {"bytes", st.q_obytes[q]}});
    }
    j["rx_queues"] = std::move(rx);
    j["tx_queues"] = std::move(tx);
  }
  return j;
}

void register_switch_telemetry(SwitchShared& s, const runtime::TscClock& clock,
                               bool acting_commands) {
  register_reading(s, clock);
  register_acting(s, clock, acting_commands);
}

}  // namespace spraynet::switch_emu
