#include "dataplane/runtime/tsc_clock.h"

#include <stdexcept>

namespace spraynet::runtime {

TscClock::TscClock() : hz_(rte_get_tsc_hz()), start_(rte_rdtsc()) {
  if (hz_ == 0) throw std::runtime_error("TscClock: TSC frequency unknown (is EAL up?)");
}

}  // namespace spraynet::runtime
