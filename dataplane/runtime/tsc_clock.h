// The dataplane's one clock: nanoseconds from the TSC, for programs. Dataplane stages never
// read it; they are handed now_ns (fabric_emu and tests hand them virtual time instead).
#pragma once

#include <rte_cycles.h>

#include <cstdint>

namespace spraynet::runtime {

class TscClock {
 public:
  // Needs EAL up: rte_get_tsc_hz() is measured by rte_eal_init.
  TscClock();

  // Nanoseconds since construction.
  uint64_t now_ns() const { return to_ns(rte_rdtsc() - start_); }
  uint64_t hz() const { return hz_; }

  // Split into whole seconds and a remainder so that cycles * 1e9 cannot overflow 64 bits
  // (it would after ~6 s at 3 GHz).
  uint64_t to_ns(uint64_t cycles) const {
    return cycles / hz_ * kNsPerSec + cycles % hz_ * kNsPerSec / hz_;
  }

 private:
  static constexpr uint64_t kNsPerSec = 1'000'000'000;
  uint64_t hz_;
  uint64_t start_;
};

}  // namespace spraynet::runtime
