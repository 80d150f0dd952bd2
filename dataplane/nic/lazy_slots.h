// Per-flow-slot state that costs memory only for the slots in use: `Slots` entries in pages of
// `Page`, a page made (each entry set to Init{}(slot)) when one of its entries is first touched,
// kept until the end. Reads and writes see exactly what a plain array initialised the same way
// would hold, so replacing one by this changes no result, only the memory: a NIC that sprays a
// few flows touches a few pages of the thousands of slots its hash may pick.
// Not thread-safe (the owner's lcore alone); at() may allocate, once per page.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace spraynet {

template <class T, size_t Slots, size_t Page, class Init>
class LazySlots {
  static_assert(Page > 0 && Slots % Page == 0, "whole pages");

 public:
  static constexpr size_t kSlots = Slots;

  T& operator[](size_t slot) {
    std::unique_ptr<PageArray>& page = pages_[slot / Page];
    if (page == nullptr) make(page, slot / Page);
    return (*page)[slot % Page];
  }
  size_t pages_in_use() const { return in_use_; }
  // Heap bytes of the pages made (the page table is part of the owner's object).
  uint64_t heap_bytes() const { return static_cast<uint64_t>(in_use_) * sizeof(PageArray); }

 private:
  using PageArray = std::array<T, Page>;

  [[gnu::noinline]] void make(std::unique_ptr<PageArray>& page, size_t index) {
    page = std::make_unique<PageArray>();
    for (size_t i = 0; i < Page; ++i) (*page)[i] = Init{}(index * Page + i);
    ++in_use_;
  }

  std::array<std::unique_ptr<PageArray>, Slots / Page> pages_{};
  size_t in_use_ = 0;
};

}  // namespace spraynet
