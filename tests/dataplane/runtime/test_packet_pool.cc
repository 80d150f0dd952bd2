#include "dataplane/runtime/packet_pool.h"

#include <catch2/catch.hpp>

#include <utility>

using spraynet::runtime::PacketPool;
using spraynet::runtime::pool_size_for;

TEST_CASE("a packet pool counts what is out and is whole when all came back", "[packet_pool]") {
  PacketPool pool({.name = "pp_count", .mbufs = 1023, .cache = 32, .data_room = 4096});
  REQUIRE(pool.get() != nullptr);
  CHECK(pool.get()->size == 1023);
  CHECK(pool.whole());
  rte_mbuf* m[10];
  REQUIRE(rte_pktmbuf_alloc_bulk(pool.get(), m, 10) == 0);
  CHECK(rte_pktmbuf_data_room_size(pool.get()) == 4096);
  CHECK(pool.in_use() == 10);
  CHECK_FALSE(pool.whole());
  rte_pktmbuf_free_bulk(m, 10);  // into this lcore's cache: still counted as back
  CHECK(pool.whole());
}

TEST_CASE("mbufs no one can reach go back only when they are exactly those expected",
          "[packet_pool]") {
  // As net_af_xdp's fill ring after close: taken from the pool, never freed, pointers gone.
  PacketPool pool({.name = "pp_reclaim", .mbufs = 1023, .cache = 32});
  rte_mbuf* lost[100];
  REQUIRE(rte_pktmbuf_alloc_bulk(pool.get(), lost, 100) == 0);
  rte_mbuf* cached[10];  // some in this lcore's cache: free, and must not be taken for lost
  REQUIRE(rte_pktmbuf_alloc_bulk(pool.get(), cached, 10) == 0);
  rte_pktmbuf_free_bulk(cached, 10);
  CHECK(pool.in_use() == 100);
  CHECK(pool.reclaim_unreachable(99) == 0);  // one more out than a PMD kept: a leak, left
  CHECK(pool.reclaim_unreachable(101) == 0);
  CHECK(pool.in_use() == 100);
  CHECK(pool.reclaim_unreachable(100) == 100);
  CHECK(pool.whole());
  // And they come out again as ordinary mbufs.
  rte_mbuf* all[1023];
  REQUIRE(rte_pktmbuf_alloc_bulk(pool.get(), all, 1023) == 0);
  for (rte_mbuf* m : all) CHECK((m->nb_segs == 1 && m->next == nullptr));
  rte_pktmbuf_free_bulk(all, 1023);
  CHECK(pool.whole());
  CHECK(pool.reclaim_unreachable(0) == 0);
}

TEST_CASE("a packet pool that DPDK refuses names the pool and the reason", "[packet_pool]") {
  PacketPool first({.name = "pp_dup", .mbufs = 511, .cache = 0});
  CHECK_THROWS_WITH(PacketPool({.name = "pp_dup", .mbufs = 511, .cache = 0}),
                    "packet pool \"pp_dup\": rte_pktmbuf_pool_create failed: File exists");
  // DPDK wants cache <= mbufs / 1.5.
  CHECK_THROWS_WITH(PacketPool({.name = "pp_cache", .mbufs = 255, .cache = 256}),
                    "packet pool \"pp_cache\": rte_pktmbuf_pool_create failed: Invalid argument");
  CHECK(first.whole());
}

TEST_CASE("a moved packet pool is freed once, by its new owner", "[packet_pool]") {
  PacketPool a({.name = "pp_move_a", .mbufs = 255, .cache = 0});
  rte_mempool* mp = a.get();
  PacketPool b = std::move(a);
  CHECK(a.get() == nullptr);
  CHECK(b.get() == mp);
  b = PacketPool({.name = "pp_move_b", .mbufs = 255, .cache = 0});
  CHECK(rte_mempool_lookup("pp_move_a") == nullptr);
  CHECK(rte_mempool_lookup("pp_move_b") == b.get());
  CHECK(b.whole());
}

TEST_CASE("pool_size_for covers descriptors, caches, bursts and tx buffers", "[packet_pool]") {
  // 2 ports x (1024 rx + 1024 tx) + 1 lcore x (384 cached + 32 in flight) + 2 x 32 buffered.
  CHECK(pool_size_for(2, 1, 1, 1024, 1024, 1, 32, 256) == 8191);  // needs 4576
  // Exactly 2^n - 1 needed stays as it is; one more takes the next size.
  CHECK(pool_size_for(1, 1, 0, 4063, 0, 1, 32, 0) == 4095);  // 4063 + 32
  CHECK(pool_size_for(1, 1, 0, 4064, 0, 1, 32, 0) == 8191);
  // Per-lcore caches may hold 1.5 x cache each.
  CHECK(pool_size_for(0, 0, 0, 0, 0, 4, 0, 100) == 1023);  // 600
  CHECK(pool_size_for(0, 0, 0, 0, 0, 8, 0, 100) == 2047);  // 1200
  CHECK_THROWS_AS(pool_size_for(65535, 16, 16, 65535, 65535, 128, 512, 512), std::length_error);
}
