// A CONGA leaf's two tables (Alizadeh et al., SIGCOMM 2014, section 3.4):
//   Congestion-From-Leaf[src leaf][LBTag]  what packets from another leaf said about the path
//                                          they came by (the CE they arrived with); fed back to
//                                          that leaf, one entry per packet going to it, round
//                                          robin over the entries;
//   Congestion-To-Leaf[dst leaf][uplink]   what another leaf fed back about this leaf's uplinks
//                                          towards it: the remote part of the choice of uplink.
// Entries age out: one not updated for `aging_ns` counts as unknown (metric 0, as
// conweave-ns3's AgingEvent resets it) and is no longer fed back.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace spraynet {

struct CongaTableCounters {
  uint64_t arrivals = 0;           // packets from another leaf recorded (From-Leaf updates)
  uint64_t feedback_sent = 0;      // packets that carried a From-Leaf entry back
  uint64_t feedback_received = 0;  // feedback recorded into To-Leaf
  uint64_t bad_leaf = 0;           // a leaf id or LBTag beyond the tables: ignored

  CongaTableCounters& operator+=(const CongaTableCounters& o) {
    arrivals += o.arrivals;
    feedback_sent += o.feedback_sent;
    feedback_received += o.feedback_received;
    bad_leaf += o.bad_leaf;
    static_assert(sizeof(CongaTableCounters) == 4 * sizeof(uint64_t),
                  "every CongaTableCounters field is summed here");
    return *this;
  }
};

struct CongaFeedback {
  uint8_t lbtag = 0;
  uint8_t metric = 0;
};

class CongaTables {
 public:
  static constexpr unsigned kMaxLeaves = 256;
  static constexpr unsigned kUplinks = 16;              // LBTag is 4 bits
  static constexpr uint64_t kDefaultAgingNs = 500'000;  // conweave-ns3: conga_agingTime 500 us

  // Tables for leaves 0..leaves-1 (at most kMaxLeaves). Throws std::invalid_argument beyond.
  CongaTables(unsigned leaves, uint64_t aging_ns = kDefaultAgingNs);

  // A packet from src_leaf arrived by its uplink `lbtag` with `ce`: Congestion-From-Leaf.
  void record_arrival(uint8_t src_leaf, uint8_t lbtag, uint8_t ce, uint64_t now_ns);
  // Feedback from `leaf` about this leaf's uplink `lbtag` towards it: Congestion-To-Leaf.
  void record_feedback(uint8_t leaf, uint8_t lbtag, uint8_t metric, uint64_t now_ns);
  // The From-Leaf entry to piggyback on a packet going to dst_leaf: the next live one after the
  // last fed back to that leaf (round robin by LBTag); nullopt when it has none.
  std::optional<CongaFeedback> next_feedback(uint8_t dst_leaf, uint64_t now_ns);
  // Congestion-To-Leaf[leaf][uplink]: 0 when never fed back or aged out.
  uint8_t remote_metric(uint8_t leaf, uint8_t uplink, uint64_t now_ns) const;
  // Congestion-From-Leaf[leaf][lbtag], nullopt when never recorded or aged out.
  std::optional<uint8_t> from_leaf_metric(uint8_t leaf, uint8_t lbtag, uint64_t now_ns) const;
  // Live entries (updated within the aging time) in both tables.
  uint64_t live_entries(uint64_t now_ns) const;

  unsigned leaves() const { return leaves_; }
  uint64_t aging_ns() const { return aging_ns_; }
  const CongaTableCounters& counters() const { return counters_; }
  uint64_t heap_bytes() const;

 private:
  struct Entry {
    uint64_t updated_ns = 0;
    uint8_t metric = 0;
    bool used = false;
  };
  bool live(const Entry& e, uint64_t now_ns) const {
    return e.used && (now_ns < e.updated_ns || now_ns - e.updated_ns <= aging_ns_);
  }

  unsigned leaves_;
  uint64_t aging_ns_;
  std::vector<Entry> from_;       // [leaf * kUplinks + lbtag]
  std::vector<Entry> to_;         // [leaf * kUplinks + uplink]
  std::vector<uint8_t> next_fb_;  // by leaf: the LBTag the round robin looks at next
  CongaTableCounters counters_;
};

}  // namespace spraynet
