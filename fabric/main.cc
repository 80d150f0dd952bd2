// fabric_emu: whole leaf-spine fabrics of the real switch and NIC pipelines in virtual time.
// Runs every mode over every seed, prints one row per mode, writes the JSON report, the
// per-link timeseries and the plots when asked.
#include <rte_errno.h>
#include <rte_lcore.h>
#include <pthread.h>
#include <rte_mbuf.h>
#include <sched.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "control/config_reader.h"
#include "dataplane/runtime/eal.h"
#include "dataplane/runtime/growing_mbuf_pool.h"
#include "dataplane/runtime/logging.h"
#include "dataplane/runtime/program_args.h"
#include "fabric/cdf_plan.h"
#include "fabric/fabric.h"
#include "fabric/config_keys.h"
#include "fabric/huge_heap.h"
#include "fabric/flow_size_cdf.h"
#include "fabric/scenario.h"
#include "fabric/sweep_progress.h"
#include "fabric/source_tree.h"
#ifdef SPRAYNET_HAVE_MPI
#include "fabric/kernel/mpi_rank_link.h"
#endif

using namespace spraynet;
using namespace spraynet::fabric;

namespace {

// Mbufs: what every requester may have unacknowledged, plus room for ACKs and PFC frames.
uint64_t mbufs_for(const FabricConfig& config) {
  uint64_t qps = 0;
  switch (config.workload) {
    case Workload::kPermutation: qps = uint64_t{config.hosts()} * config.qps_per_host; break;
    case Workload::kAllreduce: qps = uint64_t{config.hosts()} * config.channels; break;
    case Workload::kAlltoall: qps = uint64_t{config.hosts()} * (config.hosts() - 1); break;
    case Workload::kIncast: qps = config.incast_senders; break;
    case Workload::kCdf: qps = uint64_t{config.hosts()} * std::min<uint64_t>(config.hosts(), 16); break;
  }
  // Bounded by what the fabric can hold in flight and queued in practice (a few BDPs a host):
  // beyond it a requester finds the pool empty, counts it and retries (pool_empty).
  const uint64_t window = config.transport == "irn" ? config.irn_bdp() : config.max_in_flight;
  return std::clamp<uint64_t>(
      std::min<uint64_t>(qps * window, uint64_t{config.hosts()} * config.planes * 256) + 8192,
      16383, (1u << 18) - 1);
}

std::string default_plots_script() {
  if (const char* env = std::getenv("SPRAYNET_PLOTS_SCRIPT")) return env;
  return tree_path("scripts/fabric_plots.py");
}

// --jobs and --threads: a whole number, 0 for auto.
uint32_t parse_count(const std::string& flag, const std::string& v) {
  const bool digits = !v.empty() && v.size() <= 9 &&
                      std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!digits) {
    throw std::invalid_argument("--" + flag + ": '" + v + "' is not a whole number (0: auto)");
  }
  const unsigned long n = std::stoul(v);
  if (n > 1024) throw std::invalid_argument("--" + flag + ": at most 1024, got '" + v + "'");
  return static_cast<uint32_t>(n);
}

// The free mbufs a pool must have at the start of each round of the fabric's core (about
// 1 us of virtual time, or the cable delay when longer) so that it does not run dry within
// the round while it is below its max: per host uplink, twice what it can send in a round at
// line rate in frames of a quarter MTU (its data frames and the ACKs, CNPs and PFC frames it
// sends back; in the segments' pool, a shared payload's two segments per data frame), at
// least 16 mbufs; at least 16384 in all; plus the per-lcore caches of 8 threads (up to 1.5 x
// 256 mbufs each: 2 x 256) whatever the count, so that the pools' size (the JSON's
// memory.pools_mb) does not depend on it up to 8. A run that comes short below a pool's max all
// the same is repeated with its pools at their max (run_one), so the results are those of pools
// of fixed size either way; the headroom only saves the rerun.
uint32_t round_headroom(const FabricConfig& c) {
  const double round_ns = std::max<double>(1000.0, static_cast<double>(c.delay_ns));
  const double frames = std::ceil(c.link_gbps * round_ns / 8.0 / (c.mtu / 4.0));
  const double per_uplink = std::max(16.0, 2.0 * frames);
  const double want = std::max(16384.0, static_cast<double>(c.hosts()) * c.planes * per_uplink);
  return static_cast<uint32_t>(std::min(want, 1e9)) + 2 * 256 * 8;
}

// Thrown from the progress callback to abandon a run that an earlier run's error made moot.
struct Abandoned {};

}  // namespace

int main(int argc, char** argv) {
  heap_on_huge_pages(argv);
  // The CPUs the process may run on, before EAL pins this thread to its lcore's (CPU 0): the
  // worker threads, which would inherit that pin, and the fabric's own threads, which inherit
  // theirs, get these back.
  cpu_set_t process_cpus;
  CPU_ZERO(&process_cpus);
  const bool have_cpus = sched_getaffinity(0, sizeof process_cpus, &process_cpus) == 0;
  CLI::App app{
      "fabric_emu: a leaf-spine fabric of real SwitchNode and NicNode pipelines (DPDK mbufs, "
      "EAL --no-huge, no ports) in virtual time. Every mode runs on every seed; stdout gets one "
      "row per mode (means over seeds, ±stddev), --json the full report.\n\n"
      "Events (--event, repeatable): link-down:leaf0-spine3@500us, link-up:LINK@T, "
      "ber:LINK=1e-6@T, rate:LINK=50@T (Gbit/s), background:spine2=0.85[@T] (that share of the "
      "switch's links taken by traffic outside the experiment: their rate is cut to the rest, and "
      "the link state counts it as the port counters would), background:h0-p1.leaf0=0.8@T (one "
      "link, from its first-named end: h0's plane-1 uplink; =0 ends it; @T~P: on for P, off for P, "
      "repeating), "
      "filter:LINK=udp4791-nonzero-csum[@T] (a middlebox dropping RoCEv2 packets whose UDP "
      "checksum is not 0, both ways across the link; filter:hN=... puts it between host hN's NIC "
      "and the host; =off removes it; counted in drops.checksum_filter and "
      "drops.host_checksum_filter). "
      "LINK: LEAF-SPINE (every parallel link), LEAF-SPINE#k, hN-LEAF; plane p>0: p1.leaf0-spine3."};
  std::string config_file, log_level = "warn";
  bool quiet = false;
  bool reproducible = false;
  bool force = false;
  app.add_option("--config", config_file,
                 "YAML file with a `fabric:` map: keys as the flags, '_' for '-' (json, "
                 "timeseries, plots and csv too; `event:` is a list, and --event flags add to "
                 "it). Flags given beside it apply over the file. Command line only: --config, "
                 "--scenario, --quick, --force, --log-level, --quiet, --reproducible, --jobs, --threads");
  std::string scenario_name;
  bool quick = false;
  app.add_option("--scenario", scenario_name,
                 "NAME or a file: a scenario (configs/scenarios/NAME.yaml: a claim of the "
                 "articles, run and given its verdict), a research claim (configs/research/"
                 "NAME.yaml: a paper's headline claim on its preset, given its verdict; "
                 "docs/RESEARCH.md) or a preset (configs/presets/NAME.yaml: a published set-up, "
                 "conweave-os2 or hpcc-websearch, run and reported with no verdict; "
                 "docs/presets.md); 'list' lists all three. Flags given apply over each of its "
                 "runs");
  app.add_flag("--quick", quick,
               "with --scenario: its quick form (fewer seeds, shorter runs, a preset's smaller "
               "fabric)");
  app.add_flag("--force", force,
               "cdf: run a plan past the limit (more than " + std::to_string(kMaxPlannedFlows) +
                   " expected flows per run), or a CDF whose sizes look like kilobytes (largest "
                   "flow below 1500 bytes or mean below 100 bytes)");
  // Every config key is a flag too (config_keys.h); each given flag's values, in the table's order.
  const std::vector<ConfigKey>& keys = config_keys();
  std::vector<std::vector<std::string>> flag_values(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    CLI::Option* o = app.add_option("--" + keys[i].name, flag_values[i], keys[i].help);
    if (!keys[i].repeatable) o->expected(1)->multi_option_policy(CLI::MultiOptionPolicy::Throw);
  }
  app.add_option("--log-level", log_level, "trace | debug | info | warn | error (warn)");
  app.add_flag("--quiet", quiet,
               "no progress on stderr (otherwise: runs over a second show one updating line on a "
               "terminal, a plain line every 10 s when stderr is a file or pipe)");
  app.add_flag("--reproducible", reproducible,
               "leave the wall-clock figures (wall_s, hops_per_s, peak_rss_mb) out of the JSON, so "
               "that two runs with the same arguments write identical files (whatever --jobs and "
               "--threads). With --jobs above 1 the runs overlap: each run's wall_s and hops_per_s "
               "count a machine shared with the other runs, and peak_rss_mb is the whole "
               "process's, every run's pools together");
  bool mpi = false;
  app.add_flag("--mpi", mpi,
               "run under mpirun: each run's logical processes are shared out among the ranks "
               "(one process per rank, on this machine or others), which trade the frames that "
               "cross between them every round; the results are the same as one process's. "
               "Rank 0 prints and writes every output; runs go one at a time (--jobs 1)"
#ifndef SPRAYNET_HAVE_MPI
               " [this build has no MPI: install libopenmpi-dev and build again]"
#endif
  );
  std::string jobs_arg = "0", threads_arg = "0";
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  app.add_option("--jobs", jobs_arg,
                 "runs of the sweep (every experiment x mode x seed, a scenario's runs included) "
                 "run N at a time in worker threads, each run with mbuf pools of its own; the "
                 "table, JSON, CSV, timeseries and plots are the same whatever N (results in run "
                 "order); 0: one per online core (" + std::to_string(cores) +
                     " here), never more than the runs (0)");
  app.add_option("--threads", threads_arg,
                 "threads each run's fabric runs its logical processes on (a rack or a spine "
                 "each, in conservative rounds; the results do not depend on it); 0: 1 below 128 "
                 "hosts, else max(1, online cores / the jobs used) (0)");
  if (const auto code = runtime::parse_program_args(app, runtime::all_program_args(argc, argv),
                                                    "fabric_emu")) {
    return *code;
  }

  // --mpi: every rank runs this same program; rank 0 speaks for the run.
#ifdef SPRAYNET_HAVE_MPI
  std::unique_ptr<MpiRankLink> ranks;
  if (mpi) {
    try {
      ranks = std::make_unique<MpiRankLink>();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "fabric_emu: --mpi: %s\n", e.what());
      return 1;
    }
    if (ranks->rank() != 0) quiet = true;
  }
  const bool speaker = ranks == nullptr || ranks->rank() == 0;
#else
  if (mpi) {
    std::fprintf(stderr,
                 "fabric_emu: --mpi: this fabric_emu was built without MPI (install "
                 "libopenmpi-dev, or run scripts/setup.sh, and build again)\n");
    return 2;
  }
  const bool speaker = true;
#endif

  // The experiments to run: the one the flags describe, or a scenario's runs with the flags
  // given applied over each (so that a scenario can be re-run on another topology).
  std::optional<Scenario> scenario;
  std::vector<ScenarioRun> experiments;
  uint32_t jobs_flag = 0, threads_flag = 0;
  try {
    jobs_flag = parse_count("jobs", jobs_arg);
    threads_flag = parse_count("threads", threads_arg);
    if (scenario_name == "list") {
      const std::string dir = default_scenario_dir();
      for (const std::string& name : list_scenarios(dir)) {
        const Scenario s = load_scenario(scenario_path(dir, name), false);
        std::printf("%-18s %s\n", name.c_str(), s.claim.c_str());
      }
      for (const auto& [tag, dir] : {std::pair<const char*, std::string>{"[research]", default_research_dir()},
                                     {"[preset]", default_preset_dir()}}) {
        for (const std::string& name : list_scenarios(dir)) {
          const Scenario s = load_scenario(dir + "/" + name + ".yaml", false);
          std::printf("%-18s %s %s\n", name.c_str(), tag, s.claim.c_str());
        }
      }
      return 0;
    }
    if (!scenario_name.empty()) {
      if (!config_file.empty()) throw std::invalid_argument("--config and --scenario: give one");
      scenario = load_scenario(find_scenario(scenario_name), quick);
      experiments = scenario->runs;
    } else {
      if (quick) throw std::invalid_argument("--quick: only with --scenario");
      FabricConfig config;
      if (!config_file.empty()) config = load_fabric_config(config_file);
      experiments.push_back({"", config});
    }
    const auto given = [&](const char* name) { return app.count(std::string("--") + name) > 0; };
    if (given("load") && given("network-load")) {
      throw std::invalid_argument(
          "--load and --network-load: give one (--load: a fraction of each host's line rate; "
          "--network-load: of the leaf uplinks' capacity for the inter-leaf traffic)");
    }
    for (ScenarioRun& e : experiments) {
      for (size_t i = 0; i < keys.size(); ++i) {
        for (const std::string& v : flag_values[i]) {
          try {
            keys[i].set(e.config, v);
          } catch (const std::invalid_argument& ex) {
            throw std::invalid_argument("--" + keys[i].name + ": " + ex.what());
          }
        }
      }
      // Flags another workload would ignore are refused, not ignored.
      for (const char* name : {"cdf", "load", "network-load"}) {
        if (given(name) && e.config.workload != Workload::kCdf) {
          throw std::invalid_argument(std::string("--") + name + ": only with --workload cdf (" +
                                      "workload " + std::string(to_string(e.config.workload)) +
                                      " would ignore it)");
        }
      }
      if (const std::string why = e.config.check(); !why.empty()) {
        // "key: reason": name the flag when the command line set it (or gave the event), else
        // the file and its key, as every other config error does.
        const std::string key = why.substr(0, why.find(':'));
        const std::string flag = key.substr(0, key.find(' '));  // "op read: ..." is --op's
        const CLI::Option* given = app.get_option_no_throw("--" + flag);
        bool from_flag = (given != nullptr && given->count() > 0) ||
                         e.config.source == "command line";
        if (key == "event") {
          const std::vector<std::string>& events = flag_values[static_cast<size_t>(
              std::find_if(keys.begin(), keys.end(),
                           [](const ConfigKey& k) { return k.name == "event"; }) -
              keys.begin())];
          from_flag = std::any_of(events.begin(), events.end(), [&](const std::string& t) {
            return why.find("'" + t + "'") != std::string::npos;
          });
        }
        if (from_flag) throw std::invalid_argument("--" + why);
        std::string yaml_key = key;
        std::replace(yaml_key.begin(), yaml_key.end(), '-', '_');
        throw std::invalid_argument(e.config.source + ": fabric." + yaml_key + why.substr(key.size()));
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fabric_emu: %s\n", e.what());
    return 2;
  }
  std::vector<std::unique_ptr<FlowSizeCdf>> cdfs;
  for (const ScenarioRun& e : experiments) {
    cdfs.emplace_back();
    if (e.config.workload != Workload::kCdf) continue;
    try {
      cdfs.back() = std::make_unique<FlowSizeCdf>(FlowSizeCdf::resolve(e.config.cdf));
    } catch (const std::exception& ex) {
      std::fprintf(stderr, "fabric_emu: --cdf: %s\n", ex.what());
      return 2;
    }
    // What the plan asks for, before it is drawn: refused past the limit unless --force.
    const CdfPlan plan = cdf_plan(e.config, *cdfs.back());
    if (!quiet) {
      std::fprintf(stderr, "fabric_emu: %s%s\n", e.name.empty() ? "" : (e.name + ": ").c_str(),
                   plan.describe().c_str());
    }
    for (const std::string& w : config_warnings(e.config)) {
      std::fprintf(stderr, "fabric_emu: warning: %s%s\n",
                   e.name.empty() ? "" : (e.name + ": ").c_str(), w.c_str());
    }
    if (const std::string why = plan.refusal(); !why.empty() && !force) {
      std::fprintf(stderr, "fabric_emu: %s%s\n", e.name.empty() ? "" : (e.name + ": ").c_str(),
                   why.c_str());
      return 2;
    }
  }

  // The runs of the sweep, in the order their results are reported.
  struct RunSpec {
    size_t experiment;
    FabricMode mode;
    uint64_t seed;
    std::string what;  // "[scenario run ]mode", for messages
  };
  std::vector<RunSpec> specs;
  for (size_t x = 0; x < experiments.size(); ++x) {
    const FabricConfig& config = experiments[x].config;
    const std::string& run_name = experiments[x].name;
    for (FabricMode mode : config.modes) {
      for (uint64_t seed = config.seed_first; seed <= config.seed_last; ++seed) {
        specs.push_back({x, mode, seed,
                         (run_name.empty() ? "" : run_name + " ") + std::string(to_string(mode))});
      }
    }
  }
  // Under --mpi the runs go one at a time, each on every rank.
  const size_t jobs = mpi ? 1
                          : std::max<size_t>(1, std::min<size_t>(jobs_flag == 0 ? cores : jobs_flag,
                                                                 specs.size()));
  // Auto: the cores the jobs leave, for fabrics big enough to gain from them (below 128 hosts a
  // round is too little work to share: measured slower on 2 threads at 16 hosts, 1.5x faster at
  // 256).
  uint32_t largest = 0;
  for (const ScenarioRun& e : experiments) largest = std::max(largest, e.config.hosts());
  // Under mpirun, the cores this machine's ranks share.
  const char* local_ranks = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  const unsigned per_rank_cores =
      mpi && local_ranks != nullptr && std::atoi(local_ranks) > 0
          ? std::max(1u, cores / static_cast<unsigned>(std::atoi(local_ranks)))
          : cores;
  const uint32_t threads =
      threads_flag != 0 ? threads_flag
      : largest < 128   ? 1u
                        : std::max(1u, static_cast<uint32_t>(per_rank_cores / jobs));

  // Each job's pools are sized for the largest experiment. Copied payloads need a whole frame
  // in one mbuf. Shared ones: the packet's mbuf holds its headers (and payloads under 256
  // bytes), and two small mbufs from a pool of their own carry the attached payload and the
  // pad + ICRC; that pool never runs out first, so the packets' pool fills (and a requester
  // finds it empty) exactly as with copied payloads. The pools grow from a first chunk, in
  // memory of their own (not EAL's), as far as the runs need.
  uint64_t n_mbufs = 0;
  uint32_t mtu = 0;
  bool copied = false, shared = false;
  for (const ScenarioRun& e : experiments) {
    n_mbufs = std::max(n_mbufs, mbufs_for(e.config));
    mtu = std::max(mtu, e.config.mtu);
    copied = copied || e.config.payload == "copy";
    shared = shared || e.config.payload == "shared";
  }
  const uint32_t room = (copied ? mtu + 512 : 512) + RTE_PKTMBUF_HEADROOM;
  const uint32_t segment_room = RTE_PKTMBUF_HEADROOM + 64;
  const uint64_t n_segments = shared ? 2 * n_mbufs + 1023 : 0;
  constexpr uint32_t kChunk = 8192;  // mbufs: the first chunk and each one added
  // EAL's memory now holds only each pool's header with its per-lcore caches (about 1 MB) and
  // its ring (8 bytes per mbuf, to a power of 2), beside EAL's own few MB.
  const auto ring_mb = [](uint64_t n) {
    uint64_t slots = 1;
    while (slots < n + 1) slots <<= 1;
    return (slots * 8 >> 20) + 2;
  };
  const uint64_t eal_mb = 64 + jobs * (ring_mb(n_mbufs) + (shared ? ring_mb(n_segments) : 0));
  const std::string prefix = "fabric-" + std::to_string(getpid());
  std::unique_ptr<runtime::Eal> eal;
  try {
    runtime::set_level(log_level);
    // One EAL lcore (-l 0): the other lcore ids stay free for the worker threads to register.
    eal = std::make_unique<runtime::Eal>(std::vector<std::string>{
        "fabric_emu", "--no-huge", "-m", std::to_string(eal_mb), "-l", "0", "--no-pci",
        "--no-telemetry", "--file-prefix", prefix, "--log-level", "lib.eal:error"});
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fabric_emu: %s\n", e.what());
    return 3;
  }
  // Each run gets pools of its own, created by the worker that runs it and freed when the run
  // is over: a run's mapped bytes are its own (not what earlier runs of the same job grew),
  // and the memory goes back between runs. The names are the job's, unique at any time.
  // A job keeps its pools from run to run (mapping and initialising fresh mbufs for every run
  // was a fifth of a small fabric's CPU time); each run begins one (GrowingMbufPool::begin_run),
  // so that its bytes, growth and shortfalls are those of pools of its own.
  struct JobPools {
    std::unique_ptr<runtime::GrowingMbufPool> packets, segments;
  };
  const auto make_pools = [&](size_t job, bool with_segments, JobPools& p) {
    if (!p.packets) {
      try {
        p.packets = std::make_unique<runtime::GrowingMbufPool>(
            "fabric_pool_" + std::to_string(job), static_cast<uint32_t>(n_mbufs),
            static_cast<uint16_t>(room),
            std::min<uint32_t>(kChunk, static_cast<uint32_t>(n_mbufs)));
      } catch (const std::exception& e) {
        throw std::runtime_error("mempool of " + std::to_string(n_mbufs) + " mbufs: " + e.what());
      }
    }
    if (!with_segments || p.segments) return;
    try {
      p.segments = std::make_unique<runtime::GrowingMbufPool>(
          "fabric_segments_" + std::to_string(job), static_cast<uint32_t>(n_segments),
          static_cast<uint16_t>(segment_room),
          std::min<uint32_t>(kChunk, static_cast<uint32_t>(n_segments)));
    } catch (const std::exception& e) {
      throw std::runtime_error("mempool of " + std::to_string(n_segments) +
                               " payload segments: " + e.what());
    }
  };

  // The outputs: the flags' over the file's, or over a scenario's first run (whose files name no
  // outputs, so only the flags do).
  const FabricConfig& first = experiments.front().config;
  std::string json_file = first.json_file, timeseries_file = first.timeseries_file,
              plots_dir = first.plots_dir, csv_dir = first.csv_dir;
  if (!speaker) {  // only rank 0 writes
    csv_dir.clear();
    plots_dir.clear();
    json_file.clear();
    timeseries_file.clear();
  }
  if (!csv_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(csv_dir, ec);
    if (ec) {
      std::fprintf(stderr, "fabric_emu: --csv: cannot create %s: %s\n", csv_dir.c_str(),
                   ec.message().c_str());
      return 2;
    }
  }
  if (!plots_dir.empty()) {
    std::string cmd = "mkdir -p '" + plots_dir + "'";
    if (std::system(cmd.c_str()) != 0) {
      std::fprintf(stderr, "fabric_emu: cannot create %s\n", plots_dir.c_str());
      return 2;
    }
    if (json_file.empty()) json_file = plots_dir + "/report.json";
    if (timeseries_file.empty()) timeseries_file = plots_dir + "/timeseries.csv";
  }
  std::ofstream ts;
  if (!timeseries_file.empty()) {
    ts.open(timeseries_file);
    if (!ts) {
      std::fprintf(stderr, "fabric_emu: cannot write %s\n", timeseries_file.c_str());
      return 2;
    }
    ts << (scenario ? "run," : "") << "mode,seed,t_us,link,util,queue_bytes,paused\n";
  }

  // The sweep: `jobs` worker threads take the runs in order, each with its own pools; every
  // run's result and timeseries rows go to its slot, written out in run order once all are
  // done, so that the output is the same whatever the number of jobs.
  const size_t total = specs.size();
  std::vector<RunResult> slots(total);
  std::vector<std::string> ts_rows(total);
  std::vector<std::string> errors(total);
  std::vector<int> error_codes(total, 0);  // 2: the run failed; 3: its pools could not be made
  std::atomic<size_t> next{0};
  // The first run (in run order) that threw: later runs are not started, and those in progress
  // are abandoned; earlier ones finish, so that the error reported is the one --jobs 1 reports.
  std::atomic<size_t> first_error{SIZE_MAX};
  SweepProgress progress(total, jobs, quiet);
  const bool timeseries = ts.is_open();
  auto log = runtime::logger("fabric_emu");

  const auto failed_at = [&](size_t i, const std::string& why, int code) {
    errors[i] = why;
    error_codes[i] = code;
    size_t cur = first_error.load();
    while (i < cur && !first_error.compare_exchange_weak(cur, i)) {
    }
  };
  const auto run_one = [&](size_t job, size_t i, JobPools& pools) {
    const RunSpec& spec = specs[i];
    const FabricConfig& config = experiments[spec.experiment].config;
    progress.start(job, i, spec.what, spec.seed, config.duration_ns);
    const bool with_segments = config.payload == "shared";
    try {
      make_pools(job, with_segments, pools);
    } catch (const std::exception& e) {
#ifdef SPRAYNET_HAVE_MPI
      if (ranks != nullptr) {
        std::fprintf(stderr, "fabric_emu: rank %u: %s\n", ranks->rank(), e.what());
        ranks->abort(3);
      }
#endif
      failed_at(i, e.what(), 3);
      progress.finish(job, 0, false);
      return;
    }
    runtime::GrowingMbufPool& pool = *pools.packets;
    runtime::GrowingMbufPool* segments = with_segments ? pools.segments.get() : nullptr;
    const uint32_t headroom = round_headroom(config);
    const auto grow = [&] {
      pool.reserve_free(headroom);
      if (segments != nullptr) segments->reserve_free(headroom);
    };
    const auto short_below_max = [&] {
      return pool.shortfalls_below_max() +
             (segments != nullptr ? segments->shortfalls_below_max() : 0);
    };
    try {
      for (int attempt = 0;; ++attempt) {
        pool.begin_run();
        if (segments != nullptr) segments->begin_run();
        if (attempt > 0) {
          // The first attempt came short while a pool was below its max: again, with the
          // pools at their max from the start, as a pool of fixed size would have run it.
          pool.reserve_free(UINT32_MAX);
          if (segments != nullptr) segments->reserve_free(UINT32_MAX);
        }
        grow();
        const uint64_t short_before = short_below_max();
        std::ostringstream rows;
        RunResult r;
        {
          Fabric f(config, spec.mode, spec.seed, pool.pool(), cdfs[spec.experiment].get(),
                   segments != nullptr ? segments->pool() : nullptr);
          f.record_timeseries(timeseries);
          f.record_flows(!csv_dir.empty());  // flows.csv is their only reader
          f.set_threads(threads);
#ifdef SPRAYNET_HAVE_MPI
          f.set_ranks(ranks.get());
#endif
          f.set_between_rounds(grow);
          r = f.run([&](uint64_t vt, uint64_t hops) {
            if (i > first_error.load(std::memory_order_relaxed)) throw Abandoned{};
            progress.update(job, vt, hops);
          });
          log->debug("{} seed {}: {} rounds", spec.what, spec.seed, f.rounds());
          if (timeseries) {
            write_timeseries(rows, f, r, scenario ? experiments[spec.experiment].name + "," : "",
                             config.link_gbps);
          }
        }
        // Under --mpi every rank has pools of its own: what they came short, the mbufs they
        // kept and their bytes are the run's, summed over the ranks; its peak RSS, the largest.
        std::array<uint64_t, 1> rss{UINT64_MAX - static_cast<uint64_t>(r.peak_rss_mb * 1024)};
        std::array<uint64_t, 3> sums{short_below_max() - short_before,
                                     pool.in_use() + (segments != nullptr ? segments->in_use() : 0),
                                     pool.bytes() + (segments != nullptr ? segments->bytes() : 0)};
#ifdef SPRAYNET_HAVE_MPI
        if (ranks != nullptr) ranks->reduce(rss, sums);
#endif
        r.peak_rss_mb = static_cast<double>(UINT64_MAX - rss[0]) / 1024.0;
        if (const uint64_t n = sums[0]; n != 0 && attempt == 0) {
          log->debug("{} seed {}: a pool came short {} times below its max; run again with the "
                     "pools at their max",
                     spec.what, spec.seed, n);
          continue;
        }
        // The fabric is gone: whatever is still out of the pool leaked.
        r.mbufs_in_use_at_end = sums[1];
        // The run's pools' anonymous memory.
        r.pool_bytes = sums[2];
        log->debug("{} seed {}: pools: {} + {} mbufs populated (at most {} + {} in use), {:.1f} "
                   "MB mapped",
                   spec.what, spec.seed, pool.run_populated(),
                   segments != nullptr ? segments->run_populated() : 0, pool.peak_in_use(),
                   segments != nullptr ? segments->peak_in_use() : 0,
                   static_cast<double>(r.pool_bytes) / (1 << 20));
        ts_rows[i] = rows.str();
        // A run that kept mbufs leaves its pools behind: the next starts from new ones.
        if (r.mbufs_in_use_at_end != 0) pools = JobPools{};
        progress.finish(job, r.packet_hops, true);
        slots[i] = std::move(r);
        return;
      }
    } catch (const Abandoned&) {
      progress.finish(job, 0, false);
    } catch (const std::exception& e) {
#ifdef SPRAYNET_HAVE_MPI
      if (ranks != nullptr) {
        // The other ranks wait for this one in a collective call: end them all.
        std::fprintf(stderr, "fabric_emu: rank %u (%s): %s seed %llu: %s\n", ranks->rank(),
                     ranks->host().c_str(), spec.what.c_str(),
                     static_cast<unsigned long long>(spec.seed), e.what());
        ranks->abort(2);
      }
#endif
      failed_at(i, e.what(), 2);
      progress.finish(job, 0, false);
    }
  };
  const auto worker = [&](size_t job) {
    if (have_cpus && pthread_setaffinity_np(pthread_self(), sizeof process_cpus, &process_cpus) != 0) {
      log->debug("job {}: could not leave the main lcore's CPU (pthread_setaffinity_np)", job);
    }
    // A registered thread has an lcore id, hence its own cache in each mempool.
    const bool registered = rte_thread_register() == 0;
    if (!registered) {
      log->debug("job {}: rte_thread_register: {} (its pools work without a per-lcore cache)",
                 job, rte_strerror(rte_errno));
    }
    {
      JobPools pools;
      for (;;) {
        const size_t i = next.fetch_add(1);
        if (i >= total || i > first_error.load()) break;
        run_one(job, i, pools);
      }
    }
    if (registered) rte_thread_unregister();
  };
  {
    std::vector<std::thread> workers;
    for (size_t j = 0; j < jobs; ++j) workers.emplace_back(worker, j);
    for (std::thread& t : workers) t.join();
  }
  progress.end();

  // In run order: the mbufs each run left out of its pools, then the first error (if any).
  int status = 0;
  const size_t failed = first_error.load();
  std::map<std::string, std::vector<RunResult>> results;
  for (size_t i = 0; i < total && i <= failed; ++i) {
    const RunSpec& spec = specs[i];
    if (i == failed) {
      std::fprintf(stderr, "fabric_emu: %s seed %llu: %s\n", spec.what.c_str(),
                   static_cast<unsigned long long>(spec.seed), errors[i].c_str());
      return error_codes[i];
    }
    if (timeseries) ts << ts_rows[i];
    if (slots[i].mbufs_in_use_at_end != 0) {
      std::fprintf(stderr, "fabric_emu: %s seed %llu: %llu mbufs not returned to the pool\n",
                   spec.what.c_str(), static_cast<unsigned long long>(spec.seed),
                   static_cast<unsigned long long>(slots[i].mbufs_in_use_at_end));
      status = 3;
    }
    results[experiments[spec.experiment].name].push_back(std::move(slots[i]));
  }

  if (!speaker) return status;
  const auto report_of = [&](const FabricConfig& config, const std::vector<RunResult>& runs) {
    nlohmann::json report;
    report["config"] = config_json(config);
    report["runs"] = nlohmann::json::array();
    for (const RunResult& r : runs) {
      nlohmann::json j = to_json(r);
      if (!reproducible) {
        j["wall_s"] = r.wall_s;
        j["hops_per_s"] = r.hops_per_s;
        j["peak_rss_mb"] = r.peak_rss_mb;
      }
      report["runs"].push_back(j);
    }
    report["summary"] = summary_json(runs);
    if (reproducible) {
      for (auto& [mode, m] : report["summary"].items()) m.erase("hops_per_s");
    }
    return report;
  };
  nlohmann::json report;
  for (const ScenarioRun& e : experiments) {
    const FabricConfig& config = e.config;
    if (scenario && scenario->preset && &e == &experiments.front()) {
      std::cout << "preset " << scenario->name << (quick ? " (--quick)" : "") << ": "
                << scenario->claim << "\n";
    }
    if (scenario) std::cout << "run " << e.name << ": ";
    std::cout << format_header(config, cdfs[&e - experiments.data()].get());
    std::cout << format_table(results[e.name], config);
    // Never a result without a word: each unfinished or lossy run is named on stderr, and the
    // exit status says so (5) unless a scenario's verdict is what the run is for.
    for (const RunResult& r : results[e.name]) {
      for (const std::string& w : r.warnings) {
        std::fprintf(stderr, "fabric_emu: warning: %s%s seed %llu: %s\n",
                     scenario ? (e.name + " ").c_str() : "", r.mode.c_str(),
                     static_cast<unsigned long long>(r.seed), w.c_str());
        if ((!scenario || scenario->preset) && status == 0) status = 5;
      }
    }
    nlohmann::json one = report_of(config, results[e.name]);
    // A size bin with too few messages for its p99 (summary.<mode>.slowdown.warnings): said, but
    // the runs are still results.
    for (const auto& [mode, m] : one["summary"].items()) {
      if (!m.contains("slowdown")) continue;
      for (const auto& w : m["slowdown"]["warnings"]) {
        std::fprintf(stderr, "fabric_emu: warning: %s%s\n", scenario ? (e.name + " ").c_str() : "",
                     w.get<std::string>().c_str());
      }
    }
    // Only when there are some: reports without stay as they were.
    if (const auto w = config_warnings(config); !w.empty()) one["warnings"] = w;
    if (scenario) {
      report["runs"][e.name] = std::move(one);
    } else {
      report = std::move(one);
    }
  }
  if (scenario && scenario->preset) {
    report["preset"] = {{"name", scenario->name},
                        {"about", scenario->claim},
                        {"source", scenario->source},
                        {"scaled", scenario->scaled},
                        {"quick", quick}};
  } else if (scenario) {
    try {
      const ScenarioResult result = evaluate_scenario(*scenario, results);
      std::cout << "\n" << format_scenario(result);
      report["scenario"] = to_json(result);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "fabric_emu: scenario %s: %s\n", scenario->name.c_str(), e.what());
      status = 2;
    }
  }
  if (!csv_dir.empty()) {
    try {
      bool append = false;
      for (const ScenarioRun& e : experiments) {
        write_csv(csv_dir, results[e.name], e.name, append);
        append = true;
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "fabric_emu: --csv: %s\n", e.what());
      return 2;
    }
  }
  if (!json_file.empty()) {
    std::ofstream out(json_file);
    if (!out) {
      std::fprintf(stderr, "fabric_emu: cannot write %s\n", json_file.c_str());
      return 2;
    }
    out << report.dump(1) << "\n";
  }
  ts.close();
  // A scenario's runs are plotted together, each mode named "run:mode".
  if (!plots_dir.empty()) {
    const std::string cmd = "python3 '" + default_plots_script() + "' --json '" + json_file +
                            "' --timeseries '" + timeseries_file + "' --out '" + plots_dir + "'";
    if (std::system(cmd.c_str()) != 0) {
      std::fprintf(stderr, "fabric_emu: plots failed: %s\n", cmd.c_str());
      if (status == 0) status = 4;
    }
  }
  return status;
}
