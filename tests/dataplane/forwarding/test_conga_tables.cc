#include "dataplane/forwarding/conga_tables.h"

#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <stdexcept>
#include <vector>

#include "dataplane/forwarding/flowlet_table.h"

using namespace spraynet;

namespace {
constexpr uint64_t kUs = 1000;
}

TEST_CASE("CONGA tables: sizes refused beyond 256 leaves") {
  CHECK_THROWS_AS(CongaTables(0), std::invalid_argument);
  CHECK_THROWS_WITH(CongaTables(257), Catch::Contains("allowed 1..256"));
  CongaTables t(256);
  CHECK(t.leaves() == 256);
  CHECK(t.aging_ns() == 500 * kUs);
}

TEST_CASE("Congestion-From-Leaf is fed back round robin over its live entries") {
  CongaTables t(4, 500 * kUs);
  CHECK_FALSE(t.next_feedback(1, 0).has_value());  // nothing recorded from leaf 1
  t.record_arrival(1, 2, 5, 0);
  t.record_arrival(1, 7, 3, 0);
  t.record_arrival(1, 11, 6, 0);
  t.record_arrival(2, 0, 1, 0);  // another leaf's: not fed back to leaf 1
  // The order is by LBTag from where the last one left off: 2, 7, 11, 2, 7, ...
  const std::array<std::pair<int, int>, 7> expect{
      {{2, 5}, {7, 3}, {11, 6}, {2, 5}, {7, 3}, {11, 6}, {2, 5}}};
  for (const auto& [tag, metric] : expect) {
    const auto fb = t.next_feedback(1, 10 * kUs);
    REQUIRE(fb.has_value());
    CHECK(fb->lbtag == tag);
    CHECK(fb->metric == metric);
  }
  // An update changes the metric fed back, not the order.
  t.record_arrival(1, 7, 0, 20 * kUs);
  CHECK(t.next_feedback(1, 20 * kUs)->lbtag == 7);
  CHECK(t.next_feedback(1, 20 * kUs)->metric == 6);  // tag 11
  CHECK(t.next_feedback(1, 20 * kUs)->lbtag == 2);
  CHECK(t.next_feedback(1, 20 * kUs)->metric == 0);  // tag 7, updated
  CHECK(t.counters().feedback_sent == 11);
  CHECK(t.counters().arrivals == 5);
  // Aged out: tags 2 and 11 were last set at 0, tag 7 at 20 us; at 510 us only 7 is live.
  CHECK(t.next_feedback(1, 510 * kUs)->lbtag == 7);
  CHECK(t.next_feedback(1, 510 * kUs)->lbtag == 7);
  CHECK_FALSE(t.next_feedback(1, 521 * kUs).has_value());
  CHECK(t.next_feedback(2, 0)->lbtag == 0);
}

TEST_CASE("Congestion-To-Leaf: feedback recorded, 0 when unknown or aged") {
  CongaTables t(3, 100 * kUs);
  CHECK(t.remote_metric(1, 3, 0) == 0);
  t.record_feedback(1, 3, 6, 10 * kUs);
  CHECK(t.remote_metric(1, 3, 50 * kUs) == 6);
  CHECK(t.remote_metric(1, 2, 50 * kUs) == 0);
  CHECK(t.remote_metric(2, 3, 50 * kUs) == 0);
  CHECK(t.remote_metric(1, 3, 110 * kUs) == 6);  // exactly the aging time: still live
  CHECK(t.remote_metric(1, 3, 111 * kUs) == 0);
  CHECK(t.live_entries(50 * kUs) == 1);
  t.record_feedback(7, 0, 1, 0);  // beyond the tables: counted, ignored
  t.record_arrival(0, 16, 1, 0);
  CHECK(t.counters().bad_leaf == 2);
  CHECK(t.counters().feedback_received == 1);
}

TEST_CASE("the least congested uplink: min over max(local, remote), ties at random") {
  // Four uplinks; local DRE metrics and the destination leaf's feedback, worked by hand:
  //   uplink   local  remote  max
  //   0        1      5       5
  //   1        3      2       3
  //   2        0      3       3
  //   3        4      0       4
  // The least is 3, on uplinks 1 and 2.
  CongaTables t(2);
  const std::array<uint8_t, 4> local{1, 3, 0, 4};
  const std::array<uint8_t, 4> remote{5, 2, 3, 0};
  for (uint8_t u = 0; u < 4; ++u) t.record_feedback(1, u, remote[u], 0);
  std::array<uint8_t, 4> metric{};
  for (uint8_t u = 0; u < 4; ++u) metric[u] = std::max(local[u], t.remote_metric(1, u, 0));
  CHECK(metric == std::array<uint8_t, 4>{5, 3, 3, 4});
  std::vector<PathLoad> members(4);
  std::array<int, 4> picks{};
  for (uint32_t d = 0; d < 1000; ++d) {
    ++picks[least_metric_eligible(members, metric,
                                  static_cast<uint32_t>((uint64_t{d} << 32) / 1000))];
  }
  CHECK(picks[0] == 0);
  CHECK(picks[3] == 0);
  CHECK(picks[1] == 500);  // draws spread evenly over [0, 2^32): half each
  CHECK(picks[2] == 500);
  // Uplink 1 down: 2 alone.
  members[1].eligible = false;
  CHECK(least_metric_eligible(members, metric, 0) == 2);
  CHECK(least_metric_eligible(members, metric, 0xFFFFFFFF) == 2);
  // None eligible.
  for (auto& m : members) m.eligible = false;
  CHECK(least_metric_eligible(members, metric, 0) == FlowletTable::kNoMember);

  // Through a flowlet table: a new flowlet takes the least congested; within the gap it stays
  // even when the metrics change.
  FlowletTable f(64, 100 * kUs, 7);
  std::vector<PathLoad> all(4);
  const uint16_t first = f.select_least_congested(42, 0, all, metric);
  CHECK((first == 1 || first == 2));
  const std::array<uint8_t, 4> now_worse{0, 7, 7, 0};
  CHECK(f.select_least_congested(42, 50 * kUs, all, now_worse) == first);
  const uint16_t after_gap = f.select_least_congested(42, 151 * kUs, all, now_worse);
  CHECK((after_gap == 0 || after_gap == 3));
  CHECK(f.counters().flowlets_started == 2);
}
