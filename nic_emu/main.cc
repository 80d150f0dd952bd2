// nic_emu: the spraynet NIC on a DPDK poll-mode lcore.
//
//   nic_emu [EAL arguments] -- --config FILE [--stats FILE] [--idle-exit-ms N] ...
//
// One host port and up to 16 uplinks, each a DPDK port (PCI, vdev, or a vdev spec in the
// config). TX: the host's RoCEv2 packets are sprayed per packet over the uplinks with a PPCID in
// the UDP checksum; RX: the reorder engine puts each QP back in PSN order, the checksum is set
// back to 0, and the host port gets them. Without a host port the RC traffic engine plays the
// host. A control thread publishes spray weights from the link-state table through RCU.
#include <rte_lcore.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "control/bucket_reweighter.h"
#include "control/control_loop.h"
#include "control/nic_config.h"
#include "control/quarantine_pusher.h"
#include "control/telemetry_commands.h"
#include "dataplane/runtime/logging.h"
#include "dataplane/runtime/rcu_domain.h"
#include "nic_emu/nic_lcore.h"
#include "nic_emu/nic_node.h"
#include "nic_emu/nic_report.h"
#include "nic_emu/nic_telemetry.h"
#include "program/node_program.h"

namespace {

using namespace spraynet;
using nlohmann::json;

void register_telemetry(nic_emu::NicShared& s, control::ControlLoop& loop,
                        const control::QuarantinePusher* pusher) {
  using control::TelemetryCommands;
  auto locked = [&s](auto fn) {
    return [&s, fn](std::string_view) {
      std::lock_guard<runtime::NodeGate> g(s.lock);
      return fn(*s.node);
    };
  };
  TelemetryCommands::add("/spraynet/ports", "Ports: uplinks then host. No parameters",
                         locked(nic_emu::ports_json));
  TelemetryCommands::add("/spraynet/drops", "Drops by cause. No parameters",
                         locked(nic_emu::drops_json));
  TelemetryCommands::add(
      "/spraynet/accounting",
      "Received + made = consumed + dropped + held + at egress, now. No parameters",
      locked(nic_emu::accounting_json));
  TelemetryCommands::add("/spraynet/spray", "Spray mode, weights, packets per uplink",
                         [&s](std::string_view) { return nic_emu::spray_telemetry(s); });
  TelemetryCommands::add("/spraynet/ppcid", "Received PPCIDs by verdict and path id",
                         locked(nic_emu::ppcid_json));
  TelemetryCommands::add(
      "/spraynet/anomaly",
      "PPCID anomaly detection: counters, flagged QPs (reason, uplink, first/last seen), "
      "quarantine pushes",
      [&s, pusher](std::string_view) { return nic_emu::anomaly_telemetry(s, pusher); });
  TelemetryCommands::add("/spraynet/reorder", "Reorder engine counters",
                         locked(nic_emu::reorder_json));
  TelemetryCommands::add("/spraynet/heat_map", "Arrivals per QP per uplink (spraying heat map)",
                         locked(nic_emu::heat_map_json));
  TelemetryCommands::add("/spraynet/rc", "RC traffic engine counters and completion times",
                         locked([](const nic_emu::NicNode& n) {
                           json j = nic_emu::rc_engine_json(n);
                           return j.is_null() ? json{{"error", "no RC engine (a host is set)"}} : j;
                         }));
  TelemetryCommands::add(
      "/spraynet/cc",
      "Congestion control: CE arrivals, CNPs sent and taken, each QP's DCQCN rate (Mbit/s). "
      "No parameters",
      locked([](const nic_emu::NicNode& n) { return nic_emu::cc_json(n); }));
  TelemetryCommands::add("/spraynet/probe",
                         "Latency probe: percentiles (ns), RFC 3550 jitter, lost, out of order, "
                         "duplicates. No parameters",
                         locked([](const nic_emu::NicNode& n) {
                           json j = nic_emu::probe_json(n);
                           return j.is_null() ? json{{"error", "no probe (nic.probe not set)"}} : j;
                         }));
  TelemetryCommands::add(
      "/spraynet/link_state", "Uplink link-state table. No parameters",
      [&s, &loop](std::string_view) {
        std::lock_guard<std::mutex> c(s.control_lock);
        json links = json::array();
        for (size_t i = 0; i < loop.table().size(); ++i) {
          const auto& l = loop.table().at(i);
          links.push_back({{"uplink", s.node->config().uplinks[i].name},
                           {"path_id", s.node->config().uplinks[i].path_id},
                           {"up", l.up},
                           {"utilisation", l.utilisation},
                           {"queued_bytes", l.queued_bytes},
                           {"ber", l.ber},
                           {"health", l.health}});
        }
        return json{{"links", links}, {"publications", loop.counters().publications}};
      });
}

int run(int argc, char** argv) {
  program::NodeProgram prog(
      "nic_emu",
      "nic_emu: the spraynet NIC on a DPDK poll-mode lcore.\n"
      "EAL arguments are DPDK's own (e.g. -l 0 --no-huge -m 512 --no-pci --file-prefix nic\n"
      "--vdev net_ring0); ports may also be vdev specs in the config. Counters: "
      "dpdk-telemetry.py -f PREFIX, commands under /spraynet/.",
      control::nic_config_help(), "NIC config (YAML, top-level key nic:)",
      "stop once nothing has arrived for this long and nothing is queued or held (0: no idle "
      "exit); for pcap inputs");
  bool run_until_signal = false;
  prog.app().add_flag("--run-until-signal", run_until_signal,
                      "with the RC traffic engine: keep running after every message is "
                      "acknowledged (default: stop then)");
  if (const auto code = prog.parse(argc, argv)) return *code;
  const control::NicConfig config = control::load_nic_config(prog.options().config);
  prog.resolve_backoff(config.idle_backoff.max_sleep_us, config.idle_backoff.idle_polls);

  prog.start_eal();
  prog.set_telemetry_socket_mode(0600);  // nic_emu's commands only read
  auto log = prog.log();
  const unsigned nports = static_cast<unsigned>(config.uplinks.size() + (config.host ? 1 : 0));
  // Descriptors and bursts, plus what egress and the reorder engine may hold.
  std::vector<std::string> devices;
  for (const auto& u : config.uplinks) devices.push_back(u.device);
  if (config.host) devices.push_back(config.host->device);
  const unsigned data_room =
      prog.make_pool(config.mempool_mbufs, config.mbuf_data_room, devices, 1,
                     8192 + (config.reorder_enabled() ? config.reorder.max_buffered : 0));
  // A received AF_XDP frame starts after DPDK's headroom and XDP's (256 bytes): RoCE frames
  // at rc_engine.mtu 4096 (78 bytes of headers on top) are longer than fit.
  const uint32_t largest_frame = data_room - RTE_PKTMBUF_HEADROOM - 256;
  if (data_room < config.mbuf_data_room && config.rc_engine &&
      config.rc_engine->mtu + 78 > largest_frame) {
    throw control::ConfigError(prog.options().config, "nic.rc_engine.mtu",
                               std::to_string(config.rc_engine->mtu) +
                                   " does not fit net_af_xdp's mbufs (frames of at most " +
                                   std::to_string(largest_frame) + " bytes): use 1024");
  }
  // Node ports: uplinks in config order, then the host.
  for (size_t i = 0; i < config.uplinks.size(); ++i) {
    const auto& u = config.uplinks[i];
    prog.add_port(u.name, u.device, "nic.uplinks[" + std::to_string(i) + "].device");
  }
  if (config.host) prog.add_port(config.host->name, config.host->device, "nic.host.device");
  prog.ports_ready();

  std::optional<nic_emu::NicNode> node;
  node.emplace(config, prog.pool(), prog.macs(), runtime::logger("nic"));
  nic_emu::NicShared shared;
  prog.attach(shared, *node);
  shared.stop_when_done = !config.host && !run_until_signal;

  // Control: the uplinks' link-state table every period; weighted spraying takes its weights
  // from it, published to the lcore through RCU.
  runtime::RcuDomain rcu(1);
  shared.rcu = &rcu;
  control::ControlTarget target;
  target.links = control::uplink_identities(config);
  // The config resolved every uplink's path id (given, or from its fingerprint): the table
  // keeps those, so its path ids are the ones the PPCIDs carry.
  for (size_t u = 0; u < config.uplinks.size(); ++u) target.links[u].path_id = config.uplinks[u].path_id;
  target.path_id_bits = control::path_id_bits(config);
  for (uint16_t u = 0; u < config.uplinks.size(); ++u) target.ports.push_back(&node->egress(u));
  target.rcu = &rcu;
  target.node_lock = &shared.lock;
  control::BucketReweighter reweighter;
  std::vector<uint16_t> members;
  for (uint16_t u = 0; u < config.uplinks.size(); ++u) members.push_back(u);
  target.on_publish = [&](const control::ControlSnapshot& snap) {
    auto weights = std::make_unique<SprayWeights>();
    weights->weights = reweighter.weights(snap.links, members);
    weights->updated_ns = snap.computed_ns;
    std::unique_ptr<const SprayWeights> old = node->spray().publish_weights(std::move(weights));
    rcu.synchronize();  // the lcore no longer reads `old`
  };
  control::ControlLoopConfig loop_config;
  loop_config.period_ns = config.control.period_ms * 1'000'000;
  control::ControlLoop control_loop(target, prog.clock().now_ns(), loop_config,
                                    runtime::logger("control"));
  shared.control = &control_loop;
  // The quarantine response: its own thread reads the QPs the lcore flagged (under the node
  // lock) and pushes their rules to the switch outside it.
  std::unique_ptr<control::QuarantinePusher> pusher;
  if (config.anomaly.enabled && config.anomaly.quarantine.enabled) {
    const control::NicQuarantineSettings& q = config.anomaly.quarantine;
    control::QuarantinePushConfig pc{q.switch_socket, q.honeypot_port, q.keep_percent,
                                     q.rule_id_base,  q.priority,      q.period_ms,
                                     q.timeout_ms};
    size_t taken = 0;
    pusher = std::make_unique<control::QuarantinePusher>(
        pc,
        [&shared, taken](std::vector<control::QuarantineTarget>& out) mutable {
          std::lock_guard<runtime::NodeGate> g(shared.lock);
          const auto& flags = shared.node->anomaly_flags();
          for (; taken < flags.size(); ++taken) {
            out.push_back({flags[taken].dest_qp, flags[taken].dst_ip});
          }
        },
        runtime::logger("quarantine"));
  }
  const control::TelemetryCommands::ClearOnExit telemetry_guard;
  register_telemetry(shared, control_loop, pusher.get());
  if (pusher) pusher->start();

  program::LcorePlan plan{rte_get_main_lcore(), {}, {}};
  for (uint16_t p = 0; p < nports; ++p) plan.ports.push_back(p);
  log->info("running{}: {} uplinks, {}, spray {}, receive {}; stop with SIGINT/SIGTERM",
            config.name == control::NicConfig{}.name ? "" : " as \"" + config.name + "\"",
            config.uplinks.size(),
            config.host ? "host port " + config.host->name : std::string("RC traffic engine"),
            to_string(config.spray.mode), to_string(config.receive));
  nic_emu::NicStopPolicy policy(shared);
  prog.run_lcores(shared, {plan}, rcu, control_loop, shared.control_lock, &policy);
  if (pusher) pusher->stop();  // after a last pass: a QP flagged at the end is pushed too

  json report = nic_emu::report_json(*node);
  report["anomaly"]["quarantine"] = nic_emu::quarantine_json(pusher.get());
  prog.add_run_report(report, rcu, control_loop);
  if (!report["rc_engine"].is_null()) {
    // Bytes acknowledged over the time from the engine's start to its last completion (or to
    // the stop, when it did not finish): the run's goodput.
    const uint64_t end = shared.rc_done_ns != 0 ? shared.rc_done_ns : prog.clock().now_ns();
    const uint64_t elapsed = end > shared.rc_started_ns ? end - shared.rc_started_ns : 0;
    const uint64_t acked = report["rc_engine"]["requester"]["bytes_acked"].get<uint64_t>();
    report["rc_engine"]["elapsed_ns"] = elapsed;
    report["rc_engine"]["goodput_gbps"] =
        elapsed == 0 ? 0.0 : static_cast<double>(acked) * 8.0 / static_cast<double>(elapsed);
  }
  node.reset();
  prog.close_ports(report);
  std::printf("%-10s %-7s %12s %12s %12s\n", "port", "role", "rx_packets", "tx_packets",
              "egress_drops");
  for (const auto& p : report["ports"]) {
    std::printf("%-10s %-7s %12lu %12lu %12lu\n", p["name"].get<std::string>().c_str(),
                p["role"].get<std::string>().c_str(), p["rx_packets"].get<uint64_t>(),
                p["tx_packets"].get<uint64_t>(), p["egress_drops"].get<uint64_t>());
  }
  const auto& pp = report["ppcid"];
  std::printf("ppcid: ok %lu, absent %lu, bad_check %lu, layout_mismatch %lu, unknown_path %lu\n",
              pp["ok"].get<uint64_t>(), pp["absent"].get<uint64_t>(),
              pp["bad_check"].get<uint64_t>(), pp["layout_mismatch"].get<uint64_t>(),
              pp["unknown_path"].get<uint64_t>());
  if (const auto& an = report["anomaly"]; an["enabled"].get<bool>()) {
    std::printf(
        "anomaly: %lu QPs flagged, %lu packets judged, quarantine rules pushed %lu, "
        "failed %lu\n",
        an["qps_flagged"].get<uint64_t>(), an["packets"].get<uint64_t>(),
        an["quarantine"].value("pushes", uint64_t{0}),
        an["quarantine"].value("push_failures", uint64_t{0}));
  }
  if (report["reorder"]["enabled"].get<bool>()) {
    const auto& r = report["reorder"];
    std::printf(
        "reorder: in %lu, in order %lu, after hold %lu, gaps timed out %lu, duplicates %lu\n",
        r["in"].get<uint64_t>(), r["released_in_order"].get<uint64_t>(),
        r["released_after_hold"].get<uint64_t>(), r["gap_timeouts"].get<uint64_t>(),
        r["duplicates"].get<uint64_t>());
  }
  if (!report["rc_engine"].is_null()) {
    const auto& q = report["rc_engine"]["requester"];
    std::printf(
        "rc: messages %lu, packets sent %lu, retransmitted %lu, naks %lu, timeouts %lu, goodput "
        "%.3f Gbit/s over %.3f s\n",
        q["messages_completed"].get<uint64_t>(), q["packets_sent"].get<uint64_t>(),
        q["packets_retransmitted"].get<uint64_t>(), q["naks_received"].get<uint64_t>(),
        q["timeouts"].get<uint64_t>(), report["rc_engine"]["goodput_gbps"].get<double>(),
        static_cast<double>(report["rc_engine"]["elapsed_ns"].get<uint64_t>()) / 1e9);
    if (const auto& pl = report["rc_engine"]["placement"]; !pl.is_null()) {
      std::printf(
          "placement: placed %lu, out of order %lu, holes naked %lu, window overflows %lu\n",
          pl["placed"].get<uint64_t>(), pl["placed_out_of_order"].get<uint64_t>(),
          pl["holes_naked"].get<uint64_t>(), pl["window_overflows"].get<uint64_t>());
    }
  }
  if (const auto& pr = report["probe"]; !pr.is_null()) {
    auto us = [&pr](const char* k) { return pr[k].get<uint64_t>() / 1000.0; };
    std::printf(
        "probe: sent %lu, received %lu, lost %lu, out of order %lu, duplicates %lu; latency us "
        "min %.1f p50 %.1f p99 %.1f p99.9 %.1f max %.1f; jitter %.2f us; changes over %.1f us: "
        "%lu\n",
        pr["sent"].get<uint64_t>(), pr["count"].get<uint64_t>(), pr["lost"].get<uint64_t>(),
        pr["out_of_order"].get<uint64_t>(), pr["duplicates"].get<uint64_t>(), us("min_ns"),
        us("p50_ns"), us("p99_ns"), us("p999_ns"), us("max_ns"),
        pr["jitter_ns"].get<double>() / 1000.0, us("change_threshold_ns"),
        pr["changes_over_threshold"].get<uint64_t>());
  }
  std::printf("pipeline drops: %lu\n", report["drops"]["total"].get<uint64_t>());
  return prog.finish(report);
}

}  // namespace

int main(int argc, char** argv) {
  return spraynet::program::run_main("nic_emu", run, argc, argv);
}
