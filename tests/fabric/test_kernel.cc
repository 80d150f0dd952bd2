// The conservative kernel (fabric/kernel/) with a toy model and no DPDK node: logical processes
// pass tokens around a ring and across a mesh, each hop at least one lookahead later, sometimes
// resting at an LP first. Every LP's trace (what it served, when, in what order) must be the same
// on 1, 2, 3 and 8 threads, and the same as a plain sequential simulation computed here.
#include <catch2/catch.hpp>

#include <vector>

#include "fabric/kernel/conservative_kernel.h"
#include "tests/fabric/token_model.h"

using spraynet::fabric::ConservativeKernel;
using spraynet::fabric::kKernelNever;

using namespace spraynet::fabric::toy;

namespace {

size_t total(const Traces& t) {
  size_t n = 0;
  for (const auto& lp : t) n += lp.size();
  return n;
}

}  // namespace

TEST_CASE("kernel: tokens around a ring give the same trace on any thread count") {
  const Traces ref = run_sequential(Shape::kRing, 5, 12);
  REQUIRE(total(ref) > 1000);
  for (const uint32_t threads : {1u, 2u, 3u, 8u}) {
    INFO("threads " << threads);
    CHECK(run_kernel(Shape::kRing, 5, 12, threads) == ref);
  }
}

TEST_CASE("kernel: tokens across a mesh (messages to itself too) give the same trace") {
  const Traces ref = run_sequential(Shape::kMesh, 7, 40);
  REQUIRE(total(ref) > 5000);
  // Some messages arrive together at one LP and time: the merge order decides their order.
  size_t together = 0;
  for (const auto& lp : ref) {
    for (size_t i = 1; i < lp.size(); ++i)
      together += lp[i].from_mail && lp[i - 1].from_mail && lp[i].t == lp[i - 1].t;
  }
  CHECK(together > 0);
  for (const uint32_t threads : {1u, 2u, 3u, 8u}) {
    INFO("threads " << threads);
    CHECK(run_kernel(Shape::kMesh, 7, 40, threads) == ref);
  }
}

TEST_CASE("kernel: mail not yet delivered can be dropped and is released at the end") {
  TokenModel model(Shape::kRing, 3, kLookahead);
  ConservativeKernel<Token> kernel(3, model);
  model.attach(&kernel);
  for (uint32_t i = 0; i < 6; ++i) model.rest(i % 3, 0, Token{i, 0});
  // One round to t = 5: tokens that moved on are in the mailboxes, due at 10 or later.
  (void)kernel.earliest_here();
  kernel.run_round(5);
  size_t in_flight = 0;
  kernel.erase_mail_if([&](uint64_t t, Token&) {
    CHECK(t >= 10);
    ++in_flight;
    return false;
  });
  size_t dropped = 0;
  kernel.erase_mail_if([&](uint64_t, Token& k) {
    const bool drop = k.id % 2 == 0;
    dropped += drop;
    return drop;
  });
  size_t released = 0;
  kernel.clear_mail([&](Token&) { ++released; });
  CHECK(in_flight > 0);
  CHECK(released + dropped == in_flight);
  size_t after = 0;
  kernel.erase_mail_if([&](uint64_t, Token&) {
    ++after;
    return false;
  });
  CHECK(after == 0);
}
