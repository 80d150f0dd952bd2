// The EAL arguments every benchmark program runs under (runtime::Eal, which also bridges DPDK's
// log): --no-huge memory of `memory_mb`, no PCI, a file prefix of its own so that runs side by
// side do not collide, and EAL's own log at errors only.
#pragma once

#include <unistd.h>

#include <string>
#include <vector>

namespace spraynet::bench {

inline std::vector<std::string> eal_args(const char* argv0, const std::string& name,
                                         unsigned memory_mb) {
  return {argv0,
          "--no-huge",
          "-m",
          std::to_string(memory_mb),
          "--no-pci",
          "--file-prefix",
          "spraynet-" + name + "-" + std::to_string(getpid()),
          "--log-level",
          "lib.eal:error"};
}

}  // namespace spraynet::bench
