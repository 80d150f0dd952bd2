// SeqlockSnapshot: one writer publishing, readers copying without a lock, never a torn copy.
#include "dataplane/runtime/seqlock_snapshot.h"

#include <catch2/catch.hpp>

#include <atomic>
#include <thread>
#include <vector>

using spraynet::runtime::SeqlockSnapshot;

TEST_CASE("SeqlockSnapshot: nothing to read before the first publication, then the latest") {
  SeqlockSnapshot s(3);
  std::vector<uint64_t> out(3, 99);
  CHECK(s.publications() == 0);
  CHECK_FALSE(s.read(out.data(), 10));
  CHECK(out == std::vector<uint64_t>{99, 99, 99});  // untouched
  const uint64_t a[] = {1, 2, 3}, b[] = {4, 5, 6};
  s.publish(a);
  s.publish(b);
  CHECK(s.publications() == 2);
  REQUIRE(s.read(out.data(), 1));
  CHECK(out == std::vector<uint64_t>{4, 5, 6});
}

TEST_CASE("SeqlockSnapshot: a reader racing the writer sees whole publications, in order") {
  // Every publication k is 64 words all equal to k: a torn copy would mix two values.
  constexpr size_t kWords = 64;
  constexpr uint64_t kPublications = 200'000;
  SeqlockSnapshot s(kWords);
  std::atomic<bool> done{false};
  uint64_t torn = 0, backwards = 0, copies = 0;
  std::thread reader([&] {
    std::vector<uint64_t> out(kWords);
    uint64_t last = 0;
    while (!done.load(std::memory_order_acquire)) {
      if (!s.read(out.data(), 1000)) continue;
      ++copies;
      for (uint64_t w : out) torn += w != out[0];
      backwards += out[0] < last;
      last = out[0];
    }
  });
  std::vector<uint64_t> words(kWords);
  for (uint64_t k = 1; k <= kPublications; ++k) {
    std::fill(words.begin(), words.end(), k);
    s.publish(words.data());
  }
  done.store(true, std::memory_order_release);
  reader.join();
  INFO("copies " << copies);
  CHECK(torn == 0);
  CHECK(backwards == 0);
  std::vector<uint64_t> out(kWords);
  REQUIRE(s.read(out.data(), 1));
  CHECK(out[0] == kPublications);
  CHECK(s.publications() == kPublications);
}
