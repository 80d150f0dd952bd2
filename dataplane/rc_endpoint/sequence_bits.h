// One bit per packet sequence number in a ring of `bits` slots (a whole number of 64-bit words):
// sequence number s is slot s % bits. What the RC endpoints keep per packet while it is within
// a window of at most `bits` packets: the placement responder what arrived beyond its cumulative
// point, the IRN requester what a SACK showed arrived and what it resent. The caller owns the
// words (bits / 64 of them) and the ring's size, so that an endpoint with several maps of one
// size keeps that size once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace spraynet {

inline bool sequence_bit(const std::vector<uint64_t>& words, size_t bits, uint64_t seq) {
  const size_t i = static_cast<size_t>(seq % bits);
  return (words[i >> 6] >> (i & 63)) & 1;
}

inline void set_sequence_bit(std::vector<uint64_t>& words, size_t bits, uint64_t seq, bool v) {
  const size_t i = static_cast<size_t>(seq % bits);
  const uint64_t bit = uint64_t{1} << (i & 63);
  if (v) {
    words[i >> 6] |= bit;
  } else {
    words[i >> 6] &= ~bit;
  }
}

}  // namespace spraynet
