// The bytes of one egress port, for a node's MemoryUsage::queues: EgressPort::memory_bytes()
// (the port object, its class and control queues' and delay line's ring capacity, its ECN
// marker) where EgressPort has it; until then the port object alone (its rings not counted).
#pragma once

#include <cstdint>

#include "dataplane/egress/egress_port.h"

namespace spraynet {

// Whether EgressPort has memory_bytes() (its rings are counted).
template <class Port = EgressPort>
inline constexpr bool kEgressPortCountsRings = requires(const Port& p) { p.memory_bytes(); };

template <class Port = EgressPort>
uint64_t egress_port_bytes(const Port& port) {
  if constexpr (kEgressPortCountsRings<Port>) {
    return port.memory_bytes();
  } else {
    return sizeof(Port);
  }
}

}  // namespace spraynet
