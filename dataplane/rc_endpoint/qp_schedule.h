// When each QP of an RC engine next has work of one kind (sending, ACKing, answering READs):
// a due time per QP, kept in time order, so that an engine with 100,000 QPs of which 10 are
// active visits 10 per poll and finds its next event without walking the rest.
//
// A QP's due time is a lower bound of when its work can start: the engine sets it after every
// change to the QP (a packet received, a post, a poll, a CNP) from what the QP itself says
// (next_event_ns, its pacing). due(qp) <= now means "look at it"; kNever means "nothing until
// something arrives". Pure bookkeeping: no clock, no packets.
#pragma once

#include <cstddef>
#include <cstdint>
#include <set>
#include <utility>
#include <vector>

namespace spraynet {

class QpSchedule {
 public:
  static constexpr uint64_t kNever = UINT64_MAX;

  // Room for QP indices 0..qps-1 (more later with grow); every QP starts unscheduled.
  explicit QpSchedule(uint32_t qps = 0) : due_(qps, kNever) {}
  void grow(uint32_t qps) {
    if (qps > due_.size()) due_.resize(qps, kNever);
  }

  // QP qp's next due time (kNever: none). O(log n) when it changes, O(1) when not.
  void set(uint32_t qp, uint64_t due_ns);
  uint64_t due(uint32_t qp) const { return qp < due_.size() ? due_[qp] : kNever; }

  // Appends the QPs due at or before now_ns, in index order (round robin runs over them in the
  // engine's QP order); returns how many. O(k log k) for k due QPs.
  size_t due_by(uint64_t now_ns, std::vector<uint32_t>& out) const;

  // The earliest due time (kNever when none).
  uint64_t earliest() const { return by_time_.empty() ? kNever : by_time_.begin()->first; }
  // The earliest due time among the QPs `admits` accepts, visiting QPs in time order until the
  // first accepted one.
  template <class Admits>
  uint64_t earliest_if(Admits&& admits) const {
    for (const auto& [t, qp] : by_time_) {
      if (admits(qp)) return t;
    }
    return kNever;
  }

  size_t scheduled() const { return by_time_.size(); }  // QPs with a due time
  uint64_t memory_bytes() const;

 private:
  std::vector<uint64_t> due_;                        // per QP index
  std::set<std::pair<uint64_t, uint32_t>> by_time_;  // (due, qp) of every scheduled QP
};

}  // namespace spraynet
