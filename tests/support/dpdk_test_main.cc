// Catch2 main for every C++ test executable: brings EAL up without hugepages, PCI or root
// set-up (each executable with its own --file-prefix so that tests never share DPDK state),
// runs the tests, then fails the run if any mempool still has mbufs out.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_mempool.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

namespace {

void check_pool(rte_mempool* mp, void* arg) {
  auto* leaked = static_cast<int*>(arg);
  const unsigned in_use = rte_mempool_in_use_count(mp);
  if (in_use != 0) {
    std::fprintf(stderr, "mempool %s: %u objects still in use at exit\n", mp->name, in_use);
    ++*leaked;
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::string prefix = "spraynet-test-" + std::to_string(getpid());
  std::vector<std::string> eal_args = {argv[0],         "--no-huge",    "-m",
                                       "512",           "--no-pci",     "--file-prefix",
                                       prefix,          "--log-level", "lib.eal:warning"};
  std::vector<char*> eal_argv;
  for (auto& a : eal_args) eal_argv.push_back(a.data());
  if (rte_eal_init(static_cast<int>(eal_argv.size()), eal_argv.data()) < 0) {
    std::fprintf(stderr, "rte_eal_init failed: %s\n", rte_strerror(rte_errno));
    return 2;
  }

  int result = Catch::Session().run(argc, argv);

  int leaked = 0;
  rte_mempool_walk(check_pool, &leaked);
  if (leaked != 0 && result == 0) result = 1;
  const std::string runtime_dir = rte_eal_get_runtime_dir();
  rte_eal_cleanup();
  // EAL leaves its runtime directory behind (/var/run/dpdk/PREFIX): one per test run otherwise.
  std::error_code ec;
  std::filesystem::remove_all(runtime_dir, ec);
  return result;
}
