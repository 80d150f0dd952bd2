// nic_emu: the spraynet NIC on a DPDK poll-mode lcore.
//
//   nic_emu [EAL arguments] -- --config FILE [--stats FILE] [--idle-exit-ms N] ...
//
// One host port and up to 16 uplinks, each a DPDK port (PCI, vdev, or a vdev spec in the
// config). TX: the host's RoCEv2 packets are sprayed per packet over the uplinks with a PPCID in
// the UDP checksum; RX: the reorder engine puts each QP back in PSN order, the checksum is set
// back to 0, and the host port gets them. Without a host port the RC traffic engine plays the
// host. A control thread publishes spray weights from the link-state table through RCU.
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_pdump.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "control/bucket_reweighter.h"
#include "control/control_loop.h"
#include "control/control_thread.h"
#include "control/nic_config.h"
#include "control/telemetry_commands.h"
#include "dataplane/runtime/eal.h"
#include "dataplane/runtime/lcore_runner.h"
#include "dataplane/runtime/logging.h"
#include "dataplane/runtime/packet_pool.h"
#include "dataplane/runtime/poll_loop.h"
#include "dataplane/runtime/port.h"
#include "dataplane/runtime/program_args.h"
#include "dataplane/runtime/rcu_domain.h"
#include "dataplane/runtime/stop_signal.h"
#include "dataplane/runtime/tsc_clock.h"
#include "nic_emu/nic_lcore.h"
#include "nic_emu/nic_node.h"
#include "nic_emu/nic_report.h"
#include "nic_emu/nic_telemetry.h"

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
  bool run_until_signal = false;
};

void describe(CLI::App& app, Options& o) {
  // CLI11 prints "Usage: NAME [OPTIONS]": the name carries the EAL half of the command line.
  app.name("nic_emu [EAL arguments] --");
  app.description(
      "nic_emu: the spraynet NIC on a DPDK poll-mode lcore.\n"
      "EAL arguments are DPDK's own (e.g. -l 0 --no-huge -m 512 --no-pci --file-prefix nic\n"
      "--vdev net_ring0); ports may also be vdev specs in the config. Counters: "
      "dpdk-telemetry.py -f PREFIX, commands under /spraynet/.");
  app.add_option("--config", o.config, "NIC config (YAML, top-level key nic:)")->required();
  app.add_option("--stats", o.stats, "write the end-of-run report (JSON) to this file");
  app.add_option("--log-level", o.log_level, "trace|debug|info|warn|error|critical|off")
      ->capture_default_str();
  app.add_option("--idle-exit-ms", o.idle_exit_ms,
                 "stop once nothing has arrived for this long and nothing is queued or held "
                 "(0: no idle exit); for pcap inputs")
      ->capture_default_str();
  app.add_option("--duration-ms", o.duration_ms, "stop after this long (0: no limit)")
      ->capture_default_str();
  runtime::add_idle_backoff_options(app, o.backoff);
  app.add_flag("--run-until-signal", o.run_until_signal,
               "with the RC traffic engine: keep running after every message is acknowledged "
               "(default: stop then)");
  app.footer("Config keys (YAML):\n" + control::nic_config_help());
}

void register_telemetry(nic_emu::NicShared& s, control::ControlLoop& loop) {
  using control::TelemetryCommands;
  auto locked = [&s](auto fn) {
    return [&s, fn](std::string_view) {
      std::lock_guard<std::mutex> g(s.lock);
      return fn(*s.node);
    };
  };
  TelemetryCommands::add("/spraynet/ports", "Ports: uplinks then host. No parameters",
                         locked(nic_emu::ports_json));
  TelemetryCommands::add("/spraynet/drops", "Drops by cause. No parameters",
                         locked(nic_emu::drops_json));
  TelemetryCommands::add("/spraynet/spray", "Spray mode, weights, packets per uplink",
                         [&s](std::string_view) { return nic_emu::spray_telemetry(s); });
  TelemetryCommands::add("/spraynet/ppcid", "Received PPCIDs by verdict and path id",
                         locked(nic_emu::ppcid_json));
  TelemetryCommands::add("/spraynet/reorder", "Reorder engine counters",
                         locked(nic_emu::reorder_json));
  TelemetryCommands::add("/spraynet/heat_map", "Arrivals per QP per uplink (spraying heat map)",
                         locked(nic_emu::heat_map_json));
  TelemetryCommands::add("/spraynet/rc", "RC traffic engine counters and completion times",
                         locked([](const nic_emu::NicNode& n) {
                           json j = nic_emu::rc_engine_json(n);
                           return j.is_null() ? json{{"error", "no RC engine (a host is set)"}} : j;
                         }));
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
  Options opt;
  CLI::App app;
  describe(app, opt);
  // Both halves of the command line first, then the config: a mistake in either is then the
  // only thing printed, before EAL says anything (and --help needs no EAL, root or hugepages).
  const runtime::ProgramArgs args = runtime::split_program_args(argc, argv);
  if (const auto code = runtime::parse_program_args(app, args, "nic_emu")) return *code;
  runtime::set_level(opt.log_level);
  const control::NicConfig config = control::load_nic_config(opt.config);
  runtime::resolve_idle_backoff(app, opt.backoff, config.idle_backoff.max_sleep_us,
                                config.idle_backoff.idle_polls);

  runtime::Eal eal(args.eal);
  auto log = runtime::logger("nic_emu");

  const unsigned desc = 1024;
  const unsigned nports = static_cast<unsigned>(config.uplinks.size() + (config.host ? 1 : 0));
  runtime::PacketPoolConfig pc;
  pc.name = "nic_emu";
  pc.data_room = static_cast<uint16_t>(config.mbuf_data_room);
  // Descriptors and bursts, plus what egress and the reorder engine may hold.
  pc.mbufs = config.mempool_mbufs != 0
                 ? config.mempool_mbufs
                 : runtime::pool_size_for(nports, 1, 1, desc, desc, 1, 32, 256) + 8192 +
                       (config.reorder_enabled() ? config.reorder.max_buffered : 0);
  runtime::PacketPool pool(pc);

  // Node ports: uplinks in config order, then the host.
  std::vector<runtime::Port> ports;
  std::vector<MacAddress> macs;
  nic_emu::NicShared shared;
  shared.node_port_of.assign(RTE_MAX_ETHPORTS, -1);
  auto add_port = [&](const std::string& name, const std::string& device) {
    runtime::PortConfig portcfg;
    portcfg.device = device;
    portcfg.rx_descriptors = portcfg.tx_descriptors = desc;
    ports.emplace_back(portcfg, pool.get());
    const rte_ether_addr mac = ports.back().mac();
    macs.push_back({mac.addr_bytes[0], mac.addr_bytes[1], mac.addr_bytes[2], mac.addr_bytes[3],
                    mac.addr_bytes[4], mac.addr_bytes[5]});
    shared.node_port_of[ports.back().id()] = static_cast<int>(shared.dpdk_port.size());
    shared.dpdk_port.push_back(ports.back().id());
    log->info("port {} = {} (DPDK port {})", name, ports.back().name(), ports.back().id());
  };
  for (const auto& u : config.uplinks) add_port(u.name, u.device);
  if (config.host) add_port(config.host->name, config.host->device);
  if (rte_pdump_init() != 0) log->warn("rte_pdump_init failed: dpdk-dumpcap cannot attach");

  runtime::TscClock clock;
  runtime::StopSignal stop;
  std::optional<nic_emu::NicNode> node;
  node.emplace(config, pool.get(), macs, runtime::logger("nic"));
  shared.node = &*node;
  shared.stop = &stop;
  shared.idle_exit_ns = opt.idle_exit_ms * 1'000'000;
  shared.stop_at_ns = opt.duration_ms * 1'000'000;
  shared.stop_when_done = !config.host && !opt.run_until_signal;

  // Control: the uplinks' link-state table every period; weighted spraying takes its weights
  // from it, published to the lcore through RCU.
  runtime::RcuDomain rcu(1);
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
  control::ControlLoop control_loop(target, clock.now_ns(), loop_config,
                                    runtime::logger("control"));
  register_telemetry(shared, control_loop);

  nic_emu::NicLcore handler(shared);
  std::vector<runtime::RxQueue> rx;
  std::vector<runtime::TxQueue> tx;
  for (auto& p : ports) {
    rx.push_back({&p, 0});
    tx.push_back({&p, 0});
  }
  runtime::PollLoopConfig loop_cfg;
  loop_cfg.rcu = &rcu;
  loop_cfg.rcu_reader_id = 0;
  loop_cfg.idle_backoff = opt.backoff.config();
  runtime::PollLoop loop(rx, tx, handler, clock, loop_cfg);
  log->info("running{}: {} uplinks, {}, spray {}, receive {}; stop with SIGINT/SIGTERM",
            config.name == control::NicConfig{}.name ? "" : " as \"" + config.name + "\"",
            config.uplinks.size(),
            config.host ? "host port " + config.host->name : std::string("RC traffic engine"),
            to_string(config.spray.mode), to_string(config.receive));
  std::optional<control::ControlThread> control_thread;
  control_thread.emplace(control_loop, shared.control_lock, [&clock] { return clock.now_ns(); });
  runtime::LcoreRunner({rte_get_main_lcore()}).run([&](unsigned, unsigned) { loop.run(stop); });
  control::TelemetryCommands::clear();
  control_thread.reset();

  json report = nic_emu::report_json(*node);
  report["tx_dropped"] = loop.counters().tx_dropped;
  if (!report["rc_engine"].is_null()) {
    // Bytes acknowledged over the time from the engine's start to its last completion (or to
    // the stop, when it did not finish): the run's goodput.
    const uint64_t end = shared.rc_done_ns != 0 ? shared.rc_done_ns : clock.now_ns();
    const uint64_t elapsed = end > shared.rc_started_ns ? end - shared.rc_started_ns : 0;
    const uint64_t acked = report["rc_engine"]["requester"]["bytes_acked"].get<uint64_t>();
    report["rc_engine"]["elapsed_ns"] = elapsed;
    report["rc_engine"]["goodput_gbps"] =
        elapsed == 0 ? 0.0 : static_cast<double>(acked) * 8.0 / static_cast<double>(elapsed);
  }
  report["poll_loop"] = {{"loops", loop.counters().loops},
                         {"idle_backoff_max_us", opt.backoff.max_sleep_us},
                         {"idle_sleeps", loop.counters().idle_sleeps},
                         {"idle_sleep_ns", loop.counters().idle_sleep_ns}};
  report["control"] = {{"ticks", control_loop.counters().ticks},
                       {"publications", control_loop.counters().publications},
                       {"grace_periods", rcu.grace_periods()}};
  node.reset();
  rte_pdump_uninit();
  ports.clear();  // stops ports; net_pcap flushes its files
  report["mempool_in_use_at_exit"] = pool.in_use();
  if (!opt.stats.empty()) {
    std::ofstream f(opt.stats);
    f << report.dump(2) << "\n";
    if (!f) log->error("--stats {}: cannot write", opt.stats);
  }
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
  std::printf("pipeline drops: %lu\nmempool: %u mbufs in use at exit\n",
              report["drops"]["total"].get<uint64_t>(), pool.in_use());
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
    std::fprintf(stderr, "nic_emu: %s\n", e.what());
    return spraynet::runtime::kExitUsage;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "nic_emu: %s\n", e.what());
    return spraynet::runtime::kExitRuntime;
  }
}
