#include "program/node_program.h"

#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_pdump.h>
#include <spdlog/spdlog.h>

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "control/config_reader.h"
#include "dataplane/runtime/logging.h"

namespace spraynet::program {

using nlohmann::json;

NodeProgram::NodeProgram(std::string name, const std::string& description,
                         const std::string& config_help, const std::string& config_option,
                         const std::string& idle_exit)
    : name_(std::move(name)), node_port_of_(RTE_MAX_ETHPORTS, -1) {
  // CLI11 prints "Usage: NAME [OPTIONS]": the name carries the EAL half of the command line.
  app_.name(name_ + " [EAL arguments] --");
  app_.description(description);
  app_.footer("Config keys (YAML):\n" + config_help);
  app_.add_option("--config", opt_.config, config_option)->required();
  app_.add_option("--stats", opt_.stats, "write the end-of-run report (JSON) to this file");
  app_.add_option("--log-level", opt_.log_level, "trace|debug|info|warn|error|critical|off")
      ->capture_default_str();
  app_.add_option("--idle-exit-ms", opt_.idle_exit_ms, idle_exit)->capture_default_str();
  app_.add_option("--duration-ms", opt_.duration_ms,
                  "stop after this long, counted from when the ports are up and the lcores run "
                  "(0: no limit)")
      ->capture_default_str();
  app_.add_option("--tx-drain-us", opt_.tx_drain_us,
                  "a partly filled tx burst is sent after at most this long, as DPDK's l3fwd does "
                  "(fewer, fuller tx bursts); 0: sent after every loop iteration (the lowest "
                  "latency)")
      ->check(CLI::Range(uint64_t{0}, uint64_t{1'000'000}))
      ->capture_default_str();
  runtime::add_idle_backoff_options(app_, opt_.backoff);
}

NodeProgram::~NodeProgram() {
  loops_.clear();
  if (pdump_) rte_pdump_uninit();
  ports_.clear();
}

std::optional<int> NodeProgram::parse(int argc, char** argv) {
  // Both halves of the command line first, then the config: a mistake in either is then the
  // only thing printed, before EAL says anything (and --help needs no EAL, root or hugepages).
  args_ = runtime::split_program_args(argc, argv);
  if (const auto code = runtime::parse_program_args(app_, args_, name_)) return code;
  runtime::set_level(opt_.log_level);
  return std::nullopt;
}

void NodeProgram::resolve_backoff(uint64_t config_max_sleep_us, unsigned config_idle_polls) {
  runtime::resolve_idle_backoff(app_, opt_.backoff, config_max_sleep_us, config_idle_polls);
}

void NodeProgram::start_eal() {
  eal_.emplace(args_.eal);
  log_ = runtime::logger(name_);
  clock_.emplace();
}

void NodeProgram::set_telemetry_socket_mode(unsigned mode) {
  const std::string path = std::string(rte_eal_get_runtime_dir()) + "/dpdk_telemetry.v2";
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    log_->debug("no telemetry socket at {}: nothing to protect", path);
    return;
  }
  if (::chmod(path.c_str(), static_cast<mode_t>(mode)) != 0) {
    throw std::runtime_error("chmod " + path + ": " + std::strerror(errno));
  }
  log_->info("telemetry socket {} (owner uid {}, mode {:o})", path, st.st_uid, mode);
}

unsigned NodeProgram::make_pool(unsigned configured_mbufs, unsigned data_room,
                                const std::vector<std::string>& devices, unsigned lcores,
                                unsigned extra, const std::vector<PortQueues>& queues) {
  constexpr unsigned kDescriptors = 1024, kBurst = 32, kCache = 256;
  const auto ports = static_cast<unsigned>(devices.size());
  unsigned af_xdp_ports = 0;
  for (const auto& d : devices) af_xdp_ports += runtime::is_af_xdp_device(d) ? 1 : 0;
  if (af_xdp_ports != 0) {
    // net_af_xdp maps every mbuf of the pool as one umem chunk, which the kernel takes only up
    // to a page: the default data room (4480) would fail as "Failed to create umem".
    const unsigned fit = runtime::af_xdp_max_data_room();
    if (data_room > fit) {
      // A received frame starts after DPDK's headroom and XDP's (XDP_PACKET_HEADROOM, 256).
      log_->info("mbuf data room {} bytes instead of {}: with net_af_xdp an mbuf must fit one "
                 "umem chunk (a page); frames of at most {} bytes",
                 fit, data_room, fit - RTE_PKTMBUF_HEADROOM - 256);
      data_room = fit;
    }
  }
  runtime::PacketPoolConfig pc;
  pc.name = name_;
  pc.data_room = static_cast<uint16_t>(data_room);
  // A net_af_xdp queue holds 2048 mbufs in its fill ring where pool_size_for counts 1024 rx
  // descriptors.
  pc.mbufs = configured_mbufs != 0 ? configured_mbufs
                                   : runtime::pool_size_for(ports, 1, 1, kDescriptors, kDescriptors,
                                                            lcores, kBurst, kCache) +
                                         extra + af_xdp_ports * 1024;
  if (configured_mbufs == 0) {
    // Descriptors beyond one queue of each, 1024 deep.
    for (size_t i = 0; i < queues.size(); ++i) {
      const PortQueues& q = queues[i];
      const unsigned more = unsigned{q.rx_queues} * q.rx_descriptors +
                            unsigned{q.tx_queues} * q.tx_descriptors + kBurst * (q.rx_queues - 1u);
      pc.mbufs += more > 2 * kDescriptors ? more - 2 * kDescriptors : 0;
      // net_af_xdp's further queues: each fill ring holds 2048 whatever the descriptors.
      if (i < devices.size() && runtime::is_af_xdp_device(devices[i])) {
        pc.mbufs += 2048u * (q.rx_queues - 1u);
      }
    }
  }
  try {
    pool_.emplace(pc);
  } catch (const std::exception& e) {
    const uint64_t mib = (uint64_t{pc.mbufs} * (pc.data_room + 128 + 64) + (1 << 20) - 1) >> 20;
    throw std::runtime_error(std::string(e.what()) + " (" + std::to_string(pc.mbufs) +
                             " mbufs of " + std::to_string(pc.data_room) + " bytes, about " +
                             std::to_string(mib) + " MiB" +
                             (configured_mbufs != 0 ? ", mempool_mbufs in " + opt_.config : "") +
                             "): give the EAL more memory (-m MiB with --no-huge, or hugepages)"
                             " or ask for fewer mbufs");
  }
  return data_room;
}

runtime::Port& NodeProgram::add_port(const std::string& name, const std::string& device,
                                     const std::string& key, const std::string& what,
                                     const PortQueues& queues) {
  runtime::PortConfig portcfg;
  portcfg.device = device;
  portcfg.rx_queues = queues.rx_queues;
  portcfg.tx_queues = queues.tx_queues;
  portcfg.rx_descriptors = queues.rx_descriptors;
  portcfg.tx_descriptors = queues.tx_descriptors;
  // Two node ports on one DPDK port would share its queues; said here, at the config's key,
  // rather than as "busy" from rte_eth_dev_configure.
  for (size_t i = 0; i < devices_.size(); ++i) {
    if (devices_[i] == device) {
      throw control::ConfigError(
          opt_.config, key, "\"" + device + "\" is already port \"" + names_[i] + "\"'s device");
    }
  }
  devices_.push_back(device);
  names_.push_back(name);
  try {
    ports_.emplace_back(portcfg, pool_->get());
  } catch (const runtime::PortConfigError& e) {
    throw control::ConfigError(opt_.config, key, e.what());
  } catch (const std::exception& e) {
    // The device's (or its kernel's) answer, not the config's: exit 1, still naming the key.
    throw std::runtime_error(std::string(e.what()) + " (" + key + " in " + opt_.config + ")");
  }
  runtime::Port& port = ports_.back();
  if (node_port_of_[port.id()] >= 0) {
    throw control::ConfigError(opt_.config, key,
                               "\"" + device + "\" is DPDK port " + std::to_string(port.id()) +
                                   ", which an earlier port already uses");
  }
  const rte_ether_addr mac = port.mac();
  macs_.push_back({mac.addr_bytes[0], mac.addr_bytes[1], mac.addr_bytes[2], mac.addr_bytes[3],
                   mac.addr_bytes[4], mac.addr_bytes[5]});
  node_port_of_[port.id()] = static_cast<int>(dpdk_port_.size());
  dpdk_port_.push_back(port.id());
  log_->info("port {} = {} (DPDK port {}){}", name, port.name(), port.id(),
             what.empty() ? "" : ", " + what);
  return port;
}

void NodeProgram::ports_ready() {
  pdump_ = rte_pdump_init() == 0;
  if (!pdump_) log_->warn("rte_pdump_init failed: dpdk-dumpcap cannot attach");
}

void NodeProgram::add_loop(const LcorePlan& plan,
                           const std::vector<std::pair<uint16_t, uint16_t>>& tx_queues,
                           runtime::BurstHandler& handler, runtime::RcuDomain& rcu) {
  if (!rte_lcore_is_enabled(plan.lcore)) {
    throw control::ConfigError(opt_.config, "lcores",
                               "lcore " + std::to_string(plan.lcore) +
                                   " is not enabled by the EAL arguments (-l/--lcores)");
  }
  std::vector<runtime::RxQueue> rx;
  std::vector<runtime::TxQueue> tx;
  if (plan.rx.empty()) {
    for (uint16_t p : plan.ports) rx.push_back({&ports_.at(p), 0});
  } else {
    for (const auto& [p, q] : plan.rx) rx.push_back({&ports_.at(p), q});
  }
  for (const auto& [p, q] : tx_queues) {
    runtime::Port& port = ports_.at(p);
    if (q >= port.config().tx_queues) {
      throw std::runtime_error("port " + names_.at(p) + " has no tx queue " + std::to_string(q));
    }
    tx.push_back({&port, q});
  }
  runtime::PollLoopConfig cfg;
  cfg.rcu = &rcu;
  cfg.rcu_reader_id = static_cast<unsigned>(loops_.size());
  cfg.idle_backoff = opt_.backoff.config();
  cfg.drain_interval_ns = opt_.tx_drain_us * 1000;
  loops_.push_back(std::make_unique<runtime::PollLoop>(rx, tx, handler, *clock_, cfg));
  lcore_of_loop_.push_back(plan.lcore);
  auto& [rx_names, tx_names] = queues_of_loop_.emplace_back();
  for (const auto& q : rx) {
    rx_names.push_back(names_.at(node_port_of_[q.port->id()]) + ":" + std::to_string(q.queue));
  }
  for (const auto& [p, q] : tx_queues) tx_names.push_back(names_.at(p) + ":" + std::to_string(q));
}

void NodeProgram::run(const std::vector<unsigned>& lcores, control::ControlLoop& loop,
                      std::mutex& control_lock) {
  // Progress from outside (a stalled lcore stops counting loops): the loops publish it, so
  // the telemetry thread takes no lock the lcores take.
  control::TelemetryCommands::add(
      "/spraynet/lcores",
      "Each lcore's poll-loop iterations, rx and tx packets so far (they only grow while it "
      "runs). No parameters",
      [this](std::string_view) {
        json lcores = json::array();
        for (size_t i = 0; i < loops_.size(); ++i) {
          const runtime::PollLoopProgress p = loops_[i]->progress();
          lcores.push_back({{"lcore", lcore_of_loop_[i]},
                            {"loops", p.loops},
                            {"rx_packets", p.rx_packets},
                            {"tx_packets", p.tx_packets},
                            {"rx_queues", queues_of_loop_[i].first},
                            {"tx_queues", queues_of_loop_[i].second}});
        }
        return json{{"lcores", lcores}};
      });
  std::optional<control::ControlThread> control_thread;
  // On EAL's control CPUs (those no lcore polls), not on the main lcore's CPU that EAL pinned
  // this thread to: there the control loop would only run when the poll loop is preempted.
  cpu_set_t control_cpus;
  const bool have_cpus = runtime::Eal::control_cpus(control_cpus);
  if (have_cpus) {
    std::string list;
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &control_cpus)) list += (list.empty() ? "" : ",") + std::to_string(c);
    }
    log_->info("control thread on CPUs {} (EAL's control CPUs: those no lcore polls, else the "
               "main lcore's)",
               list);
  }
  control_thread.emplace(loop, control_lock, [this] { return clock_->now_ns(); }, 10'000'000,
                         have_cpus ? &control_cpus : nullptr);
  runtime::LcoreRunner(lcores).run([&](unsigned, unsigned index) { loops_[index]->run(stop_); });
  control::TelemetryCommands::clear();
  control_thread.reset();  // after the lcores: a grace period then waits for nobody
}

void NodeProgram::add_run_report(json& report, const runtime::RcuDomain& rcu,
                                 const control::ControlLoop& loop) const {
  const auto& cc = loop.counters();
  report["control"] = {
      {"period_ns", loop.config().period_ns}, {"ticks", cc.ticks},
      {"publications", cc.publications},      {"immediate_publications", cc.immediate_publications},
      {"missed_periods", cc.missed_periods},  {"grace_periods", rcu.grace_periods()}};
  uint64_t tx_dropped = 0, loop_count = 0, idle_sleeps = 0, idle_sleep_ns = 0, busy_ns = 0;
  for (const auto& l : loops_) {
    const runtime::PollLoopCounters c = l->counters();
    tx_dropped += c.tx_dropped;
    loop_count += c.loops;
    idle_sleeps += c.idle_sleeps;
    idle_sleep_ns += c.idle_sleep_ns;
    busy_ns += c.busy_ns;
  }
  report["tx_dropped"] = tx_dropped;
  // Summed over the lcores.
  // Which lcore polls which (port, rx queue) and sends on which tx queue.
  json map = json::array();
  for (size_t i = 0; i < loops_.size(); ++i) {
    map.push_back({{"lcore", lcore_of_loop_[i]},
                   {"rx_queues", queues_of_loop_[i].first},
                   {"tx_queues", queues_of_loop_[i].second}});
  }
  report["lcore_queues"] = std::move(map);
  report["poll_loop"] = {{"lcores", loops_.size()},
                         {"loops", loop_count},
                         {"idle_backoff_max_us", opt_.backoff.max_sleep_us},
                         {"idle_sleeps", idle_sleeps},
                         {"idle_sleep_ns", idle_sleep_ns},
                         {"busy_ns", busy_ns}};
}

void NodeProgram::close_ports(json& report) {
  loops_.clear();
  lcore_of_loop_.clear();
  queues_of_loop_.clear();
  if (pdump_) rte_pdump_uninit();
  pdump_ = false;
  unsigned held = 0;
  for (const auto& p : ports_) held += p.pmd_held_after_close();
  ports_.clear();  // stops and closes the ports; net_pcap flushes its files
  // Closed, net_af_xdp still has not given back the mbufs of its fill rings (DPDK 22.11 never
  // does); no one can reach them now, so they go back, if they are all that is out.
  const unsigned reclaimed = pool_->reclaim_unreachable(held);
  if (reclaimed != 0) {
    log_->info("{} mbufs that net_af_xdp kept in its fill rings after close returned to the pool",
               reclaimed);
  }
  pmd_held_ = reclaimed == 0 ? held : 0;
  report["mempool_in_use_at_exit"] = pool_->in_use();
  report["mempool_reclaimed_from_pmd"] = reclaimed;
}

int NodeProgram::finish(const json& report) {
  if (!opt_.stats.empty()) {
    std::ofstream f(opt_.stats);
    f << report.dump(2) << "\n";
    if (!f) log_->error("--stats {}: cannot write", opt_.stats);
  }
  std::printf("mempool: %u mbufs in use at exit\n", pool_->in_use());
  if (!pool_->whole()) {
    if (pmd_held_ != 0) {
      log_->error("{} mbufs were not returned to the pool ({} of them net_af_xdp's fill rings; "
                  "the rest the program's)",
                  pool_->in_use(), pmd_held_);
    } else {
      log_->error("{} mbufs were not returned to the pool", pool_->in_use());
    }
    return runtime::kExitLeak;
  }
  return runtime::kExitOk;
}

int run_main(const char* name, int (*run)(int, char**), int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const control::ConfigError& e) {
    std::fprintf(stderr, "%s: %s\n", name, e.what());
    return runtime::kExitUsage;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", name, e.what());
    return runtime::kExitRuntime;
  }
}

}  // namespace spraynet::program
