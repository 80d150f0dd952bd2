// What the fuzz targets that need mbufs share: EAL brought up once per process (no hugepages, no
// PCI, its own --file-prefix, the runtime directory removed at exit), mbuf pools, chains built
// from fuzzer bytes, and the check that a pool is whole again after every input.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

struct rte_mbuf;
struct rte_mempool;

namespace spraynet::fuzz {

// Brings EAL up (once; later calls do nothing). Aborts when it cannot.
void init_eal(const char* argv0);

// A pktmbuf pool of `n` mbufs with `data_room` bytes each (headroom included). Aborts on failure.
rte_mempool* make_pool(const char* name, unsigned n, uint16_t data_room);

// Aborts (a finding) when any mbuf of `pool` is still out.
void check_pool_whole(rte_mempool* pool);

// `bytes` as a chain of segments: cut after each length in `cuts` (clamped to what is left and
// to the data room), the rest in the last segment. nullptr when the pool runs dry.
rte_mbuf* chain_from(rte_mempool* pool, std::span<const uint8_t> bytes,
                     std::span<const size_t> cuts);

// Aborts with `what` on stderr: a finding, like an assertion.
[[noreturn]] void fail(const char* what);

}  // namespace spraynet::fuzz

#define FUZZ_CHECK(cond)                                                             \
  do {                                                                               \
    if (!(cond)) ::spraynet::fuzz::fail(__FILE__ ":" FUZZ_STR(__LINE__) ": " #cond); \
  } while (0)
#define FUZZ_STR(x) FUZZ_STR2(x)
#define FUZZ_STR2(x) #x
