#include "dataplane/runtime/eal.h"

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_lcore.h>
#include <pthread.h>

#include <filesystem>
#include <stdexcept>
#include <string>

#include "dataplane/runtime/logging.h"

namespace spraynet::runtime {

bool Eal::control_cpus(cpu_set_t& cpus) {
  // EAL keeps that set to itself: a control thread it starts reads it back.
  struct Probe {
    cpu_set_t cpus;
    bool ok = false;
  } probe{};
  pthread_t t;
  const auto read = [](void* arg) -> void* {
    auto* p = static_cast<Probe*>(arg);
    p->ok = pthread_getaffinity_np(pthread_self(), sizeof p->cpus, &p->cpus) == 0;
    return nullptr;
  };
  if (rte_ctrl_thread_create(&t, "spraynet-cpus", nullptr, read, &probe) != 0) return false;
  pthread_join(t, nullptr);
  if (probe.ok) cpus = probe.cpus;
  return probe.ok;
}

Eal::Eal(int argc, char** argv) {
  init(argc, argv);
}

Eal::Eal(std::vector<std::string> args) {
  // rte_eal_init permutes and rewrites argv, so it gets pointers into our own copy.
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  init(static_cast<int>(args.size()), argv.data());
}

void Eal::init(int argc, char** argv) {
  bridge_dpdk_log();
  const int consumed = rte_eal_init(argc, argv);
  if (consumed < 0) throw std::runtime_error(init_failure(rte_errno));
  // EAL leaves the program name at argv[consumed], just before the application's arguments.
  for (int i = consumed; i < argc; ++i) app_args_.emplace_back(argv[i]);
  for (auto& a : app_args_) app_argv_.push_back(a.data());
  app_argv_.push_back(nullptr);
}

std::string Eal::init_failure(int err) {
  // rte_eal_init does not always set rte_errno (a file prefix in use leaves it 0: "Success"):
  // name the cause from what EAL logged.
  std::string why = err != 0 ? rte_strerror(err) : "";
  for (const std::string& line : recent_dpdk_errors()) {
    if (line.find("Is another primary process running") != std::string::npos ||
        line.find("Cannot create lock") != std::string::npos) {
      return "rte_eal_init failed: the file prefix is in use by another primary DPDK process "
             "(EAL: \"" + line + "\"); give this one its own --file-prefix NAME";
    }
  }
  const auto lines = recent_dpdk_errors();
  if (why.empty() || why == "Success") why = lines.empty() ? "EAL gave no reason" : lines.back();
  return "rte_eal_init failed: " + why;
}

Eal::~Eal() {
  // rte_eal_cleanup leaves the runtime directory (/var/run/dpdk/PREFIX: config lock, fbarrays,
  // sockets) behind; the primary that made it removes it, so runs do not pile them up.
  const bool primary = rte_eal_process_type() == RTE_PROC_PRIMARY;
  const std::string dir = rte_eal_get_runtime_dir();
  if (rte_eal_cleanup() != 0) {
    logger("eal")->error("rte_eal_cleanup failed: {}", rte_strerror(rte_errno));
    return;
  }
  if (primary && !dir.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    if (ec) logger("eal")->debug("cannot remove {}: {}", dir, ec.message());
  }
}

}  // namespace spraynet::runtime
