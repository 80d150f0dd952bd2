// Bucket reweighting: DESIGN.md's vector (85% -> 12 of 32), a table of other points, the
// clamps, down and watchdog-dropped paths, and what the dataplane does when a group's weights are
// all zero.
#include "control/bucket_reweighter.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>
#include <vector>

#include "dataplane/forwarding/path_selector.h"

using namespace spraynet;
using namespace spraynet::control;

TEST_CASE("reweight: a path at 85% keeps 12 of 32 buckets (DESIGN.md)") {
  CHECK(reweighted_buckets(0.85, true, ReweightConfig{}) == 12);
}

TEST_CASE("reweight: table of points with B = 32, u_target = 0.6") {
  const ReweightConfig c;
  struct Point {
    double u;
    uint32_t buckets;
  };
  // round(32 * min(1, (1 - u) / 0.4)), worked by hand.
  const Point points[] = {
      {0.0, 32},  {0.3, 32}, {0.6, 32},  // at or below the target: all of them
      {0.65, 28}, {0.7, 24}, {0.75, 20}, {0.8, 16},
      {0.85, 12}, {0.9, 8},  {0.95, 4},  {0.98, 2},  // 1.6 rounds up
      {0.99, 1},             // 0.8 rounds up: a nearly full path still takes a few flows
      {0.995, 0},            // 0.4 rounds down
      {1.0, 0},   {1.7, 0},  // above 1 (a counter glitch) clamps to 1
      {-0.5, 32},            // below 0 clamps to 0
  };
  for (const Point& p : points) {
    INFO("u = " << p.u);
    CHECK(reweighted_buckets(p.u, true, c) == p.buckets);
  }
  // An unreadable utilisation is treated as full: no new flows on a path we cannot measure.
  CHECK(reweighted_buckets(std::numeric_limits<double>::quiet_NaN(), true, c) == 0);
  CHECK(reweighted_buckets(std::numeric_limits<double>::infinity(), true, c) == 0);
}

TEST_CASE("reweight: down paths keep 0, whatever their load; watchdog drop mode is per class") {
  BucketReweighter r;
  LinkState idle;
  CHECK(r.buckets(idle) == 32);
  LinkState down = idle;
  down.up = false;
  CHECK(r.buckets(down) == 0);
  // A class in drop mode: the link keeps its buckets for the other classes (the stormed class
  // is excluded at selection, by its own eligibility view).
  LinkState dropping = idle;
  dropping.watchdog_dropping = true;
  dropping.watchdog_classes = 1u << 3;
  CHECK(r.buckets(dropping) == 32);
  CHECK(reweighted_buckets(0.0, false, ReweightConfig{}) == 0);
}

TEST_CASE("reweight: B and u_target are configurable and checked") {
  CHECK(reweighted_buckets(0.85, true, ReweightConfig{64, 0.6}) == 24);
  CHECK(reweighted_buckets(0.85, true, ReweightConfig{32, 0.8}) == 24);  // 32 * 0.15 / 0.2
  CHECK(reweighted_buckets(0.5, true, ReweightConfig{32, 0.0}) == 16);   // linear in 1 - u
  CHECK_THROWS_AS(BucketReweighter(ReweightConfig{0, 0.6}), std::invalid_argument);
  CHECK_THROWS_AS(BucketReweighter(ReweightConfig{32, 1.0}), std::invalid_argument);
  CHECK_THROWS_AS(BucketReweighter(ReweightConfig{32, -0.1}), std::invalid_argument);
  CHECK_THROWS_AS(BucketReweighter(ReweightConfig{32, std::nan("")}), std::invalid_argument);
}

TEST_CASE("reweight: weights of a group follow its member order; unknown ports get 0") {
  BucketReweighter r;
  std::vector<LinkState> links(4);
  links[0].utilisation = 0.85;
  links[1].utilisation = 0.2;
  links[2].up = false;
  links[3].utilisation = 0.9;
  const std::vector<uint16_t> members = {3, 0, 2, 1, 9};
  CHECK(r.weights(links, members) == std::vector<uint32_t>{8, 12, 0, 32, 0});
}

TEST_CASE("reweight: every path down gives all zeros; the dataplane then hashes or drops") {
  BucketReweighter r;
  std::vector<LinkState> links(4);
  for (auto& l : links) l.up = false;
  const std::vector<uint16_t> members = {0, 1, 2, 3};
  const auto w = r.weights(links, members);
  CHECK(w == std::vector<uint32_t>(4, 0));

  PathGroupConfig gc;
  gc.mode = LbMode::kWeighted;
  gc.member_ports = members;
  PathSelector sel(gc);
  sel.set_weights(w);
  CHECK(sel.bucket_table().empty());

  // All down in the dataplane too: no member is eligible, select() says kNoPort (the switch
  // drops and counts no_eligible_port).
  std::vector<PathLoad> down(4, PathLoad{0, false});
  CHECK(sel.select(0x12345678, 0, down) == PathSelector::kNoPort);
  CHECK(sel.counters().no_eligible_port == 1);

  // All at or above 100% but up: also all zeros, and traffic still flows, spread by hash over
  // the eligible members (PathSelector's empty_table fallback), not blackholed.
  std::vector<LinkState> full(4);
  for (auto& l : full) l.utilisation = 1.0;
  sel.set_weights(r.weights(full, members));
  CHECK(sel.bucket_table().empty());
  std::vector<PathLoad> up(4, PathLoad{0, true});
  std::vector<int> per_port(4, 0);
  std::mt19937 rng(7);
  for (int i = 0; i < 4000; ++i) {
    const uint16_t port = sel.select(static_cast<uint32_t>(rng()), 0, up);
    REQUIRE(port < 4);
    per_port[port]++;
  }
  CHECK(sel.counters().empty_table == 4000);
  for (int n : per_port) CHECK(n > 800);  // about 1000 each
}
