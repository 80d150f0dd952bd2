#include "dataplane/rc_endpoint/oblivious_entropy.h"

#include <stdexcept>
#include <string>

#include "dataplane/splitmix64.h"

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

uint32_t ObliviousEntropy::draw() { return static_cast<uint32_t>(splitmix64_next(state_) >> 32); }

uint16_t ObliviousEntropy::next() {
  const uint32_t ev = (index_ ^ xor_) & mask_;
  if (++index_ > mask_) {  // a round done: every value used once; the next in another order
    index_ = 0;
    xor_ = draw() & mask_;
  }
  return static_cast<uint16_t>(base_ | ev);
}

}  // namespace spraynet
