// A FIFO of trivially copyable entries in one power-of-two array that doubles when full and
// never shrinks: after warm-up a push or a pop is an index increment, with no allocation and no
// block chase per packet (std::deque allocates a block every 512 bytes pushed and frees one
// every 512 popped, and walks a map to reach its front). An egress port's class queues and its
// delay line are these.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <type_traits>
#include <vector>

namespace spraynet {

template <class T>
class FifoRing {
  static_assert(std::is_trivially_copyable_v<T>, "entries are moved by plain copies");

 public:
  using value_type = T;

  bool empty() const { return head_ == tail_; }
  size_t size() const { return static_cast<size_t>(tail_ - head_); }
  size_t capacity() const { return buf_.size(); }
  // Heap bytes: the array (capacity x entry; nothing until the first push).
  uint64_t heap_bytes() const { return buf_.capacity() * sizeof(T); }

  T& front() { return buf_[head_ & mask_]; }
  const T& front() const { return buf_[head_ & mask_]; }
  T& back() { return buf_[(tail_ - 1) & mask_]; }
  const T& back() const { return buf_[(tail_ - 1) & mask_]; }
  // The i-th entry from the front.
  const T& operator[](size_t i) const { return buf_[(head_ + i) & mask_]; }

  void push_back(const T& v) {
    if (size() == buf_.size()) grow();
    buf_[tail_++ & mask_] = v;
  }
  // At the front (what a wire port's driver hands back, unsent, goes first again): positions
  // wrap below 0 as unsigned numbers do, and size() and the index stay right.
  void push_front(const T& v) {
    if (size() == buf_.size()) grow();
    buf_[--head_ & mask_] = v;
  }
  void pop_front() { ++head_; }
  void pop_back() { --tail_; }
  void clear() { head_ = tail_ = 0; }

  // Front to back.
  class const_iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = T;
    using difference_type = std::ptrdiff_t;
    using pointer = const T*;
    using reference = const T&;
    const_iterator(const FifoRing* ring, uint64_t pos) : ring_(ring), pos_(pos) {}
    const T& operator*() const { return ring_->buf_[pos_ & ring_->mask_]; }
    const T* operator->() const { return &**this; }
    const_iterator& operator++() {
      ++pos_;
      return *this;
    }
    bool operator==(const const_iterator& o) const { return pos_ == o.pos_; }
    bool operator!=(const const_iterator& o) const { return pos_ != o.pos_; }

   private:
    const FifoRing* ring_;
    uint64_t pos_;
  };
  const_iterator begin() const { return {this, head_}; }
  const_iterator end() const { return {this, tail_}; }

 private:
  static constexpr size_t kInitialCapacity = 16;

  void grow() {
    std::vector<T> bigger(buf_.empty() ? kInitialCapacity : 2 * buf_.size());
    const size_t n = size();
    for (size_t i = 0; i < n; ++i) bigger[i] = (*this)[i];
    buf_.swap(bigger);
    mask_ = buf_.size() - 1;
    head_ = 0;
    tail_ = n;
  }

  std::vector<T> buf_;
  uint64_t mask_ = 0;
  uint64_t head_ = 0;  // positions count up forever; the index is position & mask_
  uint64_t tail_ = 0;
};

}  // namespace spraynet
