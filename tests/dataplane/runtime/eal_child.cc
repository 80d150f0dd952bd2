// Brings EAL up through spraynet::runtime::Eal in a process of its own (test_eal runs it) and
// reports on stdout what the test checks: the application arguments and the ports EAL made.
#include <rte_ethdev.h>

#include <cstdio>
#include <cstdlib>
#include <exception>

#include "dataplane/runtime/eal.h"
#include "dataplane/runtime/logging.h"

int main(int argc, char** argv) {
  try {
    // SPRAYNET_LOG_LEVEL: what the parent wants to see of the bridged DPDK log.
    if (const char* level = std::getenv("SPRAYNET_LOG_LEVEL")) spraynet::runtime::set_level(level);
    spraynet::runtime::Eal eal(argc, argv);
    for (const auto& a : eal.args()) std::printf("arg %s\n", a.c_str());
    std::printf("argc %d last %s\n", eal.app_argc(),
                eal.app_argv()[eal.app_argc()] == nullptr ? "null" : "set");
    uint16_t pid;
    RTE_ETH_FOREACH_DEV(pid) {
      char name[RTE_ETH_NAME_MAX_LEN];
      rte_eth_dev_get_name_by_port(pid, name);
      std::printf("port %u %s\n", pid, name);
    }
    return 0;
  } catch (const std::exception& e) {
    std::printf("error %s\n", e.what());
    return 1;
  }
}
