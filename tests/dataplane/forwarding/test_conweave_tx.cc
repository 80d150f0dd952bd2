// ConWeave's source leaf against sequences worked out here from conweave-ns3's rules.
#include "dataplane/forwarding/conweave_tx.h"

#include <catch2/catch.hpp>

#include <set>
#include <stdexcept>
#include <vector>

using namespace spraynet;

namespace {

constexpr uint64_t kUs = 1000;
constexpr uint64_t kBase = 4 * kUs;  // leaf-spine: 2 hops x 2 x 1 us
const std::vector<PathLoad> kEight(8);

}  // namespace

TEST_CASE("an epoch: INIT first, DATA after, a timely reply starts the next on the same path") {
  ConweaveTx tx(ConweaveSettings{}, 1);
  const auto first = tx.on_data(7, 1, 100 * kUs, kEight, kBase);
  REQUIRE(first.member < 8);
  CHECK(first.tag.flag == ConweaveFlag::kInit);
  CHECK(first.tag.epoch == 1);
  CHECK(first.tag.phase == 0);
  CHECK(first.tag.ts_tail == 0);
  CHECK(first.tag.ts_tx == static_cast<uint32_t>(100 * kUs));
  // Within the deadline (100 + 4 + 4 us): plain data on the same path.
  const auto second = tx.on_data(7, 1, 107 * kUs, kEight, kBase);
  CHECK(second.tag.flag == ConweaveFlag::kData);
  CHECK(second.member == first.member);
  CHECK(second.tag.epoch == 1);
  // The reply arrives in time: the next packet starts epoch 2 (INIT) on the same path.
  tx.on_reply(7, false, 1, 0, 107 * kUs + 500);
  CHECK(tx.counters().timely_replies == 1);
  const auto third = tx.on_data(7, 1, 110 * kUs, kEight, kBase);
  CHECK(third.tag.flag == ConweaveFlag::kInit);
  CHECK(third.tag.epoch == 2);
  CHECK(third.member == first.member);
  CHECK(tx.counters().epochs == 2);
  CHECK(tx.counters().reroutes == 0);
  CHECK(tx.counters().timeouts == 0);
}

TEST_CASE(
    "no reply by the deadline: the next packet is the TAIL, on the old path; once per epoch") {
  // Find a seed whose reroute moves the flow (two draws may land on the old member).
  for (uint64_t seed = 1; seed < 40; ++seed) {
    ConweaveTx tx(ConweaveSettings{}, seed);
    const auto init = tx.on_data(9, 2, 0, kEight, kBase);
    // Deadline 0 + 4 + 4 = 8 us; at exactly 8 us it has not passed (strict).
    CHECK(tx.on_data(9, 2, 8 * kUs, kEight, kBase).tag.flag == ConweaveFlag::kData);
    const auto tail = tx.on_data(9, 2, 8 * kUs + 1, kEight, kBase);
    CHECK(tail.tag.flag == ConweaveFlag::kTail);
    CHECK(tail.member == init.member);  // the TAIL takes the old path
    CHECK(tail.tag.phase == 0);
    CHECK(tail.tag.epoch == 1);
    CHECK(tail.tag.ts_tail == static_cast<uint32_t>(8 * kUs + 1));
    const auto after = tx.on_data(9, 2, 9 * kUs, kEight, kBase);
    CHECK(after.tag.flag == ConweaveFlag::kData);
    CHECK(after.tag.phase == 1);
    CHECK(after.tag.ts_tail == static_cast<uint32_t>(8 * kUs + 1));
    // Not again in this epoch, however late: the deadline is disarmed.
    for (uint64_t t = 10; t < 200; t += 10) {
      const auto d = tx.on_data(9, 2, t * kUs, kEight, kBase);
      CHECK(d.tag.flag == ConweaveFlag::kData);
      CHECK(d.member == after.member);
      CHECK(d.tag.phase == 1);
    }
    CHECK(tx.counters().timeouts == 1);
    // A late RTT reply (phase 0, the flow is in phase 1) is ignored; the CLEAR stabilises.
    tx.on_reply(9, false, 1, 0, 201 * kUs);
    CHECK(tx.counters().late_replies == 1);
    tx.on_reply(9, true, 1, 1, 202 * kUs);
    CHECK(tx.counters().clears == 1);
    const auto next = tx.on_data(9, 2, 203 * kUs, kEight, kBase);
    CHECK(next.tag.flag == ConweaveFlag::kInit);
    CHECK(next.tag.epoch == 2);
    CHECK(next.tag.ts_tail == 0);
    CHECK(next.member == after.member);
    if (after.member != init.member) {
      CHECK(tx.counters().reroutes == 1);
      return;  // a seed that moved the flow has been seen
    }
    CHECK(tx.counters().reroutes == 0);
  }
  FAIL("no seed in 1..39 moved the flow on its timeout");
}

TEST_CASE("new paths avoid members notified busy; an idle flow expires onto a new path") {
  ConweaveTx tx(ConweaveSettings{}, 3);
  // Every member but 5 busy towards leaf 4: every new flow's first packet goes to 5 unless both
  // draws are busy (then the first: counted).
  for (uint8_t m = 0; m < 8; ++m) {
    if (m != 5) tx.on_notify(4, m, 0);
  }
  CHECK(tx.busy(4, 0, 15 * kUs));
  CHECK_FALSE(tx.busy(4, 0, 16 * kUs));  // path_pause 16 us
  CHECK_FALSE(tx.busy(3, 0, 0));         // another leaf's member 0
  uint64_t to_five = 0;
  const int kFlows = 400;
  for (int f = 0; f < kFlows; ++f)
    to_five += tx.on_data(1000 + f, 4, kUs, kEight, kBase).member == 5;
  // A flow lands on 5 when either draw is 5: 1 - (7/8)^2 = 15/64 of them, and every other flow
  // had both draws busy.
  CHECK(to_five + tx.counters().no_good_path == kFlows);
  CHECK(std::abs(static_cast<double>(to_five) / kFlows - 15.0 / 64.0) < 0.07);
  CHECK(tx.counters().notifies == 7);

  // Idle longer than tx_expiry (300 us, strictly): a new epoch, INIT, the path sampled at once.
  ConweaveTx idle(ConweaveSettings{}, 5);
  const auto a = idle.on_data(1, 1, 0, kEight, kBase);
  CHECK(idle.on_data(1, 1, 300 * kUs, kEight, kBase).tag.epoch == 1);  // 0 + 300 is not < 300
  idle.on_reply(1, true, 1, 0, 300 * kUs);  // a CLEAR for phase 0 does not match: ignored
  CHECK(idle.counters().late_replies == 1);
  const auto b = idle.on_data(1, 1, 600 * kUs + 1, kEight, kBase);
  CHECK(b.tag.flag == ConweaveFlag::kInit);
  CHECK(b.tag.epoch == 2);
  CHECK(idle.counters().expiries == 2);  // the first packet and this one
  CHECK(idle.counters().reroutes == (a.member != b.member ? 1u : 0u));
}

TEST_CASE("a member that goes down moves the flow at once; none eligible: no member") {
  ConweaveTx tx(ConweaveSettings{}, 11);
  std::vector<PathLoad> members(4);
  const auto first = tx.on_data(5, 1, 0, members, kBase);
  members[first.member].eligible = false;
  const auto moved = tx.on_data(5, 1, kUs, members, kBase);
  CHECK(moved.member != first.member);
  CHECK(moved.member < 4);
  CHECK(tx.counters().reroutes == 1);
  for (auto& m : members) m.eligible = false;
  CHECK(tx.on_data(5, 1, 2 * kUs, members, kBase).member == ConweaveTx::kNoMember);
  CHECK(tx.counters().no_eligible_member == 1);
}

TEST_CASE("aging forgets idle flows; settings are checked") {
  ConweaveTx tx(ConweaveSettings{}, 1);
  tx.on_data(1, 1, 0, kEight, kBase);
  tx.on_data(2, 1, 1500 * kUs, kEight, kBase);
  tx.age(2000 * kUs);
  CHECK(tx.flows() == 2);  // 2 ms idle exactly: kept
  tx.age(2000 * kUs + 1);
  CHECK(tx.flows() == 1);
  CHECK(tx.counters().aged == 1);
  ConweaveSettings bad;
  bad.tx_expiry_ns = 0;
  CHECK_THROWS_WITH(ConweaveTx(bad, 1),
                    Catch::Contains("tx_expiry_us: must be microseconds in [1,"));
  bad = ConweaveSettings{};
  bad.voq_limit_packets = 0;
  CHECK_THROWS_WITH(ConweaveTx(bad, 1), Catch::Contains("voq_limit_packets"));
}
