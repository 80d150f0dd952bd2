#include "dataplane/forwarding/flowlet_table.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <random>
#include <stdexcept>
#include <vector>

using namespace spraynet;

namespace {

constexpr uint64_t kUs = 1000;

std::vector<PathLoad> idle_members(size_t n) {
  return std::vector<PathLoad>(n);
}

}  // namespace

TEST_CASE("table size must be a power of two") {
  CHECK_THROWS_AS(FlowletTable(0), std::invalid_argument);
  CHECK_THROWS_WITH(FlowletTable(1000), Catch::Contains("1000 entries"));
  CHECK_THROWS_AS(FlowletTable(FlowletTable::kMaxEntries * 2), std::invalid_argument);
  FlowletTable t(1024);
  CHECK(t.entries() == 1024);
  CHECK(t.gap_ns() == 100 * kUs);  // the default gap
  CHECK(FlowletTable(1, 5).gap_ns() == 5);
}

TEST_CASE("new flowlets go to the least-loaded eligible member, away from a congested port") {
  FlowletTable t(4096);
  std::vector<PathLoad> m = idle_members(4);
  m[0].queued_bytes = 1'000'000;  // congested
  m[1].queued_bytes = 50'000;
  m[2].queued_bytes = 20'000;
  m[3].queued_bytes = 20'000;
  std::mt19937 rng(1);
  int on_2 = 0, on_3 = 0;
  for (int i = 0; i < 2000; ++i) {
    const uint16_t chosen = t.select(rng(), 0, m);
    REQUIRE((chosen == 2 || chosen == 3));  // never the congested port, never the busier one
    (chosen == 2 ? on_2 : on_3)++;
  }
  // Ties between 2 and 3 are broken by the hash, evenly.
  CHECK(on_2 > 900);
  CHECK(on_3 > 900);
}

TEST_CASE("ties are spread over all members, member 0 is not favoured") {
  FlowletTable t(1 << 16);
  const auto m = idle_members(8);
  std::vector<int> per_member(8, 0);
  std::mt19937 rng(2);
  constexpr int kFlows = 16000;
  for (int i = 0; i < kFlows; ++i) ++per_member.at(t.select(rng(), 0, m));
  for (int count : per_member) {
    CHECK(count > kFlows / 8 * 0.85);
    CHECK(count < kFlows / 8 * 1.15);
  }
}

TEST_CASE("an active flowlet keeps its member within the gap, then moves") {
  FlowletTable t(1024, 100 * kUs);
  std::vector<PathLoad> m = idle_members(4);
  m[0].queued_bytes = 10;
  m[1].queued_bytes = 10;
  m[3].queued_bytes = 10;  // member 2 is the least loaded
  const uint32_t flow = 0xC0FFEE;
  REQUIRE(t.select(flow, 0, m) == 2);
  CHECK(t.counters().flowlets_started == 1);

  // Member 2 congests; packets keep coming every 60 us, each refreshing the entry: the flowlet
  // stays on 2 for a whole millisecond, well beyond one gap after its first packet.
  m[2].queued_bytes = 5'000'000;
  uint64_t now = 0;
  for (int i = 0; i < 17; ++i) {
    now += 60 * kUs;
    REQUIRE(t.select(flow, now, m) == 2);
  }
  // Idle for exactly the gap: still the same flowlet.
  now += 100 * kUs;
  CHECK(t.select(flow, now, m) == 2);
  CHECK(t.counters().flowlets_started == 1);
  CHECK(t.counters().flowlets_moved == 0);

  // Idle for one nanosecond more than the gap: a new flowlet, away from the congestion.
  now += 100 * kUs + 1;
  const uint16_t next = t.select(flow, now, m);
  CHECK(next != 2);
  CHECK(t.counters().flowlets_started == 2);
  CHECK(t.counters().flowlets_moved == 1);
  CHECK(t.counters().rerouted_ineligible == 0);
}

TEST_CASE("a flowlet whose member becomes ineligible moves at once") {
  FlowletTable t(64, 100 * kUs);
  std::vector<PathLoad> m = idle_members(3);
  m[0].queued_bytes = 1;
  m[2].queued_bytes = 1;
  const uint32_t flow = 77;
  REQUIRE(t.select(flow, 0, m) == 1);
  m[1].eligible = false;  // paused (fast feedback) or down
  const uint16_t moved = t.select(flow, 1 * kUs, m);
  CHECK((moved == 0 || moved == 2));
  CHECK(t.counters().rerouted_ineligible == 1);
  CHECK(t.counters().flowlets_started == 1);
  // It stays where it went, even when member 1 comes back and is idle.
  m[1].eligible = true;
  CHECK(t.select(flow, 2 * kUs, m) == moved);

  // A member index that no longer exists (the group shrank) is treated the same way.
  const uint32_t flow2 = 78;
  std::vector<PathLoad> three = idle_members(3);
  three[0].queued_bytes = three[1].queued_bytes = 5;
  REQUIRE(t.select(flow2, 3 * kUs, three) == 2);
  const std::vector<PathLoad> two = idle_members(2);
  CHECK(t.select(flow2, 4 * kUs, two) < 2);
  CHECK(t.counters().rerouted_ineligible == 2);
}

TEST_CASE("no eligible member: kNoMember, counted, entry untouched") {
  FlowletTable t(16);
  std::vector<PathLoad> m = idle_members(2);
  REQUIRE(t.select(5, 0, m) != FlowletTable::kNoMember);
  const uint16_t before = t.select(5, 1, m);
  m[0].eligible = m[1].eligible = false;
  CHECK(t.select(5, 2, m) == FlowletTable::kNoMember);
  CHECK(t.select(6, 2, m) == FlowletTable::kNoMember);
  CHECK(t.select(6, 2, {}) == FlowletTable::kNoMember);
  CHECK(t.counters().no_eligible_member == 3);
  m[0].eligible = m[1].eligible = true;
  CHECK(t.select(5, 3, m) == before);  // still the same flowlet
}

TEST_CASE("colliding flows share an entry and so a member") {
  FlowletTable t(256);
  std::vector<PathLoad> m = idle_members(8);
  const uint32_t a = 0x12345601, b = 0xABCDEF01;  // same low 8 bits
  const uint16_t first = t.select(a, 0, m);
  for (size_t i = 0; i < m.size(); ++i) m[i].queued_bytes = (i == first) ? 1'000'000 : 0;
  CHECK(t.select(b, 10 * kUs, m) == first);
  t.clear();
  CHECK(t.select(b, 20 * kUs, m) != first);  // forgotten: a new flowlet, least loaded
}

TEST_CASE("ineligible members are never chosen while an eligible one exists") {
  FlowletTable t(128, 100 * kUs);
  std::mt19937 rng(3);
  std::vector<PathLoad> m = idle_members(6);
  uint64_t now = 0;
  for (int i = 0; i < 50000; ++i) {
    now += rng() % (30 * kUs);
    bool any = false;
    for (PathLoad& p : m) {
      p.eligible = rng() % 3 != 0;
      p.queued_bytes = rng() % 100000;
      any |= p.eligible;
    }
    const uint64_t started = t.counters().flowlets_started;
    const uint64_t rerouted = t.counters().rerouted_ineligible;
    const uint16_t chosen = t.select(rng() % 512, now, m);
    if (!any) {
      REQUIRE(chosen == FlowletTable::kNoMember);
      continue;
    }
    REQUIRE(chosen < m.size());
    REQUIRE(m[chosen].eligible);
    if (t.counters().flowlets_started != started || t.counters().rerouted_ineligible != rerouted) {
      // A fresh placement is the least-loaded eligible member.
      for (const PathLoad& p : m) {
        if (p.eligible) REQUIRE(m[chosen].queued_bytes <= p.queued_bytes);
      }
    }
  }
  CHECK(t.counters().flowlets_started > 0);
  CHECK(t.counters().rerouted_ineligible > 0);
  CHECK(t.counters().flowlets_moved > 0);
}

TEST_CASE("least_loaded_eligible skips ineligible members and splits ties evenly") {
  std::vector<PathLoad> m = idle_members(4);
  CHECK(least_loaded_eligible(m, 0) == 0);
  CHECK(least_loaded_eligible(m, 0x80000000) == 2);
  CHECK(least_loaded_eligible(m, 0xFFFFFFFF) == 3);
  m[3].eligible = false;
  CHECK(least_loaded_eligible(m, 0xFFFFFFFF) == 2);
  m[1].queued_bytes = 0;
  m[0].queued_bytes = m[2].queued_bytes = 9;
  CHECK(least_loaded_eligible(m, 0) == 1);
  CHECK(least_loaded_eligible(m, 0xFFFFFFFF) == 1);
  // Three-way tie among 0, 2, 4 of 5: each about a third.
  std::vector<PathLoad> five = idle_members(5);
  five[1].queued_bytes = five[3].queued_bytes = 1;
  std::vector<int> hits(5, 0);
  std::mt19937 rng(4);
  for (int i = 0; i < 30000; ++i) ++hits.at(least_loaded_eligible(five, rng()));
  CHECK(hits[1] == 0);
  CHECK(hits[3] == 0);
  for (int i : {0, 2, 4}) CHECK(std::abs(hits[i] - 10000) < 500);
  CHECK(least_loaded_eligible({}, 0) == FlowletTable::kNoMember);
  CHECK(scale_to_range(0xFFFFFFFF, 8) == 7);
  CHECK(scale_to_range(0, 8) == 0);
  CHECK(scale_to_range(0x80000000, 8) == 4);
}

TEST_CASE("memory: pages of the table are made as flows hash into them, freed by clear()") {
  FlowletTable t(4096);
  const uint64_t empty = t.heap_bytes();
  CHECK(empty < 4096 * 16 / 8);  // the page table only
  const auto members = idle_members(4);
  for (uint32_t h = 0; h < 10; ++h) t.select(h, 0, members);  // entries 0..9: one page
  const uint64_t one_page = t.heap_bytes();
  CHECK(one_page > empty);
  for (uint32_t h = 0; h < 4096; h += 256) t.select(h, 0, members);  // 16 pages apart
  CHECK(t.heap_bytes() > one_page);
  CHECK(t.heap_bytes() < empty + 4096 * 16);
  t.clear();
  CHECK(t.heap_bytes() == empty);
  // After clear() every entry is new again: the next packet starts a flowlet.
  const uint64_t started = t.counters().flowlets_started;
  t.select(5, 1, members);
  CHECK(t.counters().flowlets_started == started + 1);
}

TEST_CASE("collisions and expired flowlets are counted") {
  FlowletTable t(16, 100 * kUs);
  const auto m = idle_members(4);
  // Hashes 0x10005 and 0x20005 share entry 5 (low 4 bits) but are different flows.
  const uint32_t a = 0x10005, b = 0x20005;
  t.select(a, 0, m);            // first use: started, not expired
  t.select(a, 10 * kUs, m);     // the same flow within the gap: no collision
  t.select(b, 20 * kUs, m);     // another flow on the active entry: a collision
  t.select(b, 30 * kUs, m);     // b again: the entry is b's now
  t.select(a, 40 * kUs, m);     // a back while active: a second collision
  t.select(a, 300 * kUs, m);    // idle 260 us > gap: a new flowlet on an aged entry
  t.select(b, 1000 * kUs, m);   // idle again: expired, and not a collision (not active)
  t.select(0x7, 1000 * kUs, m); // a different entry, first use
  const FlowletCounters& c = t.counters();
  CHECK(c.collisions == 2);
  CHECK(c.flowlets_started == 4);
  CHECK(c.flowlets_expired == 2);
  // One flow per entry: no collisions, whatever the table size, over many random flows.
  FlowletTable big(1 << 20);
  std::vector<uint32_t> hashes;
  for (uint32_t i = 0; i < 100000; ++i) hashes.push_back(i * 11);  // distinct low 20 bits
  for (int round = 0; round < 3; ++round) {
    for (uint32_t h : hashes) big.select(h, round * 10 * kUs, m);
  }
  CHECK(big.counters().collisions == 0);
  CHECK(big.counters().flowlets_started == 100000);
  CHECK(big.counters().flowlets_expired == 0);
}

namespace {

// Pearson's statistic of `counts` against equal expectations.
double chi_square_uniform(const std::vector<uint64_t>& counts) {
  double total = 0;
  for (uint64_t c : counts) total += static_cast<double>(c);
  const double expected = total / static_cast<double>(counts.size());
  double x2 = 0;
  for (uint64_t c : counts) x2 += (static_cast<double>(c) - expected) * (c - expected) / expected;
  return x2;
}

// The chi-square distribution's 99% quantile by the Wilson-Hilferty approximation (within 0.3%
// of the tables for 5 or more degrees of freedom): z = 2.3263, the normal's 99% quantile.
double chi_square_99(unsigned dof) {
  const double k = dof, z = 2.3263478740408408;
  const double a = 2.0 / (9.0 * k);
  return k * std::pow(1.0 - a + z * std::sqrt(a), 3.0);
}

}  // namespace

TEST_CASE("LetFlow: new flowlets take every eligible member equally often (chi-square at 99%)") {
  CHECK(chi_square_99(7) == Approx(18.475).epsilon(0.003));  // the tables' values
  CHECK(chi_square_99(5) == Approx(15.086).epsilon(0.003));
  FlowletTable t(1 << 16, 100 * kUs, /*seed=*/42);
  std::vector<PathLoad> m = idle_members(8);
  m[0].queued_bytes = 10'000'000;  // LetFlow reads no load: a full queue is drawn as often
  std::vector<uint64_t> counts(8, 0);
  constexpr uint32_t kFlowlets = 16'000;
  // One flow, a new flowlet every 200 us (twice the gap): every packet starts one.
  for (uint32_t i = 0; i < kFlowlets; ++i) {
    ++counts.at(t.select_random(0xABCD1234u, uint64_t{i} * 200 * kUs + 1, m));
  }
  CHECK(chi_square_uniform(counts) < chi_square_99(7));
  CHECK(t.counters().flowlets_started == kFlowlets);
  CHECK(t.counters().flowlets_expired == kFlowlets - 1);
  // About 7/8 of them land elsewhere than the previous flowlet.
  CHECK(t.counters().flowlets_moved == Approx(kFlowlets * 7.0 / 8).epsilon(0.03));

  // Two ineligible members: never chosen, the six others equally.
  FlowletTable u(1 << 16, 100 * kUs, 7);
  m[2].eligible = false;
  m[5].eligible = false;
  std::vector<uint64_t> six(8, 0);
  for (uint32_t f = 0; f < 12'000; ++f) ++six.at(u.select_random(f * 2654435761u, 5, m));
  CHECK(six[2] == 0);
  CHECK(six[5] == 0);
  const std::vector<uint64_t> eligible = {six[0], six[1], six[3], six[4], six[6], six[7]};
  CHECK(chi_square_uniform(eligible) < chi_square_99(5));
}

TEST_CASE("LetFlow: a flowlet keeps its member while its gaps stay within the timeout") {
  FlowletTable t(4096, 100 * kUs, 3);
  std::vector<PathLoad> m = idle_members(8);
  const uint16_t first = t.select_random(77, 1000, m);
  uint64_t now = 1000;
  for (int i = 0; i < 1000; ++i) {
    now += 99 * kUs;  // just inside the gap, for 99 ms
    m[i % 8].queued_bytes = static_cast<uint64_t>(i) * 1000;  // loads change; LetFlow ignores
    REQUIRE(t.select_random(77, now, m) == first);
  }
  CHECK(t.counters().flowlets_started == 1);
  // Its member going down moves it at once, counted as such, to an eligible member.
  m[first].eligible = false;
  const uint16_t moved = t.select_random(77, now + 1, m);
  CHECK(moved != first);
  CHECK(moved < 8);
  CHECK(t.counters().rerouted_ineligible == 1);
  // Nothing eligible: kNoMember, counted, the entry left alone.
  for (PathLoad& p : m) p.eligible = false;
  CHECK(t.select_random(77, now + 2, m) == FlowletTable::kNoMember);
  CHECK(t.counters().no_eligible_member == 1);
}

TEST_CASE("LetFlow: the same seed and packets give the same members; another seed differs") {
  const auto run = [](uint64_t seed) {
    FlowletTable t(256, 10 * kUs, seed);
    std::vector<PathLoad> m = idle_members(16);
    std::vector<uint16_t> out;
    for (uint32_t i = 0; i < 500; ++i) out.push_back(t.select_random(i % 37, i * 7 * kUs, m));
    return out;
  };
  CHECK(run(9) == run(9));
  CHECK(run(9) != run(10));
}
