// The earliest of N event times, kept as they change: a binary tournament tree over the slots,
// so that set() costs log2 N comparisons and earliest() one load. A node with many egress ports
// is asked for its next event after every call into it (fabric_emu reschedules every node it
// touches); a linear scan of 64 ports' times cost about 600 instructions a packet-hop there.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace spraynet {

class EarliestEvent {
 public:
  static constexpr uint64_t kNever = UINT64_MAX;

  explicit EarliestEvent(size_t slots = 0) { resize(slots); }

  // Every slot kNever again.
  void resize(size_t slots) {
    leaves_ = 1;
    while (leaves_ < slots) leaves_ <<= 1;
    slots_ = slots;
    tree_.assign(2 * leaves_, kNever);
  }
  size_t size() const { return slots_; }
  // Heap bytes: the tree.
  uint64_t heap_bytes() const { return tree_.capacity() * sizeof(uint64_t); }

  uint64_t at(size_t slot) const { return tree_[leaves_ + slot]; }
  void set(size_t slot, uint64_t t) {
    size_t i = leaves_ + slot;
    if (tree_[i] == t) return;
    tree_[i] = t;
    // Up to the first ancestor whose minimum does not change.
    for (i >>= 1; i != 0; i >>= 1) {
      const uint64_t m = std::min(tree_[2 * i], tree_[2 * i + 1]);
      if (tree_[i] == m) break;
      tree_[i] = m;
    }
  }
  uint64_t earliest() const { return tree_.size() > 1 ? tree_[1] : kNever; }

  // Appends the slots due by t (at(slot) <= t) to out, in ascending slot order, visiting only
  // the subtrees that hold one.
  template <class Out>
  void append_due(uint64_t t, Out& out) const {
    if (earliest() > t) return;
    size_t stack[2 * 64];  // a depth-first walk holds at most one pending sibling per level
    size_t sp = 0;
    stack[sp++] = 1;
    while (sp != 0) {
      const size_t i = stack[--sp];
      if (tree_[i] > t) continue;
      if (i >= leaves_) {
        out.push_back(static_cast<typename Out::value_type>(i - leaves_));
        continue;
      }
      stack[sp++] = 2 * i + 1;  // the right subtree after the left one
      stack[sp++] = 2 * i;
    }
  }

 private:
  size_t leaves_ = 1;
  size_t slots_ = 0;
  std::vector<uint64_t> tree_;  // [1] the root, [leaves_ + slot] the slots
};

}  // namespace spraynet
