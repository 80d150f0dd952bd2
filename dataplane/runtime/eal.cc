#include "dataplane/runtime/eal.h"

#include <rte_eal.h>
#include <rte_errno.h>

#include <stdexcept>
#include <string_view>

#include "dataplane/runtime/logging.h"

namespace spraynet::runtime {

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
  if (consumed < 0) {
    throw std::runtime_error(std::string("rte_eal_init failed: ") + rte_strerror(rte_errno));
  }
  // EAL leaves the program name at argv[consumed], just before the application's arguments.
  for (int i = consumed; i < argc; ++i) app_args_.emplace_back(argv[i]);
  for (auto& a : app_args_) app_argv_.push_back(a.data());
  app_argv_.push_back(nullptr);
}

Eal::~Eal() {
  if (rte_eal_cleanup() != 0) {
    logger("eal")->error("rte_eal_cleanup failed: {}", rte_strerror(rte_errno));
  }
}

bool wants_help(int argc, char** argv) {
  bool after_dashes = false, has_dashes = false, help = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--") has_dashes = after_dashes = true;
    if ((a == "--help" || a == "-h") && (after_dashes || !has_dashes)) help = true;
  }
  return help;
}

}  // namespace spraynet::runtime
