#include "dataplane/wire/payload_store.h"

#include <rte_mbuf.h>
#include <zlib.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <thread>
#include <vector>

#include "dataplane/rc_endpoint/rc_requester.h"
#include "dataplane/rc_endpoint/rc_responder.h"
#include "dataplane/wire/icrc.h"
#include "dataplane/wire/packet_builder.h"
#include "dataplane/wire/packet_parser.h"
#include "tests/support/dpdk_test.h"
#include "tests/support/rc_test.h"

using namespace spraynet;
using spraynet::test::TestPool;

namespace {

std::vector<uint8_t> pattern(size_t n, uint8_t mul) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * mul);
  return v;
}

// Every byte of a (possibly chained) packet, in order.
std::vector<uint8_t> bytes_of(const rte_mbuf* m) {
  std::vector<uint8_t> out(rte_pktmbuf_pkt_len(m));
  const void* p = rte_pktmbuf_read(m, 0, static_cast<uint32_t>(out.size()), out.data());
  REQUIRE(p != nullptr);
  if (p != out.data()) std::memcpy(out.data(), p, out.size());
  return out;
}

FrameSpec frame_with(std::span<const uint8_t> payload) {
  FrameSpec f;
  f.eth.src = {2, 0, 0, 0, 0, 1};
  f.eth.dst = {2, 0, 0, 0, 0, 2};
  f.ip.src = 0x0A000001;
  f.ip.dst = 0x0A000002;
  f.ip.id = 7;
  f.udp.src_port = 0xC123;
  f.udp.checksum = 0xA5A5;  // a PPCID: masked out of the ICRC
  f.payload = payload;
  return f;
}

}  // namespace

TEST_CASE("payload store: bytes kept once, their CRC known, nothing outside it") {
  PayloadStore store;
  const auto a = pattern(4096, 1);
  const auto s1 = store.add(a);
  const auto s2 = store.add(a);
  CHECK(s1.data() == s2.data());
  CHECK(std::equal(s1.begin(), s1.end(), a.begin(), a.end()));
  const auto s3 = store.add(pattern(4096, 7));
  CHECK(s3.data() != s1.data());

  for (size_t len : {size_t{1}, size_t{100}, size_t{4096}}) {
    const auto k = store.crc(s1.data(), len);
    REQUIRE(k.has_value());
    CHECK(k->crc == static_cast<uint32_t>(::crc32(0, a.data(), static_cast<uInt>(len))));
  }
  CHECK(store.crc(s1.data() + 10, 100)->crc ==
        static_cast<uint32_t>(::crc32(0, a.data() + 10, 100)));
  CHECK_FALSE(store.crc(s1.data(), 4097).has_value());  // runs past the region
  CHECK_FALSE(store.crc(a.data(), 16).has_value());     // the caller's copy, not the store's
  CHECK(store.unreferenced());
}

TEST_CASE("payload store: a chained RoCE packet is the copied one byte for byte") {
  TestPool pool(255, RTE_PKTMBUF_HEADROOM + 512);  // small mbufs: the payload is not in them
  TestPool big(15, RTE_PKTMBUF_HEADROOM + 4096 + 256);
  PayloadStore store;
  const auto payload = store.add(pattern(4096, 1));

  for (uint32_t len : {4096u, 4093u, 300u}) {
    const FrameSpec f = frame_with(payload.first(len));
    RoceSpec r;
    r.opcode = opcode::kRcWriteFirst;
    r.psn = 0x123456;
    r.dest_qp = 0x11;
    r.virtual_address = 0x1000;
    r.rkey = 0x55;
    r.dma_length = 65536;
    rte_mbuf* chained = build_roce_mbuf(pool.get(), f, r, &store);
    rte_mbuf* flat = build_roce_mbuf(big.get(), f, r);
    REQUIRE(chained != nullptr);
    REQUIRE(flat != nullptr);
    CHECK(chained->nb_segs == 3);
    CHECK(bytes_of(chained) == bytes_of(flat));
    CHECK_FALSE(store.unreferenced());

    // The receiver's checks: parsed from the first segment, the ICRC verified with the store
    // (folding the known CRC) and without it (reading every byte): both say good.
    ParsedPacket p;
    ParseOptions verify;
    verify.verify_icrc = true;
    REQUIRE(PacketParser(verify).parse(chained, p) == ParseStatus::kOk);
    CHECK(p.payload_length == len);
    CHECK(verify_icrc(chained, p.l3_offset, p.ip_total_length, &store));
    CHECK(verify_icrc(chained, p.l3_offset, p.ip_total_length, nullptr));
    // A corrupted ICRC byte (in the tail segment) is caught either way.
    rte_pktmbuf_mtod(chained->next->next, uint8_t*)[chained->next->next->data_len - 1] ^= 0x80;
    CHECK_FALSE(verify_icrc(chained, p.l3_offset, p.ip_total_length, &store));
    CHECK_FALSE(verify_icrc(chained, p.l3_offset, p.ip_total_length, nullptr));
    rte_pktmbuf_free(chained);
    rte_pktmbuf_free(flat);
  }
  CHECK(store.unreferenced());

  // A tiny payload is copied (one segment); a payload that is not the store's too.
  const std::vector<uint8_t> mine(1000, 0x42);
  rte_mbuf* small = build_roce_mbuf(pool.get(), frame_with(payload.first(64)), RoceSpec{}, &store);
  REQUIRE(small != nullptr);
  CHECK(small->nb_segs == 1);
  CHECK(build_roce_mbuf(pool.get(), frame_with(mine), RoceSpec{}, &store) == nullptr);  // no room
  rte_mbuf* copied = build_roce_mbuf(big.get(), frame_with(mine), RoceSpec{}, &store);
  REQUIRE(copied != nullptr);
  CHECK(copied->nb_segs == 1);
  rte_pktmbuf_free(small);
  rte_pktmbuf_free(copied);
  CHECK(pool.whole());
  CHECK(big.whole());
}

TEST_CASE("payload store: a WRITE exchange with attached payloads is the copied exchange") {
  // The same messages through a requester and a responder, once copying payloads and once
  // attaching them: the same packets cross, the same counters come out.
  auto run = [](PayloadStore* store, rte_mempool* pool) {
    RcRequesterConfig rc;
    rc.mtu = 4096;
    rc.message_bytes = 3 * 4096 + 100;
    rc.messages = 4;
    rc.payload_store = store;
    RcResponderConfig sc;
    sc.mtu = 4096;
    sc.payload_store = store;
    RcRequester req(rc, test::requester_address(), pool);
    RcResponder resp(sc, test::responder_address(), pool);
    std::vector<std::vector<uint8_t>> wire;
    std::vector<rte_mbuf*> out, back;
    for (uint64_t now = 0; now < 1'000'000 && !req.done(); now += 1000) {
      out.clear();
      back.clear();
      req.poll(now, out);
      for (rte_mbuf* m : out) {
        wire.push_back(bytes_of(m));
        resp.receive(m, test::parse_ok(m), now, back);  // frees m; ACKs into back
      }
      resp.poll(now, back);
      for (rte_mbuf* a : back) req.receive(a, test::parse_ok(a), now);
    }
    CHECK(req.done());
    CHECK(resp.counters().icrc_errors == 0);
    return std::make_pair(wire, resp.counters().accepted);
  };
  TestPool small(255, RTE_PKTMBUF_HEADROOM + 512);
  TestPool big(255, RTE_PKTMBUF_HEADROOM + 4096 + 256);
  PayloadStore store;
  const auto shared = run(&store, small.get());
  const auto copied = run(nullptr, big.get());
  CHECK(shared.second == 16);
  CHECK(shared == copied);
  CHECK(store.unreferenced());
  CHECK(small.whole());
  CHECK(big.whole());
}

TEST_CASE("payload store: crc() from several threads at once answers each its own segment") {
  // fabric_emu's logical processes share one store and ask for CRCs concurrently, each for the
  // lengths its packets have: every answer must be the CRC of the bytes asked about (a shared
  // last-answer cache once returned another segment's CRC, and the packet failed its ICRC).
  PayloadStore store;
  std::vector<uint8_t> bytes(4096);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 13 + 5);
  const auto region = store.add(bytes);
  const std::vector<size_t> lens = {4096, 1024, 333, 2048, 17, 4000};
  std::vector<uint32_t> want;
  for (size_t len : lens) {
    want.push_back(static_cast<uint32_t>(::crc32(0, region.data(), static_cast<uInt>(len))));
  }
  std::atomic<uint64_t> wrong{0}, asked{0};
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (unsigned i = 0; i < 200000; ++i) {
        // Neighbouring keys in turn, one thread a step behind the next: what one asks, another
        // has often just asked (the old cache's torn answers needed that).
        const size_t k = (i / 2 + t) % lens.size();
        const auto c = store.crc(region.data(), lens[k]);
        if (!c || c->crc != want[k]) wrong.fetch_add(1);
        asked.fetch_add(1);
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(asked.load() == 4u * 200000u);
  CHECK(wrong.load() == 0);
  // Outside the store: nothing, from any thread.
  std::vector<uint8_t> other(64, 1);
  bool outside_known = true;
  std::thread([&] { outside_known = store.crc(other.data(), other.size()).has_value(); }).join();
  CHECK_FALSE(outside_known);
}
