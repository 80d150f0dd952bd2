// REPS, recycled entropy packet spraying (Bonato et al., "REPS: Recycled Entropy Packet Spraying
// for Adaptive Load Balancing and Failure Mitigation", arXiv 2407.21625; Ultra Ethernet 1.0's
// REPS; htsim's UecMpReps and CircularBufferREPS in csg-htsim sim/uec_mp.cpp and
// sim/buffer_reps.cpp). A QP sends each packet with an entropy value (its UDP source port, which
// ECMP switches hash) and learns from the feedback which values found an uncongested path:
//  - an ACK echoes the value of the packet it acknowledges: a value acknowledged without an ECN
//    mark goes into a ring of kBufferSize values and is reused (oldest first, once each) before
//    any new value is drawn;
//  - a CNP echoes the value of the packet that was marked: that value is never reused (taken out
//    of the ring, and its ACK, which follows, does not put it back);
//  - nothing to reuse: a value drawn uniformly from the `values` of the space;
//  - freezing: a retransmission timeout (a path lost, not congested) freezes the ring: new ACKs
//    still enter it, and sending cycles through the ring's values, good or not, without drawing
//    new ones (the last paths known good keep the QP going while a failed one would keep taking
//    random draws); after exit_freeze_ns a new ACK ends the freeze, empties the ring and the
//    next kExploreAfterFreeze packets draw new values (explore). A timeout while exploring does
//    not freeze again.
#pragma once

#include <array>
#include <cstdint>

namespace spraynet {

struct RepsCounters {
  uint64_t reused = 0;               // packets sent on a value from the ring
  uint64_t drawn = 0;                // packets sent on a new random value (none to reuse)
  uint64_t explored = 0;             // packets sent on a random value while exploring
  uint64_t frozen_sent = 0;          // packets sent while frozen (cycling the ring)
  uint64_t recycled = 0;             // ACKed values put into the ring
  uint64_t marked = 0;               // values a CNP marked
  uint64_t marked_not_recycled = 0;  // ACKs of marked values, kept out of the ring
  uint64_t freezes = 0;           // timeouts that froze the ring

  // Field by field (an engine sums its QPs').
  RepsCounters& operator+=(const RepsCounters& o) {
    reused += o.reused;
    drawn += o.drawn;
    explored += o.explored;
    frozen_sent += o.frozen_sent;
    recycled += o.recycled;
    marked += o.marked;
    marked_not_recycled += o.marked_not_recycled;
    freezes += o.freezes;
    static_assert(sizeof(RepsCounters) == 8 * sizeof(uint64_t),
                  "every RepsCounters field is summed here");
    return *this;
  }
};

class RepsEntropy {
 public:
  static constexpr uint32_t kBufferSize = 8;             // htsim's repsBufferSize
  static constexpr uint32_t kExploreAfterFreeze = 16;    // htsim's explore_counter after a freeze
  static constexpr uint64_t kExitFreezeNs = 10'000'000;  // htsim's exit_freeze_after: 10 ms
  static constexpr uint32_t kMaxValues = 1u << 14;

  // `values`: a power of two in [1, 2^14] (std::invalid_argument otherwise); `base_port`: the
  // QP's port, whose bits above the values every packet keeps; `seed`: the draws.
  RepsEntropy(uint32_t values, uint16_t base_port, uint64_t seed,
              uint64_t exit_freeze_ns = kExitFreezeNs);

  // The UDP source port of the next packet.
  uint16_t next();
  // An ACK echoing `port` (the acknowledged packet's): a good path, unless marked since.
  void on_ack(uint16_t port, uint64_t now_ns);
  // A CNP echoing `port`: the path is congested; never reuse it.
  void on_mark(uint16_t port);
  // A retransmission timeout: freeze (see the top).
  void on_timeout(uint64_t now_ns);

  bool frozen() const { return frozen_; }
  uint32_t explore_left() const { return explore_; }
  uint32_t fresh() const;  // values in the ring not yet reused
  uint32_t values() const { return mask_ + 1; }
  const RepsCounters& counters() const { return counters_; }

 private:
  struct Slot {
    uint16_t value = 0;  // the entropy (low bits of the port)
    bool valid = false;  // acknowledged and not yet reused
  };
  uint16_t port_of(uint32_t value) const { return static_cast<uint16_t>(base_ | value); }
  uint32_t draw();
  void add(uint16_t value);
  void reset_ring();

  std::array<Slot, kBufferSize> ring_{};
  uint32_t head_ = 0;         // where the next ACKed value goes
  uint32_t count_ = 0;        // slots written since the last reset (at most kBufferSize)
  uint32_t frozen_head_ = 0;  // the next slot a frozen QP sends on
  std::array<uint16_t, kBufferSize> marked_{};  // values marked, their ACKs not yet seen
  uint32_t marked_count_ = 0;
  uint32_t marked_next_ = 0;
  bool frozen_ = false;
  uint64_t exit_freeze_at_ns_ = 0;
  uint32_t explore_ = 0;
  uint32_t mask_;
  uint16_t base_ = 0;
  uint64_t exit_freeze_ns_;
  uint64_t state_;
  RepsCounters counters_;
};

}  // namespace spraynet
