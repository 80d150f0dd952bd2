// What path selection knows about each member port of a group at the moment it decides: how
// much is queued there and whether the port may take new traffic at all.
#pragma once

#include <cstdint>

namespace spraynet {

struct PathLoad {
  uint64_t queued_bytes = 0;  // bytes waiting in the egress port's queues (all classes)
  // Up, not in PFC-watchdog drop mode, and, with PFC fast feedback on, not paused. Selection
  // never picks an ineligible port while an eligible one exists.
  bool eligible = true;
};

}  // namespace spraynet
