// switch_emu: the spraynet switch on DPDK poll-mode lcores.
//
//   switch_emu [EAL arguments] -- --config FILE [--stats FILE] [--idle-exit-ms N] ...
//
// Each configured port is a DPDK port (PCI, vdev, or a vdev spec in the config); each lcore
// polls its ports' rx queues, runs the SwitchNode pipeline and transmits what the node's
// egress releases on the ports it polls. Counters are on the telemetry socket under /spraynet/
// (dpdk-telemetry.py) and in the end-of-run report; rte_pdump is initialised for dpdk-dumpcap.
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "control/control_loop.h"
#include "control/switch_config.h"
#include "control/telemetry_commands.h"
#include "dataplane/runtime/logging.h"
#include "dataplane/runtime/rcu_domain.h"
#include "program/node_program.h"
#include "switch_emu/switch_lcore.h"
#include "switch_emu/switch_node.h"
#include "switch_emu/switch_report.h"
#include "switch_emu/switch_telemetry.h"

namespace {

using namespace spraynet;
using nlohmann::json;

int run(int argc, char** argv) {
  program::NodeProgram prog(
      "switch_emu",
      "switch_emu: the spraynet switch on DPDK poll-mode lcores.\n"
      "EAL arguments are DPDK's own (e.g. -l 0-1 --no-huge -m 512 --no-pci --file-prefix sw\n"
      "--vdev net_ring0); ports may also be vdev specs in the config. The config (YAML) names\n"
      "ports and their emulated links, routes, ECMP groups and their modes (ecmp, weighted,\n"
      "dlb, drill), the hash, TCAM rules, QoS, PFC and the lcore layout: see configs/ and the\n"
      "README. Counters: dpdk-telemetry.py -f PREFIX, commands under /spraynet/.",
      control::switch_config_help(), "switch config (YAML)",
      "stop once no packet has arrived for this long and every egress queue is empty (0: run "
      "until SIGINT/SIGTERM); for pcap inputs");
  bool telemetry_acting = false;
  prog.app().add_flag("--telemetry-acting", telemetry_acting,
                      "allow the acting telemetry commands (link_set, link_rate, link_ber, "
                      "link_loss, tcam_add, tcam_remove, group_mode), as telemetry.acting_commands "
                      "does; without either they answer a refusal");
  if (const auto code = prog.parse(argc, argv)) return *code;
  control::SwitchConfig config = control::load_switch_config(prog.options().config);
  prog.resolve_backoff(config.idle_backoff.max_sleep_us, config.idle_backoff.idle_polls);

  prog.start_eal();
  prog.set_telemetry_socket_mode(config.telemetry.socket_mode);
  auto log = prog.log();
  // net_null receives endless packets unless told no-rx=1: as a group member (an output) it
  // would flood the switch with frames that all count as parse drops.
  for (const auto& g : config.groups) {
    for (const uint16_t p : g.ports) {
      const std::string& dev = config.ports[p].device;
      if (dev.rfind("net_null", 0) == 0 && dev.find("no-rx=1") == std::string::npos) {
        log->warn("port {} ({}) is an output of group {} but net_null without no-rx=1 also "
                  "generates packets on its rx side: add ,no-rx=1 to its device",
                  config.ports[p].name, dev, g.name);
      }
    }
  }

  // Lcore layout: as configured, or the main lcore polling every port.
  std::vector<program::LcorePlan> plans;
  for (const auto& l : config.lcores) plans.push_back({l.lcore, l.ports, l.rx});
  if (plans.empty()) {
    program::LcorePlan all{rte_get_main_lcore(), {}, {}};
    for (uint16_t p = 0; p < config.ports.size(); ++p) {
      all.ports.push_back(p);
      for (uint16_t q = 0; q < config.ports[p].rx_queues; ++q) all.rx.push_back({p, q});
    }
    plans.push_back(all);
  }
  std::vector<program::PortQueues> queues;
  for (const auto& port : config.ports) {
    queues.push_back({port.rx_queues, port.tx_queues, port.rx_descriptors, port.tx_descriptors});
  }

  // Descriptors, caches and bursts, plus what the egress queues may hold.
  std::vector<std::string> devices;
  for (const auto& port : config.ports) devices.push_back(port.device);
  // The node takes the data room the pool has (net_af_xdp may make it smaller): the largest
  // frame, and PFC headroom, follow from it.
  config.mbuf_data_room = prog.make_pool(config.mempool_mbufs, config.mbuf_data_room, devices,
                                         static_cast<unsigned>(plans.size()), 8192, queues);
  for (size_t i = 0; i < config.ports.size(); ++i) {
    const auto& port = config.ports[i];
    prog.add_port(port.name, port.device, "ports[" + std::to_string(i) + "].device",
                  (port.link.wire ? std::string("wire (no link emulation)")
                                  : fmt::format("emulated link {} Gbit/s, delay {} ns",
                                                port.link.rate_gbps, port.link.delay_ns)) +
                      (port.rx_queues > 1 || port.tx_queues > 1
                           ? fmt::format(", {} rx / {} tx queues", port.rx_queues, port.tx_queues)
                           : std::string()),
                  queues[i]);
  }
  prog.ports_ready();

  std::optional<switch_emu::SwitchNode> node;
  node.emplace(config, prog.pool(), prog.macs(), runtime::logger("switch"));
  switch_emu::SwitchShared shared;
  prog.attach(shared, *node);
  // A wire port's depth counts its PMD's tx descriptors in use where the PMD says which are.
  shared.tx_status_descriptors.assign(config.ports.size(), 0);
  for (size_t i = 0; i < config.ports.size(); ++i) {
    if (!config.ports[i].link.wire) continue;
    const runtime::Port& port = prog.ports()[i];
    if (rte_eth_tx_descriptor_status(port.id(), 0, 0) == -ENOTSUP) {
      log->info(
          "port {}: its PMD has no tx descriptor status: its depth for path selection is "
          "its own queues and what the PMD refused",
          config.ports[i].name);
    } else {
      shared.tx_status_descriptors[i] = port.tx_descriptors();
    }
  }
  shared.publish_counters(prog.clock().now_ns());

  // Control: its own thread (never an lcore) reweights every period and publishes bucket tables
  // to the lcores through RCU; each lcore's poll loop is a reader of the domain.
  runtime::RcuDomain rcu(static_cast<unsigned>(plans.size()));
  shared.rcu = &rcu;
  control::ControlTarget target = control::control_target_of(*node);
  target.rcu = &rcu;
  target.node_lock = &shared.lock;
  control::ControlLoopConfig loop_config;
  loop_config.period_ns = config.control.period_ms * 1'000'000;
  loop_config.reweight.target_utilisation = config.control.target_utilisation;
  loop_config.reweight.idle_buckets = config.control.idle_buckets;
  loop_config.links.utilisation_weight = config.control.utilisation_weight;
  control::ControlLoop control_loop(target, prog.clock().now_ns(), loop_config,
                                    runtime::logger("control"));
  shared.control = &control_loop;
  const bool acting = telemetry_acting || config.telemetry.acting_commands;
  const control::TelemetryCommands::ClearOnExit telemetry_guard;
  switch_emu::register_switch_telemetry(shared, prog.clock(), acting);
  if (acting) log->warn("telemetry: acting commands enabled: any client of the socket may change links, rules and modes");

  log->info("running{}: {} ports, {} lcore(s); stop with SIGINT/SIGTERM",
            config.name == control::SwitchConfig{}.name ? "" : " as \"" + config.name + "\"",
            config.ports.size(), plans.size());
  prog.run_lcores(shared, plans, rcu, control_loop, shared.control_lock);

  const uint64_t end_ns = prog.clock().now_ns();
  json report = switch_emu::report_json(*node, end_ns);
  prog.add_run_report(report, rcu, control_loop);
  for (size_t i = 0; i < prog.ports().size(); ++i) {
    report["ports"][i]["dpdk"] = switch_emu::ethdev_json(prog.ports()[i].id());
  }
  node.reset();  // frees whatever the egress queues still held
  prog.close_ports(report);
  // One line a port on stdout: what came in, went out, and was dropped.
  std::printf("%-10s %12s %12s %12s %12s\n", "port", "rx_packets", "tx_packets", "queue_drops",
              "rx_missed");
  uint64_t ecn_marked = 0;
  for (const auto& p : report["ports"]) {
    uint64_t qd = 0;
    for (const auto& c : p["classes"]) {
      ecn_marked += c["ecn_marked"].get<uint64_t>();
      qd += c["drops_queue_full"].get<uint64_t>() + c["drops_link_down"].get<uint64_t>() +
            c["drops_watchdog"].get<uint64_t>() + c["drops_headroom_overflow"].get<uint64_t>() +
            c["drops_bit_error"].get<uint64_t>() + c["drops_loss"].get<uint64_t>();
    }
    const auto& dp = p["dpdk"];
    const uint64_t missed = dp.contains("imissed")
                                ? dp["imissed"].get<uint64_t>() + dp["rx_nombuf"].get<uint64_t>()
                                : 0;
    std::printf("%-10s %12lu %12lu %12lu %12lu\n", p["name"].get<std::string>().c_str(),
                p["rx_packets"].get<uint64_t>(), p["tx_packets"].get<uint64_t>(), qd, missed);
  }
  std::printf("pipeline drops: %lu", report["drops"]["total"].get<uint64_t>());
  for (const auto& [k, v] : report["drops"].items()) {
    if (k != "total" && v.get<uint64_t>() != 0)
      std::printf(", %s %lu", k.c_str(), v.get<uint64_t>());
  }
  std::printf("\n");
  // The same by the port the dropped frames arrived on (ports that dropped nothing: no line).
  for (const auto& p : report["ports"]) {
    const auto& d = p["drops"];
    if (d["total"].get<uint64_t>() == 0) continue;
    std::printf("  arrived on %s: %lu", p["name"].get<std::string>().c_str(),
                d["total"].get<uint64_t>());
    for (const auto& [k, v] : d.items()) {
      if (k != "total" && v.get<uint64_t>() != 0) {
        std::printf(", %s %lu", k.c_str(), v.get<uint64_t>());
      }
    }
    std::printf("\n");
  }
  if (ecn_marked != 0) std::printf("ecn: %lu packets marked CE\n", ecn_marked);
  return prog.finish(report);
}

}  // namespace

int main(int argc, char** argv) {
  return spraynet::program::run_main("switch_emu", run, argc, argv);
}
