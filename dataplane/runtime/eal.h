// DPDK's Environment Abstraction Layer, brought up once per process and torn down at scope end.
#pragma once

#include <sched.h>

#include <string>
#include <vector>

namespace spraynet::runtime {

// Runs rte_eal_init on the program's arguments: EAL consumes its own options (those before
// `--`) and what remains is the application's: argv[0] followed by everything after `--`.
// DPDK's log is bridged into spdlog first. EAL can be initialised once per process, so Eal is
// neither copyable nor movable; the destructor calls rte_eal_cleanup().
class Eal {
 public:
  // Throws std::runtime_error with the cause when rte_eal_init fails: rte_strerror(rte_errno),
  // or what EAL logged when rte_errno says nothing (a file prefix in use by another process).
  Eal(int argc, char** argv);
  // For programs that build EAL's command line themselves; args[0] is the program name.
  explicit Eal(std::vector<std::string> args);
  ~Eal();

  Eal(const Eal&) = delete;
  Eal& operator=(const Eal&) = delete;

  // The CPUs EAL gives its own control threads (rte_ctrl_thread_create): those the process may
  // run on that no lcore polls, or the main lcore's when the lcores take them all. A program's
  // control thread belongs there, not on the main lcore's CPU, where its poll loop never yields.
  // False when it cannot be read.
  static bool control_cpus(cpu_set_t& cpus);
  // The application's arguments: argv[0], then what followed `--`.
  const std::vector<std::string>& args() const { return app_args_; }
  // The same as a C argument vector (null-terminated), for argument parsers that want one.
  int app_argc() const { return static_cast<int>(app_args_.size()); }
  char** app_argv() { return app_argv_.data(); }

 private:
  void init(int argc, char** argv);
  static std::string init_failure(int err);

  std::vector<std::string> app_args_;
  std::vector<char*> app_argv_;
};

}  // namespace spraynet::runtime
