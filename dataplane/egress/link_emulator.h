// The transmit side of one emulated link: a serialiser at the configured rate, a propagation
// delay, bit errors and plain loss, and up/down. It holds no packets: it says when the next frame
// may start, when a frame's last bit reaches the far end and whether the far end keeps it. The
// frames themselves wait in EgressPort's delay line, so any number can be in flight at once: a
// frame may start as soon as the previous one has been serialised, long before it arrives.
//
// Time is kept exactly. A frame's serialisation time is rarely a whole number of nanoseconds
// (1000 B at 10 Gbit/s: 819.2 ns), so the moment the line is free again is kept as whole ns plus
// a remainder in units of 1/rate_bps ns; back-to-back frames never accumulate rounding error.
// Times handed out are whole ns, rounded up: "the last bit has arrived by now_ns".
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <string>

namespace spraynet {

struct LinkEmulatorConfig {
  double rate_gbps = 100.0;
  uint64_t propagation_delay_ns = 0;
  double bit_error_rate = 0.0;  // per bit; a frame of b bits is lost with 1 - (1 - BER)^b
  double loss_rate = 0.0;       // per frame, independent of length and of bit errors
  bool up = true;
  uint64_t seed = 1;  // of the generator that decides bit errors and losses

  // Empty when valid, else "key: reason" (e.g. "rate_gbps: must be > 0").
  std::string check() const;
};

enum class LinkFrameFate : uint8_t {
  kDelivered,
  kBitError,  // at least one bit flipped: the far end's FCS check discards it
  kLost,      // the plain per-frame loss rate
  kLinkDown,  // not sent at all
};

struct LinkTransmission {
  uint64_t start_ns = 0;    // first bit leaves (rounded down)
  uint64_t end_ns = 0;      // last bit leaves (rounded up): the line is busy until then
  uint64_t arrival_ns = 0;  // last bit reaches the far end (rounded up)
  LinkFrameFate fate = LinkFrameFate::kLinkDown;
};

class LinkEmulator {
 public:
  // Preamble 7 + SFD 1 + FCS 4 + inter-frame gap 12: what a frame costs on the wire beyond the
  // bytes the mbuf holds.
  static constexpr uint32_t kWireOverheadBytes = 24;
  // Frames shorter than the Ethernet minimum (60 B without FCS) are padded on the wire.
  static constexpr uint32_t kMinFrameBytes = 60;
  static constexpr uint32_t kFcsBytes = 4;
  static constexpr uint64_t kNever = UINT64_MAX;

  // Throws std::invalid_argument with config.check()'s reason when the config is invalid.
  explicit LinkEmulator(const LinkEmulatorConfig& config);

  // Bits one frame of `frame_bytes` (as held in the mbuf, without FCS) occupies on the wire.
  static uint64_t wire_bits(uint32_t frame_bytes);
  // Bits the far end's FCS check covers: the padded frame plus its FCS. Bit errors hit these.
  static uint64_t checked_bits(uint32_t frame_bytes);

  // Earliest whole ns at which a new frame may start; kNever while the link is down.
  uint64_t next_start_ns() const;
  // Starts a frame at the later of ready_ns and the moment the line is free (exactly, with the
  // sub-ns remainder of the frames before it), draws its fate, and returns its times. The caller
  // must not pass a ready_ns in the future of its own clock. On a down link nothing is sent and
  // the fate is kLinkDown.
  LinkTransmission transmit(uint32_t frame_bytes, uint64_t ready_ns);

  // Pure queries, for planning and for tests: when the last bit of a frame started at start_ns
  // on an idle line reaches the far end, and the probability that a frame of this size is lost.
  uint64_t arrival_ns(uint32_t frame_bytes, uint64_t start_ns) const;
  double frame_loss_probability(uint32_t frame_bytes) const;

  // Run-time changes; each throws std::invalid_argument on a value check() would refuse. A new
  // rate applies to frames started after the change (a frame in progress keeps its rate; the
  // line's sub-ns remainder is rounded up). A new delay applies to frames started after the
  // change, but arrivals never overtake one another: a fibre delivers in order.
  void set_rate_gbps(double rate_gbps);
  void set_propagation_delay_ns(uint64_t delay_ns);
  void set_bit_error_rate(double ber);
  void set_loss_rate(double loss_rate);
  void set_up(bool up);

  double rate_gbps() const { return config_.rate_gbps; }
  uint64_t propagation_delay_ns() const { return config_.propagation_delay_ns; }
  double bit_error_rate() const { return config_.bit_error_rate; }
  double loss_rate() const { return config_.loss_rate; }
  bool up() const { return config_.up; }
  // Heap bytes: the loss draws' generator, once made (see rng_).
  uint64_t heap_bytes() const { return rng_ != nullptr ? sizeof(std::mt19937_64) : 0; }

 private:
  // Whole ns and remainder (in 1/rate_bps_ ns) of serialising `bits` at the current rate.
  void serialisation(uint64_t bits, uint64_t& whole_ns, uint64_t& remainder) const;
  double uniform();  // [0, 1), 53 bits

  LinkEmulatorConfig config_;
  uint64_t rate_bps_;
  uint64_t free_ns_ = 0;         // the line is free from free_ns_ + free_remainder_/rate_bps_
  uint64_t free_remainder_ = 0;  // < rate_bps_
  uint64_t last_arrival_ns_ = 0;
  // The loss draws' generator (2.5 KB of state) is made, seeded with config.seed, at the first
  // draw: only a link with a bit error rate or a loss rate draws, and a fabric has thousands of
  // links. The draws are the same as with a generator made up front.
  uint64_t seed_;
  std::unique_ptr<std::mt19937_64> rng_;
  // serialisation()'s last answer (bits 0: none; every frame has more).
  mutable uint64_t last_bits_ = 0;
  mutable uint64_t last_whole_ns_ = 0;
  mutable uint64_t last_remainder_ = 0;
};

}  // namespace spraynet
