#include "dataplane/runtime/growing_mbuf_pool.h"

#include <rte_mbuf.h>

#include <catch2/catch.hpp>

#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

using spraynet::runtime::GrowingMbufPool;

namespace {

// Takes every free mbuf, one at a time (a bulk get fails whole when short).
std::vector<rte_mbuf*> take_all(rte_mempool* mp) {
  std::vector<rte_mbuf*> out;
  while (rte_mbuf* m = rte_pktmbuf_alloc(mp)) out.push_back(m);
  return out;
}

void give_back(std::vector<rte_mbuf*>& mbufs) {
  for (rte_mbuf* m : mbufs) rte_pktmbuf_free(m);
  mbufs.clear();
}

}  // namespace

TEST_CASE("a growing pool starts with one chunk, grows on demand, and stops at its max",
          "[growing_mbuf_pool]") {
  GrowingMbufPool pool("gmp_grow", 5000, 2048 + RTE_PKTMBUF_HEADROOM, 1024);
  rte_mempool* mp = pool.pool();
  REQUIRE(mp != nullptr);
  CHECK(pool.populated() == 1024);
  CHECK(pool.max_mbufs() == 5000);
  CHECK(pool.in_use() == 0);
  CHECK(pool.bytes() >= 1024u * (sizeof(rte_mbuf) + 2048 + RTE_PKTMBUF_HEADROOM));
  CHECK(rte_pktmbuf_data_room_size(mp) == 2048 + RTE_PKTMBUF_HEADROOM);

  CHECK(pool.shortfalls() == 0);
  std::vector<rte_mbuf*> first = take_all(mp);
  CHECK(first.size() == 1024);
  CHECK(pool.in_use() == 1024);
  // The get that found it empty, below the max: counted as such.
  CHECK(pool.shortfalls_below_max() >= 1);
  CHECK(pool.shortfalls() >= pool.shortfalls_below_max());
  for (rte_mbuf* m : first) {
    CHECK(rte_pktmbuf_headroom(m) == RTE_PKTMBUF_HEADROOM);
    CHECK(rte_pktmbuf_tailroom(m) == 2048);
    CHECK(m->pool == mp);
    CHECK(m->nb_segs == 1);
    CHECK(m->next == nullptr);
  }
  // Writing the whole data room of every mbuf must stay within its own buffer.
  for (size_t i = 0; i < first.size(); ++i) {
    char* p = rte_pktmbuf_append(first[i], 2048);
    REQUIRE(p != nullptr);
    std::memset(p, static_cast<int>(i & 0xFF), 2048);
  }
  for (size_t i = 0; i < first.size(); ++i) {
    const auto* p = rte_pktmbuf_mtod(first[i], const unsigned char*);
    CHECK(p[0] == (i & 0xFF));
    CHECK(p[2047] == (i & 0xFF));
  }

  // Growing while mbufs are out leaves them as they are (their data and length untouched).
  const uint64_t bytes_before = pool.bytes();
  CHECK(pool.peak_in_use() == 0);  // sampled where the pool grows
  pool.reserve_free(1500);
  CHECK(pool.peak_in_use() == 1024);
  CHECK(pool.populated() == 1024 + 2 * 1024);
  CHECK(pool.bytes() > bytes_before);
  CHECK(rte_mempool_avail_count(mp) >= 1500);
  for (size_t i = 0; i < first.size(); ++i) {
    CHECK(rte_pktmbuf_data_len(first[i]) == 2048);
    CHECK(rte_pktmbuf_mtod(first[i], const unsigned char*)[100] == (i & 0xFF));
  }
  std::vector<rte_mbuf*> second = take_all(mp);
  CHECK(second.size() == 2048);
  for (rte_mbuf* m : second) {
    CHECK(rte_pktmbuf_headroom(m) == RTE_PKTMBUF_HEADROOM);
    CHECK(rte_pktmbuf_data_len(m) == 0);
  }

  // Asked for more than the max allows: stops at the max, the last chunk smaller.
  pool.reserve_free(100000);
  CHECK(pool.populated() == 5000);
  pool.reserve_free(100000);  // at the max: nothing more
  CHECK(pool.populated() == 5000);
  const uint64_t below_max = pool.shortfalls_below_max();
  const uint64_t shortfalls = pool.shortfalls();
  std::vector<rte_mbuf*> third = take_all(mp);
  CHECK(third.size() == 5000 - 1024 - 2048);
  CHECK(pool.in_use() == 5000);
  CHECK(rte_pktmbuf_alloc(mp) == nullptr);
  // Empty at the max: a shortfall, but not one a bigger pool would have avoided.
  CHECK(pool.shortfalls() > shortfalls);
  CHECK(pool.shortfalls_below_max() == below_max);

  give_back(first);
  give_back(second);
  give_back(third);
  CHECK(pool.in_use() == 0);
  CHECK(rte_mempool_avail_count(mp) == 5000);
  // Enough free already: no new chunk.
  const uint64_t bytes_full = pool.bytes();
  pool.reserve_free(10);
  CHECK(pool.bytes() == bytes_full);
}

TEST_CASE("a growing pool's first chunk may be all of it, and a small max gets a small cache",
          "[growing_mbuf_pool]") {
  GrowingMbufPool pool("gmp_small", 100, 64 + RTE_PKTMBUF_HEADROOM, 100);
  CHECK(pool.populated() == 100);
  CHECK(pool.pool()->cache_size <= 66);
  std::vector<rte_mbuf*> all = take_all(pool.pool());
  CHECK(all.size() == 100);
  CHECK(rte_pktmbuf_tailroom(all.front()) == 64);
  pool.reserve_free(1);  // nothing to add: at the max
  CHECK(pool.populated() == 100);
  give_back(all);
  CHECK(pool.in_use() == 0);
}

TEST_CASE("chained segments of a growing pool free back to it", "[growing_mbuf_pool]") {
  GrowingMbufPool pool("gmp_chain", 1000, 512 + RTE_PKTMBUF_HEADROOM, 256);
  rte_mbuf* head = rte_pktmbuf_alloc(pool.pool());
  REQUIRE(head != nullptr);
  for (int i = 0; i < 3; ++i) {
    rte_mbuf* seg = rte_pktmbuf_alloc(pool.pool());
    REQUIRE(seg != nullptr);
    REQUIRE(rte_pktmbuf_append(seg, 100) != nullptr);
    REQUIRE(rte_pktmbuf_chain(head, seg) == 0);
  }
  CHECK(head->nb_segs == 4);
  CHECK(pool.in_use() == 4);
  rte_pktmbuf_free(head);
  CHECK(pool.in_use() == 0);
}

TEST_CASE("a growing pool refuses bad arguments by name", "[growing_mbuf_pool]") {
  CHECK_THROWS_AS(GrowingMbufPool("gmp_zero", 0, 2048, 1), std::invalid_argument);
  CHECK_THROWS_WITH(GrowingMbufPool("gmp_zero", 0, 2048, 1),
                    "growing mbuf pool \"gmp_zero\": max_mbufs is 0");
  CHECK_THROWS_WITH(GrowingMbufPool("gmp_zero_chunk", 10, 2048, 0),
                    "growing mbuf pool \"gmp_zero_chunk\": chunk_mbufs is 0");
  CHECK_THROWS_AS(GrowingMbufPool("gmp_big_chunk", 10, 2048, 11), std::invalid_argument);
  CHECK_THROWS_AS(GrowingMbufPool("gmp_room", 10, RTE_PKTMBUF_HEADROOM - 1, 10),
                  std::invalid_argument);
  CHECK_THROWS_AS(GrowingMbufPool("", 10, 2048, 10), std::invalid_argument);
  const std::string long_name(RTE_MEMPOOL_NAMESIZE, 'x');
  CHECK_THROWS_AS(GrowingMbufPool(long_name, 10, 2048, 10), std::invalid_argument);
  CHECK_THROWS_WITH(GrowingMbufPool(long_name, 10, 2048, 10),
                    Catch::Contains("the name must have 1 to " + std::to_string(RTE_MEMPOOL_NAMESIZE - 1) + " characters"));
  // The longest name allowed works.
  GrowingMbufPool longest(std::string(RTE_MEMPOOL_NAMESIZE - 1, 'y'), 10, 2048, 10);
  CHECK(longest.populated() == 10);
  // A name in use: DPDK's refusal, named.
  GrowingMbufPool first("gmp_dup", 10, 2048, 10);
  CHECK_THROWS_AS(GrowingMbufPool("gmp_dup", 10, 2048, 10), std::runtime_error);
  CHECK_THROWS_WITH(GrowingMbufPool("gmp_dup", 10, 2048, 10),
                    Catch::Contains("gmp_dup") && Catch::Contains("rte_mempool_create_empty"));
  // The failed ones left nothing behind: the name is free again once the first is gone.
  CHECK(rte_mempool_lookup("gmp_zero") == nullptr);
}

TEST_CASE("a freed growing pool releases its name", "[growing_mbuf_pool]") {
  {
    GrowingMbufPool a("gmp_reuse", 2000, 1024, 500);
    a.reserve_free(1800);
    CHECK(a.populated() == 2000);
  }
  CHECK(rte_mempool_lookup("gmp_reuse") == nullptr);
  GrowingMbufPool b("gmp_reuse", 20, 1024, 20);
  CHECK(b.populated() == 20);
}

TEST_CASE("a pool kept for the next run accounts as a new pool of that run would",
          "[growing_mbuf_pool]") {
  GrowingMbufPool fresh("gmp_fresh", 8000, 512 + RTE_PKTMBUF_HEADROOM, 1000);
  GrowingMbufPool kept("gmp_kept", 8000, 512 + RTE_PKTMBUF_HEADROOM, 1000);
  // An earlier run grew `kept` to its max; every mbuf came back.
  kept.reserve_free(UINT32_MAX);
  REQUIRE(kept.populated() == 8000);
  const uint64_t mapped = kept.mapped_bytes();
  kept.begin_run();
  CHECK(kept.run_populated() == fresh.populated());  // the first chunk (DPDK packs a few more)
  CHECK(kept.bytes() == fresh.bytes());
  CHECK(kept.peak_in_use() == 0);

  // The same run on both: what each holds in use, where it grows, what it reports.
  std::vector<rte_mbuf*> a, b;
  for (const uint32_t want : {300u, 1700u, 2500u}) {
    fresh.reserve_free(want);
    kept.reserve_free(want);
    CHECK(kept.run_populated() == fresh.populated());
    CHECK(kept.bytes() == fresh.bytes());
    for (uint32_t i = 0; i < want; ++i) {
      rte_mbuf* x = rte_pktmbuf_alloc(fresh.pool());
      rte_mbuf* y = rte_pktmbuf_alloc(kept.pool());
      REQUIRE(x != nullptr);
      REQUIRE(y != nullptr);
      a.push_back(x);
      b.push_back(y);
    }
    CHECK(kept.in_use() == fresh.in_use());
  }
  CHECK(kept.peak_in_use() == fresh.peak_in_use());
  CHECK(kept.mapped_bytes() == mapped);  // nothing new mapped: the earlier run's mbufs serve
  // More than the run's own pool holds free, below its max: a new pool would have come short,
  // and the kept one says so, though it had mbufs to give.
  const uint64_t short_fresh = fresh.shortfalls_below_max();
  const uint64_t short_kept = kept.shortfalls_below_max();
  const uint32_t free_in_fresh = fresh.populated() - fresh.in_use();
  std::vector<rte_mbuf*> more = take_all(fresh.pool());
  CHECK(more.size() == free_in_fresh);
  CHECK(fresh.shortfalls_below_max() > short_fresh);
  std::vector<rte_mbuf*> more_kept;
  for (size_t i = 0; i < more.size() + 1; ++i) more_kept.push_back(rte_pktmbuf_alloc(kept.pool()));
  CHECK(more_kept.back() != nullptr);
  CHECK(kept.shortfalls_below_max() > short_kept);
  give_back(a);
  give_back(b);
  give_back(more);
  give_back(more_kept);
  CHECK(fresh.in_use() == 0);
  CHECK(kept.in_use() == 0);
}
