#include "dataplane/runtime/tx_buffer.h"

#include <catch2/catch.hpp>

#include "tests/support/dpdk_test.h"

#include <utility>

#include "dataplane/runtime/packet_pool.h"
#include "dataplane/runtime/port.h"

using spraynet::runtime::PacketPool;
using spraynet::runtime::Port;
using spraynet::runtime::TxBuffer;

namespace {

rte_mbuf* packet(PacketPool& pool) {
  rte_mbuf* m = rte_pktmbuf_alloc(pool.get());
  REQUIRE(m != nullptr);
  REQUIRE(rte_pktmbuf_append(m, 60) != nullptr);
  return m;
}

}  // namespace

TEST_CASE("a tx buffer sends full bursts at once and the rest on flush", "[tx_buffer]") {
  PacketPool pool({.name = "txb_burst"});
  Port port({.device = "net_ring_txb0"}, pool.get());
  TxBuffer buf(port.id(), 0, 8);
  unsigned sent = 0;
  for (int i = 0; i < 7; ++i) sent += buf.send(packet(pool));
  CHECK(sent == 0);
  CHECK(buf.pending() == 7);
  sent += buf.send(packet(pool));  // the eighth fills the burst
  CHECK(sent == 8);
  CHECK(buf.pending() == 0);
  for (int i = 0; i < 3; ++i) sent += buf.send(packet(pool));
  CHECK(buf.flush() == 3);
  CHECK(buf.dropped() == 0);
  CHECK(spraynet::test::drain_rx(port) == 11);
  CHECK(pool.whole());
}

TEST_CASE("what a full tx queue refuses is freed and counted as dropped", "[tx_buffer]") {
  PacketPool pool({.name = "txb_full"});
  Port port({.device = "net_ring_txb1"}, pool.get());
  TxBuffer buf(port.id(), 0, 32);
  // Nothing reads the ring, so it fills: net_ring's rings hold 1023 mbufs whatever the
  // descriptor counts say.
  constexpr unsigned kOffered = 1100;
  unsigned sent = 0;
  for (unsigned i = 0; i < kOffered; ++i) sent += buf.send(packet(pool));
  sent += buf.flush();
  CHECK(sent == 1023);
  CHECK(buf.dropped() == kOffered - 1023);
  CHECK(port.stats().opackets == 1023);  // net_ring does not report its refusals in oerrors
  CHECK(pool.in_use() == 1023);          // the dropped ones went back at once
  CHECK(spraynet::test::drain_rx(port) == 1023);
  CHECK(pool.whole());
}

TEST_CASE("a tx buffer flushes on destruction and keeps its count when moved", "[tx_buffer]") {
  PacketPool pool({.name = "txb_moved"});
  Port port({.device = "net_ring_txb2"}, pool.get());
  {
    TxBuffer first(port.id(), 0);
    first.send(packet(pool));
    TxBuffer second = std::move(first);
    second.send(packet(pool));
    CHECK(second.pending() == 2);
    CHECK(second.dropped() == 0);
  }
  CHECK(spraynet::test::drain_rx(port) == 2);
  CHECK(pool.whole());
}
