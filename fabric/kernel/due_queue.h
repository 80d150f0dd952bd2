// fabric_emu's event queue: "node N is due at t", earliest first, ties in the order they were
// scheduled. A 4-ary min-heap of 16-byte entries: the four children of an entry are 64 bytes
// side by side, so a pop's sift-down reads one or two lines per level over log4(n) levels,
// where std::priority_queue of 24-byte entries read one or two per level over log2(n). The order is a
// total order on (t, seq): any correct heap pops the same sequence, so results do not change.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <vector>

namespace spraynet::fabric {

class DueQueue {
 public:
  // Nodes are 20 bits of the entry, the sequence number the other 44 (2^44 pushes: more than
  // a run makes at tens of millions a second for days).
  static constexpr uint32_t kMaxNodes = 1u << 20;

  struct Due {
    uint64_t t;
    uint64_t key;  // seq << 20 | node
    uint32_t node() const { return static_cast<uint32_t>(key & (kMaxNodes - 1)); }
    bool before(const Due& o) const { return t != o.t ? t < o.t : key < o.key; }
  };

  bool empty() const { return heap_.empty(); }
  size_t size() const { return heap_.size(); }
  const Due& top() const { return heap_.front(); }

  // Throws std::out_of_range for a node id of kMaxNodes or more.
  void push(uint64_t t, uint32_t node) {
    if (node >= kMaxNodes) throw std::out_of_range("DueQueue: node id beyond 2^20");
    const Due d{t, seq_++ << 20 | node};
    size_t i = heap_.size();
    heap_.push_back(d);
    while (i != 0) {
      const size_t parent = (i - 1) / 4;
      if (!d.before(heap_[parent])) break;
      heap_[i] = heap_[parent];
      i = parent;
    }
    heap_[i] = d;
  }

  void pop() {
    const Due last = heap_.back();
    heap_.pop_back();
    const size_t n = heap_.size();
    if (n == 0) return;
    size_t i = 0;
    for (;;) {
      const size_t first = 4 * i + 1;
      if (first >= n) break;
      size_t best = first;
      const size_t end = first + 4 < n ? first + 4 : n;
      for (size_t c = first + 1; c < end; ++c) {
        if (heap_[c].before(heap_[best])) best = c;
      }
      if (!heap_[best].before(last)) break;
      heap_[i] = heap_[best];
      i = best;
    }
    heap_[i] = last;
  }

 private:
  std::vector<Due> heap_;
  uint64_t seq_ = 0;
};

}  // namespace spraynet::fabric
