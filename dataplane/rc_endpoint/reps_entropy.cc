#include "dataplane/rc_endpoint/reps_entropy.h"

#include <stdexcept>
#include <string>

#include "dataplane/splitmix64.h"

namespace spraynet {

RepsEntropy::RepsEntropy(uint32_t values, uint16_t base_port, uint64_t seed,
                         uint64_t exit_freeze_ns)
    : mask_(values - 1), exit_freeze_ns_(exit_freeze_ns), state_(seed) {
  if (values == 0 || values > kMaxValues || (values & (values - 1)) != 0) {
    throw std::invalid_argument("entropy values: " + std::to_string(values) +
                                "; must be a power of two from 1 to 16384");
  }
  base_ = static_cast<uint16_t>(base_port & ~mask_);
}

uint32_t RepsEntropy::draw() {
  return static_cast<uint32_t>(splitmix64_next(state_) >> 32) & mask_;
}

uint32_t RepsEntropy::fresh() const {
  uint32_t n = 0;
  for (const Slot& s : ring_) n += s.valid;
  return n;
}

void RepsEntropy::add(uint16_t value) {
  ring_[head_] = Slot{value, true};
  head_ = (head_ + 1) % kBufferSize;
  if (count_ < kBufferSize) ++count_;
  ++counters_.recycled;
}

void RepsEntropy::reset_ring() {
  ring_ = {};
  head_ = 0;
  count_ = 0;
  frozen_head_ = 0;
}

uint16_t RepsEntropy::next() {
  if (explore_ > 0) {
    --explore_;
    ++counters_.explored;
    return port_of(draw());
  }
  if (frozen_) {
    ++counters_.frozen_sent;
    if (count_ == 0) return port_of(draw());
    // Cycle through what the ring holds, good or already used: the paths last known good.
    Slot& s = ring_[frozen_head_ % count_];
    frozen_head_ = (frozen_head_ % count_ + 1) % count_;
    s.valid = false;
    return port_of(s.value);
  }
  // The oldest value not yet reused: the ring's slots from the oldest written to the newest.
  for (uint32_t i = 0; i < count_; ++i) {
    Slot& s = ring_[(head_ + kBufferSize - count_ + i) % kBufferSize];
    if (s.valid) {
      s.valid = false;
      ++counters_.reused;
      return port_of(s.value);
    }
  }
  ++counters_.drawn;
  return port_of(draw());
}

void RepsEntropy::on_ack(uint16_t port, uint64_t now_ns) {
  if ((port & ~mask_) != base_) return;  // not one of this QP's values (another QP's echo)
  const auto value = static_cast<uint16_t>(port & mask_);
  if (frozen_ && now_ns > exit_freeze_at_ns_) {
    frozen_ = false;
    reset_ring();
    explore_ = kExploreAfterFreeze;
  }
  for (uint32_t i = 0; i < marked_count_; ++i) {
    if (marked_[i] == value) {  // marked since it was sent: not a good path
      marked_[i] = marked_[--marked_count_];
      ++counters_.marked_not_recycled;
      return;
    }
  }
  add(value);
}

void RepsEntropy::on_mark(uint16_t port) {
  if ((port & ~mask_) != base_) return;
  const auto value = static_cast<uint16_t>(port & mask_);
  ++counters_.marked;
  for (Slot& s : ring_) {
    if (s.valid && s.value == value) s.valid = false;
  }
  // Remember it until its ACK comes (at most kBufferSize at once: the oldest is forgotten).
  if (marked_count_ < kBufferSize) {
    marked_[marked_count_++] = value;
  } else {
    marked_[marked_next_] = value;
    marked_next_ = (marked_next_ + 1) % kBufferSize;
  }
}

void RepsEntropy::on_timeout(uint64_t now_ns) {
  if (frozen_ || explore_ > 0) return;
  frozen_ = true;
  frozen_head_ = 0;
  exit_freeze_at_ns_ = now_ns + exit_freeze_ns_;
  ++counters_.freezes;
}

}  // namespace spraynet
