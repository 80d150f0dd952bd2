// SplitMix64 (Steele, Lea and Flood, "Fast Splittable Pseudorandom Number Generators",
// OOPSLA 2014): 8 bytes of state, every seed (0 included) a full-period sequence whose output
// passes BigCrush. For seeded draws that must be cheap to keep per object (a flowlet table, a
// QP's entropy) and for mixing seeds so that neighbouring ones differ in every bit.
#pragma once

#include <cstdint>

namespace spraynet {

// The finaliser alone: `x` mixed so that every input bit reaches every output bit.
inline uint64_t splitmix64_mix(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// The next output of the generator whose state is `state` (advanced).
inline uint64_t splitmix64_next(uint64_t& state) {
  return splitmix64_mix(state += 0x9E3779B97F4A7C15ull);
}

}  // namespace spraynet
