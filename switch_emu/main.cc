// switch_emu: the spraynet switch on DPDK poll-mode lcores.
//
//   switch_emu [EAL arguments] -- --config FILE [--stats FILE] [--idle-exit-ms N] ...
//
// Each configured port is a DPDK port (PCI, vdev, or a vdev spec in the config); each lcore
// polls its ports' rx queues, runs the SwitchNode pipeline and transmits what the node's
// egress releases on the ports it polls. Counters are on the telemetry socket under /spraynet/
// (dpdk-telemetry.py) and in the end-of-run report; rte_pdump is initialised for dpdk-dumpcap.
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_pdump.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "control/control_loop.h"
#include "control/control_thread.h"
#include "control/switch_config.h"
#include "control/telemetry_commands.h"
#include "dataplane/runtime/eal.h"
#include "dataplane/runtime/lcore_runner.h"
#include "dataplane/runtime/logging.h"
#include "dataplane/runtime/packet_pool.h"
#include "dataplane/runtime/poll_loop.h"
#include "dataplane/runtime/program_args.h"
#include "dataplane/runtime/port.h"
#include "dataplane/runtime/rcu_domain.h"
#include "dataplane/runtime/stop_signal.h"
#include "dataplane/runtime/tsc_clock.h"
#include "switch_emu/switch_lcore.h"
#include "switch_emu/switch_node.h"
#include "switch_emu/switch_report.h"
#include "switch_emu/switch_telemetry.h"

namespace {

using namespace spraynet;
using nlohmann::json;

struct Options {
  std::string config;
  std::string stats;
  std::string log_level = "info";
  uint64_t idle_exit_ms = 0;
  uint64_t duration_ms = 0;
  runtime::IdleBackoffOptions backoff;
};

void describe(CLI::App& app, Options& o) {
  // CLI11 prints "Usage: NAME [OPTIONS]": the name carries the EAL half of the command line.
  app.name("switch_emu [EAL arguments] --");
  app.description(
      "switch_emu: the spraynet switch on DPDK poll-mode lcores.\n"
      "EAL arguments are DPDK's own (e.g. -l 0-1 --no-huge -m 512 --no-pci --file-prefix sw\n"
      "--vdev net_ring0); ports may also be vdev specs in the config. The config (YAML) names\n"
      "ports and their emulated links, routes, ECMP groups and their modes (ecmp, weighted,\n"
      "dlb, drill), the hash, TCAM rules, QoS, PFC and the lcore layout: see configs/ and the\n"
      "README. Counters: dpdk-telemetry.py -f PREFIX, commands under /spraynet/.");
  app.footer("Config keys (YAML):\n" + control::switch_config_help());
  app.add_option("--config", o.config, "switch config (YAML)")->required();
  app.add_option("--stats", o.stats, "write the end-of-run report (JSON) to this file");
  app.add_option("--log-level", o.log_level, "trace|debug|info|warn|error|critical|off")
      ->capture_default_str();
  app.add_option("--idle-exit-ms", o.idle_exit_ms,
                 "stop once no packet has arrived for this long and every egress queue is "
                 "empty (0: run until SIGINT/SIGTERM); for pcap inputs")
      ->capture_default_str();
  app.add_option("--duration-ms", o.duration_ms, "stop after this long (0: no limit)")
      ->capture_default_str();
  runtime::add_idle_backoff_options(app, o.backoff);
}

int run(int argc, char** argv) {
  Options opt;
  CLI::App app;
  describe(app, opt);
  // Both halves of the command line first, then the config: a mistake in either is then the
  // only thing printed, before EAL says anything (and --help needs no EAL, root or hugepages).
  const runtime::ProgramArgs args = runtime::split_program_args(argc, argv);
  if (const auto code = runtime::parse_program_args(app, args, "switch_emu")) return *code;
  runtime::set_level(opt.log_level);
  const control::SwitchConfig config = control::load_switch_config(opt.config);
  runtime::resolve_idle_backoff(app, opt.backoff, config.idle_backoff.max_sleep_us,
                                config.idle_backoff.idle_polls);

  runtime::Eal eal(args.eal);
  auto log = runtime::logger("switch_emu");
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
  std::vector<control::LcoreSettings> layout = config.lcores;
  if (layout.empty()) {
    control::LcoreSettings all;
    all.lcore = rte_get_main_lcore();
    for (uint16_t p = 0; p < config.ports.size(); ++p) all.ports.push_back(p);
    layout.push_back(all);
  }
  std::vector<unsigned> lcores;
  for (const auto& l : layout) {
    if (!rte_lcore_is_enabled(l.lcore)) {
      throw control::ConfigError(config.file, "lcores",
                                 "lcore " + std::to_string(l.lcore) +
                                     " is not enabled by the EAL arguments (-l/--lcores)");
    }
    lcores.push_back(l.lcore);
  }

  const unsigned desc = 1024;
  runtime::PacketPoolConfig pc;
  pc.name = "switch_emu";
  pc.data_room = static_cast<uint16_t>(config.mbuf_data_room);
  // Descriptors, caches and bursts (pool_size_for), plus what the egress queues may hold.
  pc.mbufs = config.mempool_mbufs != 0
                 ? config.mempool_mbufs
                 : runtime::pool_size_for(static_cast<unsigned>(config.ports.size()), 1, 1, desc,
                                          desc, static_cast<unsigned>(lcores.size()), 32, 256) +
                       8192;
  runtime::PacketPool pool(pc);

  std::vector<runtime::Port> ports;
  std::vector<MacAddress> macs;
  switch_emu::SwitchShared shared;
  shared.node_port_of.assign(RTE_MAX_ETHPORTS, -1);
  for (uint16_t i = 0; i < config.ports.size(); ++i) {
    runtime::PortConfig portcfg;
    portcfg.device = config.ports[i].device;
    portcfg.rx_descriptors = portcfg.tx_descriptors = desc;
    ports.emplace_back(portcfg, pool.get());
    const rte_ether_addr mac = ports.back().mac();
    macs.push_back({mac.addr_bytes[0], mac.addr_bytes[1], mac.addr_bytes[2], mac.addr_bytes[3],
                    mac.addr_bytes[4], mac.addr_bytes[5]});
    shared.dpdk_port.push_back(ports.back().id());
    shared.node_port_of[ports.back().id()] = i;
    log->info("port {} = {} (DPDK port {}), {} Gbit/s, delay {} ns", config.ports[i].name,
              ports.back().name(), ports.back().id(), config.ports[i].link.rate_gbps,
              config.ports[i].link.delay_ns);
  }
  if (rte_pdump_init() != 0) log->warn("rte_pdump_init failed: dpdk-dumpcap cannot attach");

  runtime::TscClock clock;
  runtime::StopSignal stop;
  std::optional<switch_emu::SwitchNode> node;
  node.emplace(config, pool.get(), macs, runtime::logger("switch"));
  shared.node = &*node;
  shared.stop = &stop;
  shared.idle_exit_ns = opt.idle_exit_ms * 1'000'000;
  shared.stop_at_ns = opt.duration_ms * 1'000'000;

  // Control: its own thread (never an lcore) reweights every period and publishes bucket tables
  // to the lcores through RCU; each lcore's poll loop is a reader of the domain.
  runtime::RcuDomain rcu(static_cast<unsigned>(layout.size()));
  shared.rcu = &rcu;
  control::ControlTarget target = control::control_target_of(*node);
  target.rcu = &rcu;
  target.node_lock = &shared.lock;
  control::ControlLoopConfig loop_config;
  loop_config.period_ns = config.control.period_ms * 1'000'000;
  loop_config.reweight.target_utilisation = config.control.target_utilisation;
  loop_config.reweight.idle_buckets = config.control.idle_buckets;
  loop_config.links.utilisation_weight = config.control.utilisation_weight;
  control::ControlLoop control_loop(target, clock.now_ns(), loop_config,
                                    runtime::logger("control"));
  shared.control = &control_loop;
  switch_emu::register_switch_telemetry(shared, clock);

  std::vector<std::unique_ptr<switch_emu::SwitchLcore>> handlers;
  std::vector<std::unique_ptr<runtime::PollLoop>> loops;
  for (const auto& l : layout) {
    std::vector<runtime::RxQueue> rx;
    std::vector<runtime::TxQueue> tx;
    for (uint16_t p : l.ports) {
      rx.push_back({&ports[p], 0});
      tx.push_back({&ports[p], 0});
    }
    handlers.push_back(std::make_unique<switch_emu::SwitchLcore>(shared, l.ports));
    runtime::PollLoopConfig loop_cfg;
    loop_cfg.rcu = &rcu;
    loop_cfg.rcu_reader_id = static_cast<unsigned>(loops.size());
    loop_cfg.idle_backoff = opt.backoff.config();
    loops.push_back(std::make_unique<runtime::PollLoop>(rx, tx, *handlers.back(), clock, loop_cfg));
  }
  log->info("running{}: {} ports, {} lcore(s); stop with SIGINT/SIGTERM",
            config.name == control::SwitchConfig{}.name ? "" : " as \"" + config.name + "\"",
            config.ports.size(), lcores.size());
  std::optional<control::ControlThread> control_thread;
  control_thread.emplace(control_loop, shared.control_lock, [&clock] { return clock.now_ns(); });
  runtime::LcoreRunner(lcores).run([&](unsigned, unsigned index) { loops[index]->run(stop); });

  const uint64_t end_ns = clock.now_ns();
  control::TelemetryCommands::clear();
  control_thread.reset();  // after the lcores: a grace period then waits for nobody
  json report = switch_emu::report_json(*node, end_ns);
  const auto& cc = control_loop.counters();
  report["control"] = {
      {"period_ns", loop_config.period_ns},  {"ticks", cc.ticks},
      {"publications", cc.publications},     {"immediate_publications", cc.immediate_publications},
      {"missed_periods", cc.missed_periods}, {"grace_periods", rcu.grace_periods()}};
  uint64_t tx_dropped = 0, loop_count = 0, idle_sleeps = 0, idle_sleep_ns = 0;
  for (const auto& l : loops) {
    const runtime::PollLoopCounters c = l->counters();
    tx_dropped += c.tx_dropped;
    loop_count += c.loops;
    idle_sleeps += c.idle_sleeps;
    idle_sleep_ns += c.idle_sleep_ns;
  }
  report["tx_dropped"] = tx_dropped;
  // Summed over the lcores.
  report["poll_loop"] = {{"loops", loop_count},
                         {"idle_backoff_max_us", opt.backoff.max_sleep_us},
                         {"idle_sleeps", idle_sleeps},
                         {"idle_sleep_ns", idle_sleep_ns}};
  for (size_t i = 0; i < ports.size(); ++i) {
    report["ports"][i]["dpdk"] = switch_emu::ethdev_json(ports[i].id());
  }
  node.reset();  // frees whatever the egress queues still held
  rte_pdump_uninit();
  ports.clear();  // stops ports; net_pcap flushes its files
  report["mempool_in_use_at_exit"] = pool.in_use();
  if (!opt.stats.empty()) {
    std::ofstream f(opt.stats);
    f << report.dump(2) << "\n";
    if (!f) log->error("--stats {}: cannot write", opt.stats);
  }
  // One line a port on stdout: what came in, went out, and was dropped.
  std::printf("%-10s %12s %12s %12s %12s\n", "port", "rx_packets", "tx_packets", "queue_drops",
              "rx_missed");
  for (const auto& p : report["ports"]) {
    uint64_t qd = 0;
    for (const auto& c : p["classes"]) {
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
  std::printf("\nmempool: %u mbufs in use at exit\n", pool.in_use());
  if (!pool.whole()) {
    log->error("{} mbufs were not returned to the pool", pool.in_use());
    return runtime::kExitLeak;
  }
  return runtime::kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const spraynet::control::ConfigError& e) {
    std::fprintf(stderr, "switch_emu: %s\n", e.what());
    return spraynet::runtime::kExitUsage;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "switch_emu: %s\n", e.what());
    return spraynet::runtime::kExitRuntime;
  }
}
