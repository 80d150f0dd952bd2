#include "dataplane/egress/link_emulator.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace spraynet {

namespace {

constexpr uint64_t kNsPerSecond = 1'000'000'000;
// Above this the rate in bit/s no longer fits the exact arithmetic comfortably; no link is near.
constexpr double kMaxRateGbps = 1'000'000.0;

std::string check_rate(double rate_gbps) {
  if (!std::isfinite(rate_gbps) || rate_gbps <= 0.0) return "rate_gbps: must be > 0";
  if (rate_gbps * 1e9 < 1.0) return "rate_gbps: must be at least 1 bit/s";
  if (rate_gbps > kMaxRateGbps) return "rate_gbps: must be at most 1000000";
  return {};
}

std::string check_probability(const char* key, double p) {
  if (!(p >= 0.0 && p <= 1.0)) return std::string(key) + ": must be between 0 and 1";
  return {};
}

void throw_if(const std::string& reason) {
  if (!reason.empty()) throw std::invalid_argument("link emulator: " + reason);
}

uint64_t to_bps(double rate_gbps) {
  return static_cast<uint64_t>(std::llround(rate_gbps * 1e9));
}

}  // namespace

std::string LinkEmulatorConfig::check() const {
  if (auto r = check_rate(rate_gbps); !r.empty()) return r;
  if (auto r = check_probability("bit_error_rate", bit_error_rate); !r.empty()) return r;
  if (auto r = check_probability("loss_rate", loss_rate); !r.empty()) return r;
  return {};
}

LinkEmulator::LinkEmulator(const LinkEmulatorConfig& config)
    : config_(config), rate_bps_(0), seed_(config.seed) {
  throw_if(config.check());
  rate_bps_ = to_bps(config.rate_gbps);
}

uint64_t LinkEmulator::wire_bits(uint32_t frame_bytes) {
  return (static_cast<uint64_t>(std::max(frame_bytes, kMinFrameBytes)) + kWireOverheadBytes) * 8;
}

uint64_t LinkEmulator::checked_bits(uint32_t frame_bytes) {
  return (static_cast<uint64_t>(std::max(frame_bytes, kMinFrameBytes)) + kFcsBytes) * 8;
}

void LinkEmulator::serialisation(uint64_t bits, uint64_t& whole_ns, uint64_t& remainder) const {
  // Most frames on a link have the size of the one before (MTU-sized data, ACK-sized ACKs):
  // the last answer is kept, which spares the two 128-bit divisions (library calls).
  if (bits != last_bits_) {
    // 128 bits: a 4 GiB frame times 10^9 would overflow 64.
    const unsigned __int128 scaled = static_cast<unsigned __int128>(bits) * kNsPerSecond;
    last_bits_ = bits;
    last_whole_ns_ = static_cast<uint64_t>(scaled / rate_bps_);
    last_remainder_ = static_cast<uint64_t>(scaled % rate_bps_);
  }
  whole_ns = last_whole_ns_;
  remainder = last_remainder_;
}

uint64_t LinkEmulator::next_start_ns() const {
  if (!config_.up) return kNever;
  return free_ns_ + (free_remainder_ != 0 ? 1 : 0);
}

LinkTransmission LinkEmulator::transmit(uint32_t frame_bytes, uint64_t ready_ns) {
  LinkTransmission t;
  if (!config_.up) {
    t.fate = LinkFrameFate::kLinkDown;
    return t;
  }
  // The frame starts when it is ready, or exactly when the frame before it finished.
  uint64_t start_ns = free_ns_;
  uint64_t start_remainder = free_remainder_;
  if (ready_ns > free_ns_) {
    start_ns = ready_ns;
    start_remainder = 0;
  }
  uint64_t whole_ns = 0;
  uint64_t remainder = 0;
  serialisation(wire_bits(frame_bytes), whole_ns, remainder);
  // Both remainders are below rate_bps_: their sum carries at most one whole ns.
  remainder += start_remainder;
  const bool carry = remainder >= rate_bps_;
  free_ns_ = start_ns + whole_ns + (carry ? 1 : 0);
  free_remainder_ = carry ? remainder - rate_bps_ : remainder;

  t.start_ns = start_ns;
  t.end_ns = next_start_ns();
  t.arrival_ns = std::max(t.end_ns + config_.propagation_delay_ns, last_arrival_ns_);
  last_arrival_ns_ = t.arrival_ns;

  t.fate = LinkFrameFate::kDelivered;
  if (config_.bit_error_rate > 0.0 && uniform() < frame_loss_probability(frame_bytes)) {
    t.fate = LinkFrameFate::kBitError;
  } else if (config_.loss_rate > 0.0 && uniform() < config_.loss_rate) {
    t.fate = LinkFrameFate::kLost;
  }
  return t;
}

uint64_t LinkEmulator::arrival_ns(uint32_t frame_bytes, uint64_t start_ns) const {
  uint64_t whole_ns = 0;
  uint64_t remainder = 0;
  serialisation(wire_bits(frame_bytes), whole_ns, remainder);
  return start_ns + whole_ns + (remainder != 0 ? 1 : 0) + config_.propagation_delay_ns;
}

double LinkEmulator::frame_loss_probability(uint32_t frame_bytes) const {
  const double ber = config_.bit_error_rate;
  if (ber <= 0.0) return 0.0;
  if (ber >= 1.0) return 1.0;
  // 1 - (1 - BER)^b, computed without cancellation for tiny BER.
  return -std::expm1(static_cast<double>(checked_bits(frame_bytes)) * std::log1p(-ber));
}

void LinkEmulator::set_rate_gbps(double rate_gbps) {
  throw_if(check_rate(rate_gbps));
  // The remainder is in units of the old rate: round the free moment up to a whole ns.
  if (free_remainder_ != 0) {
    ++free_ns_;
    free_remainder_ = 0;
  }
  config_.rate_gbps = rate_gbps;
  rate_bps_ = to_bps(rate_gbps);
  last_bits_ = 0;  // the kept serialisation time was for the old rate
}

void LinkEmulator::set_propagation_delay_ns(uint64_t delay_ns) {
  config_.propagation_delay_ns = delay_ns;
}

void LinkEmulator::set_bit_error_rate(double ber) {
  throw_if(check_probability("bit_error_rate", ber));
  config_.bit_error_rate = ber;
}

void LinkEmulator::set_loss_rate(double loss_rate) {
  throw_if(check_probability("loss_rate", loss_rate));
  config_.loss_rate = loss_rate;
}

void LinkEmulator::set_up(bool up) {
  config_.up = up;
}

double LinkEmulator::uniform() {
  if (rng_ == nullptr) rng_ = std::make_unique<std::mt19937_64>(seed_);
  return static_cast<double>((*rng_)() >> 11) * 0x1.0p-53;
}

}  // namespace spraynet
