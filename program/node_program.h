// The skeleton both node programs (switch_emu, nic_emu) are built on, in the order a run goes:
//
//   NodeProgram prog("switch_emu", ...);          CLI: the options every node program takes
//   prog.app().add_option(...);                    the program's own options, if any
//   if (auto code = prog.parse(argc, argv)) ...    both halves of the command line, before EAL
//   config = load(prog.options().config);          the program's config (errors exit 2)
//   prog.resolve_backoff(config's idle_backoff);
//   prog.start_eal();                              EAL, then the mempool and the ports
//   prog.make_pool(mbufs); prog.add_port(...)...
//   NodeShared<Node> shared; prog.attach(shared);  the driver's view of the ports, stop, limits
//   ... node, RCU domain, control loop, telemetry (the program's own) ...
//   prog.run_lcores(shared, plans, rcu, loop, shared.control_lock);
//   report = ...; prog.add_run_report(report, rcu, loop);
//   node.reset(); prog.close_ports(report);        then the program prints its summary
//   return prog.finish(report);                    --stats, the mempool check, the exit code
//
// and main() is `return program::run_main("switch_emu", run, argc, argv);`. Whatever both
// programs do lives here once: --help without EAL, pool sizing, ports and their MACs, the
// control thread, the lcores and their poll loops, the poll-loop and control counters in the
// report, rte_pdump, the end-of-run mempool check and the exit codes; and the telemetry command
// /spraynet/lcores (each lcore's loop iterations, rx and tx packets while it runs).
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "control/control_loop.h"
#include "control/control_thread.h"
#include "control/telemetry_commands.h"
#include "dataplane/runtime/eal.h"
#include "dataplane/runtime/lcore_runner.h"
#include "dataplane/runtime/packet_pool.h"
#include "dataplane/runtime/poll_loop.h"
#include "dataplane/runtime/port.h"
#include "dataplane/runtime/program_args.h"
#include "dataplane/runtime/rcu_domain.h"
#include "dataplane/runtime/stop_signal.h"
#include "dataplane/runtime/tsc_clock.h"
#include "dataplane/wire/packet_builder.h"  // MacAddress
#include "program/node_lcore.h"

namespace spdlog {
class logger;
}

namespace spraynet::program {

// The options every node program takes.
struct NodeOptions {
  std::string config;
  std::string stats;
  std::string log_level = "info";
  uint64_t idle_exit_ms = 0;
  uint64_t duration_ms = 0;
  uint64_t tx_drain_us = 100;  // a partly filled tx burst waits at most this long (0: none)
  runtime::IdleBackoffOptions backoff;
};

// One lcore of the run: the EAL lcore, the node ports whose egress it owns, and the (node port,
// rx queue) pairs it polls (empty: queue 0 of each of `ports`). It transmits on what its
// NodeLcore says (NodeLcore::tx_queues).
struct LcorePlan {
  unsigned lcore = 0;
  std::vector<uint16_t> ports;
  std::vector<std::pair<uint16_t, uint16_t>> rx;
};

// A port's queues and descriptors (runtime::PortConfig's, without the device).
struct PortQueues {
  uint16_t rx_queues = 1, tx_queues = 1, rx_descriptors = 1024, tx_descriptors = 1024;
};

class NodeProgram {
 public:
  // `name`: the program ("switch_emu"); `description`: --help's text; `config_help`: the list
  // of config keys for --help's footer; `config_option`: what --config reads; `idle_exit`: what
  // --idle-exit-ms waits for.
  NodeProgram(std::string name, const std::string& description, const std::string& config_help,
              const std::string& config_option, const std::string& idle_exit);
  ~NodeProgram();

  CLI::App& app() { return app_; }
  const NodeOptions& options() const { return opt_; }
  const std::string& name() const { return name_; }

  // Both halves of the command line, before EAL: nullopt to go on, else the exit code (help
  // printed, or one line saying what is wrong). Sets the log level.
  std::optional<int> parse(int argc, char** argv);
  // The idle back-off: an option not given takes the config's value.
  void resolve_backoff(uint64_t config_max_sleep_us, unsigned config_idle_polls);

  void start_eal();
  // The telemetry socket EAL made (RUNTIME_DIR/dpdk_telemetry.v2, owned by the user that ran
  // the program) gets `mode` (0600: only its owner may connect). Logged; no socket (EAL's
  // --no-telemetry): nothing to do.
  void set_telemetry_socket_mode(unsigned mode);
  // The mempool: `mbufs` when the config sets it (non-zero), else what descriptors, caches and
  // bursts of the ports (`devices`, in node port order) on `lcores` lcores need
  // (runtime::pool_size_for) plus `extra` (what egress queues, reorder buffers may hold).
  // Returns the mbuf data room used: `data_room`, except with a net_af_xdp port, where an mbuf
  // must fit one umem chunk (a page): then at most runtime::af_xdp_max_data_room(), logged,
  // and 1024 more mbufs per such port (its fill ring holds 2048, its rx ring none).
  // `queues`: each port's queues and descriptors (empty: one of each, 1024 descriptors).
  unsigned make_pool(unsigned configured_mbufs, unsigned data_room,
                     const std::vector<std::string>& devices, unsigned lcores, unsigned extra,
                     const std::vector<PortQueues>& queues = {});
  // The next node port: a DPDK port on `device` (PCI address, vdev spec or name), logged with
  // `what` after its names. `key` is where the config gave the device (ports[2].device): a
  // mistake in the spec is a config error there (control::ConfigError, exit 2); a device that
  // is missing or refuses (an interface not there, a probe or queue the driver or kernel
  // refuses) a std::runtime_error naming the key (exit 1).
  runtime::Port& add_port(const std::string& name, const std::string& device,
                          const std::string& key, const std::string& what = "",
                          const PortQueues& queues = {});
  // After the last port: rte_pdump for dpdk-dumpcap.
  void ports_ready();

  rte_mempool* pool() const { return pool_->get(); }
  const std::vector<MacAddress>& macs() const { return macs_; }
  std::vector<runtime::Port>& ports() { return ports_; }
  const runtime::TscClock& clock() const { return *clock_; }
  std::shared_ptr<spdlog::logger> log() const { return log_; }

  // The driver's view: port maps, the stop signal, --idle-exit-ms and --duration-ms.
  template <class Node>
  void attach(NodeShared<Node>& shared, Node& node) {
    shared.node = &node;
    shared.dpdk_port = dpdk_port_;
    shared.node_port_of = node_port_of_;
    shared.stop = &stop_;
    shared.idle_exit_ns = opt_.idle_exit_ms * 1'000'000;
    shared.stop_at_ns = 0;  // run_lcores() sets it from --duration-ms as the lcores start
  }

  // Runs the lcores until the stop: one NodeLcore and PollLoop per plan (reader i of `rcu`),
  // with the control thread driving `loop` under `control_lock` beside them. Returns once every
  // lcore has stopped, the telemetry commands are gone and the control thread has joined.
  template <class Node>
  void run_lcores(NodeShared<Node>& shared, const std::vector<LcorePlan>& plans,
                  runtime::RcuDomain& rcu, control::ControlLoop& loop, std::mutex& control_lock,
                  StopPolicy<Node>* policy = nullptr) {
    std::vector<unsigned> lcores;
    shared.lcores = static_cast<unsigned>(plans.size());
    // Every lcore's lane first: which tx queues a lane sends on depends on how many there are.
    std::vector<NodeLcore<Node>*> made;
    for (const auto& plan : plans) {
      auto h = std::make_unique<NodeLcore<Node>>(shared, plan.ports, policy);
      made.push_back(h.get());
      handlers_.push_back(std::move(h));
    }
    for (size_t i = 0; i < plans.size(); ++i) {
      add_loop(plans[i], made[i]->tx_queues(), *made[i], rcu);
      lcores.push_back(plans[i].lcore);
    }
    // --duration-ms counts from here, when the lcores start: EAL and port set-up take seconds
    // on a busy machine, and a short run would otherwise end as it began.
    if (opt_.duration_ms != 0) shared.stop_at_ns = clock().now_ns() + opt_.duration_ms * 1'000'000;
    run(lcores, loop, control_lock);
  }

  // The report's run-wide parts: control counters, summed poll-loop counters, tx drops.
  void add_run_report(nlohmann::json& report, const runtime::RcuDomain& rcu,
                      const control::ControlLoop& loop) const;
  // After the node is gone (it frees what it held): rte_pdump and the ports stop and close
  // (net_pcap flushes its files); what net_af_xdp kept of the pool past close goes back to it;
  // the report gets the mbufs still out (`mempool_in_use_at_exit`) and those put back
  // (`mempool_reclaimed_from_pmd`).
  void close_ports(nlohmann::json& report);
  // --stats, the mempool line and check: the exit code.
  int finish(const nlohmann::json& report);

 private:
  void add_loop(const LcorePlan& plan, const std::vector<std::pair<uint16_t, uint16_t>>& tx,
                runtime::BurstHandler& handler, runtime::RcuDomain& rcu);
  void run(const std::vector<unsigned>& lcores, control::ControlLoop& loop,
           std::mutex& control_lock);

  std::string name_;
  CLI::App app_;
  NodeOptions opt_;
  std::optional<runtime::Eal> eal_;
  std::shared_ptr<spdlog::logger> log_;
  std::optional<runtime::PacketPool> pool_;
  std::vector<runtime::Port> ports_;
  std::vector<MacAddress> macs_;
  std::vector<uint16_t> dpdk_port_;
  std::vector<int> node_port_of_;
  std::vector<std::string> devices_, names_;  // what add_port was given, in node port order
  unsigned pmd_held_ = 0;  // of the mbufs out after close_ports, those the PMDs kept
  runtime::ProgramArgs args_;
  std::optional<runtime::TscClock> clock_;  // after EAL: it reads the TSC's rate
  runtime::StopSignal stop_;
  std::vector<std::unique_ptr<runtime::BurstHandler>> handlers_;  // one per lcore
  std::vector<std::unique_ptr<runtime::PollLoop>> loops_;         // the same order
  std::vector<unsigned> lcore_of_loop_;                           // the same order
  // The same order: the (port, queue) pairs each loop polls and sends on, as "name:queue".
  std::vector<std::pair<std::vector<std::string>, std::vector<std::string>>> queues_of_loop_;
  bool pdump_ = false;
};

// main() of a node program: runs `run`, config errors exit 2 and runtime errors 1, each as one
// line "NAME: what".
int run_main(const char* name, int (*run)(int, char**), int argc, char** argv);

}  // namespace spraynet::program
