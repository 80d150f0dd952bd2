#include "dataplane/runtime/lcore_runner.h"

#include <rte_lcore.h>
#include <catch2/catch.hpp>

#include <atomic>
#include <stdexcept>
#include <vector>

using spraynet::runtime::LcoreRunner;

namespace {

struct Seen {
  std::atomic<unsigned> lcore{RTE_MAX_LCORE};
  std::atomic<unsigned> running_on{RTE_MAX_LCORE};
  std::atomic<int> calls{0};
};

}  // namespace

TEST_CASE("a runner on the main lcore alone runs in the calling thread", "[lcore_runner]") {
  const unsigned main_lcore = rte_get_main_lcore();
  LcoreRunner runner({main_lcore});
  Seen seen;
  runner.run([&](unsigned lcore, unsigned index) {
    CHECK(index == 0);
    seen.lcore = lcore;
    seen.running_on = rte_lcore_id();
    ++seen.calls;
  });
  CHECK(seen.calls == 1);
  CHECK(seen.lcore == main_lcore);
  CHECK(seen.running_on == main_lcore);
}

TEST_CASE("a runner on two lcores runs one share on each and waits for both", "[lcore_runner]") {
  const std::vector<unsigned> all = LcoreRunner::all_lcores();
  REQUIRE(all.size() >= 2);  // the test main starts EAL on every core: this machine has two
  CHECK(all[0] == rte_get_main_lcore());
  LcoreRunner runner({all[0], all[1]});
  Seen seen[2];
  std::atomic<int> arrived{0};
  runner.run([&](unsigned lcore, unsigned index) {
    seen[index].lcore = lcore;
    seen[index].running_on = rte_lcore_id();
    ++seen[index].calls;
    // Both must be running at once for this to end: a bounded spin, not a sleep.
    ++arrived;
    for (long spins = 0; arrived < 2 && spins < 2'000'000'000; ++spins) {
    }
  });
  CHECK(arrived == 2);
  for (unsigned i = 0; i < 2; ++i) {
    CHECK(seen[i].calls == 1);
    CHECK(seen[i].lcore == all[i]);
    CHECK(seen[i].running_on == all[i]);
  }
  CHECK(rte_eal_get_lcore_state(all[1]) == WAIT);
}

TEST_CASE("a runner on a worker only leaves the calling thread waiting", "[lcore_runner]") {
  const std::vector<unsigned> all = LcoreRunner::all_lcores();
  REQUIRE(all.size() >= 2);
  LcoreRunner runner({all[1]});
  Seen seen;
  runner.run([&](unsigned lcore, unsigned) {
    seen.lcore = lcore;
    seen.running_on = rte_lcore_id();
    ++seen.calls;
  });
  CHECK(seen.calls == 1);
  CHECK(seen.running_on == all[1]);
  // And it can be run again: the worker is back to WAIT.
  runner.run([&](unsigned, unsigned) { ++seen.calls; });
  CHECK(seen.calls == 2);
}

TEST_CASE("an exception on any lcore comes back to the caller after all finish", "[lcore_runner]") {
  const std::vector<unsigned> all = LcoreRunner::all_lcores();
  REQUIRE(all.size() >= 2);
  LcoreRunner runner({all[0], all[1]});
  std::atomic<int> finished{0};
  CHECK_THROWS_WITH(runner.run([&](unsigned, unsigned index) {
    ++finished;
    if (index == 1) throw std::runtime_error("worker failed");
  }),
                    "worker failed");
  CHECK(finished == 2);
  CHECK(rte_eal_get_lcore_state(all[1]) == WAIT);
}

TEST_CASE("a runner refuses lcores EAL did not enable, and duplicates", "[lcore_runner]") {
  CHECK_THROWS_AS(LcoreRunner({}), std::invalid_argument);
  CHECK_THROWS_WITH(LcoreRunner({RTE_MAX_LCORE - 1}),
                    Catch::StartsWith("LcoreRunner: lcore " + std::to_string(RTE_MAX_LCORE - 1) +
                                      " is not enabled in EAL"));
  CHECK_THROWS_WITH(LcoreRunner({rte_get_main_lcore(), rte_get_main_lcore()}),
                    Catch::EndsWith("given twice"));
}
