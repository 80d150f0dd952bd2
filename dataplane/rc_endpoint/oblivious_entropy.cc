#include "dataplane/rc_endpoint/oblivious_entropy.h"

#include <stdexcept>
#include <string>

namespace spraynet {

ObliviousEntropy::ObliviousEntropy(uint32_t values, uint16_t base_port, uint64_t seed)
    : mask_(values - 1), base_(0), state_(seed) {
  if (values == 0 || values > kMaxValues || (values & (values - 1)) != 0) {
    throw std::invalid_argument("entropy values: " + std::to_string(values) +
                                "; must be a power of two from 1 to 16384");
  }
  base_ = static_cast<uint16_t>(base_port & ~mask_);
  xor_ = draw() & mask_;
}

uint32_t ObliviousEntropy::draw() {
  uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return static_cast<uint32_t>((z ^ (z >> 31)) >> 32);
}

uint16_t ObliviousEntropy::next() {
  const uint32_t ev = (index_ ^ xor_) & mask_;
  if (++index_ > mask_) {  // a round done: every value used once; the next in another order
    index_ = 0;
    xor_ = draw() & mask_;
  }
  return static_cast<uint16_t>(base_ | ev);
}

}  // namespace spraynet
