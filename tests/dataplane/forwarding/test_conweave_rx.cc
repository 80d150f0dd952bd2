// ConWeave's destination leaf: holds, releases and answers worked out here from conweave-ns3's
// rules. The queues never read the mbufs, so these are stand-in pointers.
#include "dataplane/forwarding/conweave_rx.h"

#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

using namespace spraynet;

namespace {

constexpr uint64_t kUs = 1000;

rte_mbuf* pkt(uintptr_t id) {
  return reinterpret_cast<rte_mbuf*>(id * 64);
}
uintptr_t id_of(rte_mbuf* m) {
  return reinterpret_cast<uintptr_t>(m) / 64;
}

ConweaveTag tag(uint8_t epoch, uint8_t phase, ConweaveFlag flag, uint64_t ts_tx,
                uint64_t ts_tail = 0) {
  ConweaveTag t;
  t.epoch = epoch;
  t.phase = phase;
  t.flag = flag;
  t.ts_tx = static_cast<uint32_t>(ts_tx);
  t.ts_tail = static_cast<uint32_t>(ts_tail);
  t.member = 3;
  return t;
}

std::vector<uintptr_t> ids(const std::vector<rte_mbuf*>& ms) {
  std::vector<uintptr_t> out;
  for (rte_mbuf* m : ms) out.push_back(id_of(m));
  return out;
}

}  // namespace

TEST_CASE("a flow that is never rerouted is never held; INIT answered, CE reported") {
  ConweaveRx rx(ConweaveSettings{});
  auto r = rx.on_data(1, tag(1, 0, ConweaveFlag::kInit, 0), false, 5 * kUs, pkt(1));
  CHECK_FALSE(r.held);
  CHECK(r.rtt_reply);
  CHECK_FALSE(r.clear);
  for (int i = 2; i < 50; ++i) {
    const bool ce = i % 7 == 0;
    r = rx.on_data(
        1, tag(1 + i / 10, 0, i % 10 == 0 ? ConweaveFlag::kInit : ConweaveFlag::kData, i * kUs), ce,
        (i + 5) * kUs, pkt(i));
    CHECK_FALSE(r.held);
    CHECK(r.notify == ce);
  }
  CHECK(rx.counters().held == 0);
  CHECK(rx.counters().rtt_replies == 5);  // packets 1, 10, 20, 30, 40
  CHECK(rx.counters().notifies == 7);     // 7, 14, ..., 49
  CHECK(rx.next_due_ns() == UINT64_MAX);
}

TEST_CASE("new-path packets before the TAIL are held and released in order by the TAIL") {
  ConweaveRx rx(ConweaveSettings{});
  // Epoch 1 on the old path: sent at 0, 1, 2 us, arriving 10 us later.
  for (int i = 0; i < 3; ++i) {
    rx.on_data(1, tag(1, 0, i == 0 ? ConweaveFlag::kInit : ConweaveFlag::kData, i * kUs), false,
               (10 + i) * kUs, pkt(i));
  }
  // The TAIL was sent at 5 us (still on its way); new-path packets sent at 6, 7 us arrive
  // first, at 8 and 9 us... held.
  auto r =
      rx.on_data(1, tag(1, 1, ConweaveFlag::kData, 6 * kUs, 5 * kUs), false, 13 * kUs, pkt(10));
  CHECK(r.held);
  r = rx.on_data(1, tag(1, 1, ConweaveFlag::kData, 7 * kUs, 5 * kUs), false, 14 * kUs, pkt(11));
  CHECK(r.held);
  CHECK(rx.held_now() == 2);
  // The deadline: the last old-path packet arrived at 12 us, sent at 2 us; the TAIL was sent
  // 3 us after it: 12 + 3 + 16 (voq_flush_extra) = 31 us.
  CHECK(rx.next_due_ns() == 31 * kUs);
  std::vector<rte_mbuf*> out;
  rx.take_due(30 * kUs, out);
  CHECK(out.empty());
  // The TAIL arrives at 15 us: passed itself (not held), CLEAR, and the queue is due now.
  r = rx.on_data(1, tag(1, 0, ConweaveFlag::kTail, 5 * kUs, 5 * kUs), false, 15 * kUs, pkt(3));
  CHECK_FALSE(r.held);
  CHECK(r.clear);
  CHECK(rx.next_due_ns() == 15 * kUs);
  rx.take_due(15 * kUs, out);
  CHECK(ids(out) == std::vector<uintptr_t>{10, 11});
  CHECK(rx.counters().flushes_by_tail == 1);
  CHECK(rx.counters().flushes_by_timeout == 0);
  CHECK(rx.counters().max_queue_depth == 2);
  // After it, new-path packets are in order: passed.
  CHECK_FALSE(
      rx.on_data(1, tag(1, 1, ConweaveFlag::kData, 8 * kUs, 5 * kUs), false, 16 * kUs, pkt(12))
          .held);
  CHECK(rx.held_now() == 0);
}

TEST_CASE("without the TAIL the queue is released at the deadline; late old-path packets pass") {
  ConweaveRx rx(ConweaveSettings{});
  rx.on_data(2, tag(1, 0, ConweaveFlag::kInit, 0), false, 10 * kUs, pkt(1));
  rx.on_data(2, tag(1, 1, ConweaveFlag::kData, 4 * kUs, 3 * kUs), false, 11 * kUs, pkt(2));
  // 10 (old path's last arrival) + 3 (TAIL sent 3 us after it) + 16 = 29 us.
  CHECK(rx.next_due_ns() == 29 * kUs);
  // Another old-path packet (sent 1 us, arrived 20 us) moves the estimate: 20 + 2 + 16 = 38.
  rx.on_data(2, tag(1, 0, ConweaveFlag::kData, 1 * kUs), false, 20 * kUs, pkt(3));
  CHECK(rx.next_due_ns() == 38 * kUs);
  std::vector<rte_mbuf*> out;
  rx.take_due(38 * kUs, out);
  CHECK(ids(out) == std::vector<uintptr_t>{2});
  CHECK(rx.counters().flushes_by_timeout == 1);
  // The TAIL arrives afterwards: passed, answered; nothing held any more.
  const auto r =
      rx.on_data(2, tag(1, 0, ConweaveFlag::kTail, 3 * kUs, 3 * kUs), false, 40 * kUs, pkt(4));
  CHECK_FALSE(r.held);
  CHECK(r.clear);
  CHECK(rx.next_due_ns() == UINT64_MAX);

  // No phase-0 packet of the epoch seen: the default wait stands in (200 + 16 us).
  ConweaveRx cold(ConweaveSettings{});
  cold.on_data(3, tag(5, 1, ConweaveFlag::kData, 0, 0), false, 50 * kUs, pkt(9));
  CHECK(cold.next_due_ns() == 50 * kUs + 216 * kUs);
}

TEST_CASE("older epochs pass untouched; the queue's bound is counted; epochs wrap") {
  ConweaveSettings s;
  s.voq_limit_packets = 3;
  ConweaveRx rx(s);
  rx.on_data(4, tag(255, 0, ConweaveFlag::kInit, 0), false, kUs, pkt(1));
  // Epoch 0 follows 255 (the counter wraps): new, not previous.
  auto r = rx.on_data(4, tag(0, 0, ConweaveFlag::kInit, 2 * kUs), false, 3 * kUs, pkt(2));
  CHECK(r.rtt_reply);
  // Epoch 255 is now previous: passed, no reply.
  r = rx.on_data(4, tag(255, 0, ConweaveFlag::kInit, 0), true, 4 * kUs, pkt(3));
  CHECK_FALSE(r.held);
  CHECK_FALSE(r.rtt_reply);
  CHECK_FALSE(r.notify);
  CHECK(rx.counters().previous_epoch == 1);
  // Five new-path packets before the TAIL: three held, two passed and counted.
  int held = 0;
  for (int i = 0; i < 5; ++i) {
    held += rx.on_data(4, tag(0, 1, ConweaveFlag::kData, (3 + i) * kUs, 2 * kUs), false,
                       (5 + i) * kUs, pkt(10 + i))
                .held;
  }
  CHECK(held == 3);
  CHECK(rx.counters().voq_full == 2);
  std::vector<rte_mbuf*> out;
  rx.take_all(out);
  CHECK(ids(out) == std::vector<uintptr_t>{10, 11, 12});
  CHECK(rx.held_now() == 0);
}
