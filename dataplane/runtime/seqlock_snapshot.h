// A fixed-size block of 64-bit words one writer publishes and any number of readers copy
// without a lock (a seqlock): the writer never waits for a reader, and a reader gets a copy of
// exactly one publication or, when every try overlapped a publication, nothing. This is how an
// lcore hands its counters to telemetry: a reader can never stall forwarding.
//
// Writers must be serialised by the caller (one lcore, or whoever holds the node's lock). The
// words are relaxed atomics between two stores of the sequence, so a torn copy is detected by a
// changed (or odd) sequence, never read as a value.
#pragma once

#include <rte_pause.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <thread>

namespace spraynet::runtime {

class SeqlockSnapshot {
 public:
  explicit SeqlockSnapshot(size_t words)
      : size_(words), words_(std::make_unique<std::atomic<uint64_t>[]>(words)) {}

  size_t size() const { return size_; }
  // Publications so far (0: nothing published yet; read() then fails).
  uint64_t publications() const { return seq_.load(std::memory_order_acquire) / 2; }

  // Copies size() words from `src`.
  void publish(const uint64_t* src) {
    const uint64_t s = seq_.load(std::memory_order_relaxed);
    seq_.store(s + 1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    for (size_t i = 0; i < size_; ++i) words_[i].store(src[i], std::memory_order_relaxed);
    seq_.store(s + 2, std::memory_order_release);
  }

  // Copies the latest publication into `dst` (size() words). False when nothing has been
  // published, or `tries` copies all overlapped a publication (a writer preempted mid-copy):
  // after the first few tries the reader yields its CPU to let the writer finish.
  bool read(uint64_t* dst, unsigned tries) const {
    for (unsigned t = 0; t < tries; ++t) {
      const uint64_t before = seq_.load(std::memory_order_acquire);
      if (before == 0) return false;
      if ((before & 1) == 0) {
        for (size_t i = 0; i < size_; ++i) dst[i] = words_[i].load(std::memory_order_relaxed);
        std::atomic_thread_fence(std::memory_order_acquire);
        if (seq_.load(std::memory_order_relaxed) == before) return true;
      }
      if (t < 16) {
        rte_pause();
      } else {
        std::this_thread::yield();
      }
    }
    return false;
  }

 private:
  size_t size_;
  std::unique_ptr<std::atomic<uint64_t>[]> words_;
  std::atomic<uint64_t> seq_{0};  // odd while a publication is being written
};

}  // namespace spraynet::runtime
