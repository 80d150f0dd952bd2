#include "dataplane/probe/latency_probe.h"

#include <rte_mbuf.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <stdexcept>
#include <utility>
#include <vector>

#include "dataplane/wire/byte_order.h"
#include "dataplane/wire/packet_builder.h"
#include "dataplane/wire/packet_parser.h"
#include "tests/support/dpdk_test.h"

using namespace spraynet;
using spraynet::test::TestPool;

namespace {

// RFC 3550 6.4.1 and A.8, written out independently of LatencyProbe: (S, R) pairs in arrival
// order; D(i-1, i) = (R_i - S_i) - (R_{i-1} - S_{i-1}); J += (|D| - J) / 16.
double rfc3550_jitter(const std::vector<std::pair<uint64_t, uint64_t>>& arrivals) {
  double j = 0;
  for (size_t i = 1; i < arrivals.size(); ++i) {
    const double transit_prev = static_cast<double>(static_cast<int64_t>(arrivals[i - 1].second) -
                                                    static_cast<int64_t>(arrivals[i - 1].first));
    const double transit = static_cast<double>(static_cast<int64_t>(arrivals[i].second) -
                                               static_cast<int64_t>(arrivals[i].first));
    const double d = transit - transit_prev;
    j = j + ((d < 0 ? -d : d) - j) / 16;
  }
  return j;
}

// n probes sent at t0, t0 + step, ...
std::vector<rte_mbuf*> send_n(LatencyProbe& probe, rte_mempool* pool, int n, uint64_t t0,
                              uint64_t step) {
  std::vector<rte_mbuf*> v;
  for (int i = 0; i < n; ++i) {
    rte_mbuf* m = probe.make_probe(pool, t0 + step * static_cast<uint64_t>(i));
    REQUIRE(m != nullptr);
    v.push_back(m);
  }
  return v;
}

void free_all(std::vector<rte_mbuf*>& v) {
  for (rte_mbuf* m : v) rte_pktmbuf_free(m);
  v.clear();
}

std::vector<uint8_t> bytes_of(const rte_mbuf* m) {
  const auto* p = rte_pktmbuf_mtod(m, const uint8_t*);
  return {p, p + m->data_len};
}

}  // namespace

TEST_CASE("a probe is a genuine UDP/IPv4 frame with signature, sequence and send time") {
  TestPool pool;
  {
    LatencyProbeConfig c;
    c.dst_port = 9999;
    c.src_port = 1234;
    c.dscp = 34;
    c.src_ip = 0x0A010203;
    c.dst_ip = 0x0B040506;
    c.frame_length = 128;
    LatencyProbe probe(c);
    rte_mbuf* a = probe.make_probe(pool.get(), 5'000);
    rte_mbuf* b = probe.make_probe(pool.get(), 0x0102030405060708);
    REQUIRE(a != nullptr);
    REQUIRE(b != nullptr);
    CHECK(probe.sent() == 2);
    ParsedPacket p;
    REQUIRE(PacketParser().parse(b, p) == ParseStatus::kOk);  // IPv4 checksum verified
    CHECK(p.kind == PacketKind::kUdp);
    CHECK(b->data_len == 128);
    CHECK(p.dst_port == 9999);
    CHECK(p.src_port == 1234);
    CHECK(p.dscp() == 34);
    CHECK(p.src_ip == 0x0A010203);
    CHECK(p.dst_ip == 0x0B040506);
    CHECK(p.udp_length == 128 - 14 - 20);
    const uint8_t* pl = rte_pktmbuf_mtod_offset(b, const uint8_t*, p.l4_offset + 8);
    CHECK(std::memcmp(pl, "SPRYPRB1", 8) == 0);
    CHECK(load_be64(pl + 8) == 1);
    CHECK(load_be64(pl + 16) == 0x0102030405060708);
    CHECK(std::all_of(pl + 24, pl + (128 - 14 - 28), [](uint8_t x) { return x == 0; }));
    const uint8_t* pa = rte_pktmbuf_mtod_offset(a, const uint8_t*, p.l4_offset + 8);
    CHECK(load_be64(pa + 8) == 0);
    CHECK(load_be64(pa + 16) == 5'000);
    rte_pktmbuf_free(a);
    rte_pktmbuf_free(b);

    // Smallest frame by default; with a VLAN tag the tag is there and four bytes more.
    LatencyProbeConfig v;
    v.eth.vlan = true;
    v.eth.vlan_id = 100;
    v.eth.pcp = 5;
    LatencyProbe tagged(v);
    rte_mbuf* t = tagged.make_probe(pool.get(), 1);
    REQUIRE(t != nullptr);
    REQUIRE(PacketParser().parse(t, p) == ParseStatus::kOk);
    CHECK(t->data_len == 70);
    CHECK(p.vlan_tags == 1);
    CHECK(p.vlan_id == 100);
    CHECK(p.pcp == 5);
    CHECK(p.dscp() == 46);
    CHECK(tagged.on_receive(t, 11));
    CHECK(tagged.report().min_ns == 10);
    rte_pktmbuf_free(t);
    CHECK(LatencyProbe(LatencyProbeConfig{}).config().min_frame_length() == 66);
  }
  CHECK(pool.whole());
}

TEST_CASE("pacing: one interval from when the probe was due, no catch-up burst") {
  TestPool pool;
  {
    LatencyProbeConfig c;
    c.rate_pps = 100'000;  // 10 us
    LatencyProbe probe(c);
    CHECK(probe.interval_ns() == 10'000);
    CHECK(probe.next_send_ns() == 0);
    std::vector<rte_mbuf*> v;
    v.push_back(probe.make_probe(pool.get(), 0));
    CHECK(probe.next_send_ns() == 10'000);
    v.push_back(probe.make_probe(pool.get(), 10'500));  // a little late: the grid is kept
    CHECK(probe.next_send_ns() == 20'000);
    v.push_back(probe.make_probe(pool.get(), 20'000));
    CHECK(probe.next_send_ns() == 30'000);
    v.push_back(probe.make_probe(pool.get(), 95'000));  // far behind: from now on
    CHECK(probe.next_send_ns() == 105'000);
    for (rte_mbuf* m : v) REQUIRE(m != nullptr);
    free_all(v);

    // An empty pool: no probe, no sequence number used, the schedule unchanged.
    TestPool tiny(7);
    std::vector<rte_mbuf*> all;
    while (rte_mbuf* m = rte_pktmbuf_alloc(tiny.get())) all.push_back(m);
    CHECK(probe.make_probe(tiny.get(), 105'000) == nullptr);
    CHECK(probe.sent() == 4);
    CHECK(probe.next_send_ns() == 105'000);
    free_all(all);
    CHECK(tiny.whole());
  }
  CHECK(pool.whole());
}

TEST_CASE("percentiles: nearest rank, exact on crafted latencies, ordered") {
  TestPool pool;
  {
    // 1,000 probes with latencies 1..1000 ns, arriving in a shuffled order.
    LatencyProbe probe(LatencyProbeConfig{});
    std::vector<rte_mbuf*> v = send_n(probe, pool.get(), 1000, 1'000'000, 1'000);
    std::vector<int> order(1000);
    for (int i = 0; i < 1000; ++i) order[i] = i;
    std::mt19937 rng(3);
    std::shuffle(order.begin(), order.end(), rng);
    for (int i : order) {
      // probe i was sent at 1e6 + 1000 i; its latency is i + 1
      CHECK(probe.on_receive(v[i], 1'000'000 + 1'000 * static_cast<uint64_t>(i) + i + 1));
    }
    const LatencyReport r = probe.report();
    CHECK(r.count == 1000);
    CHECK(r.lost == 0);
    CHECK(r.duplicates == 0);
    CHECK(r.min_ns == 1);
    CHECK(r.p50_ns == 500);   // rank 500
    CHECK(r.p99_ns == 990);   // rank 990
    CHECK(r.p999_ns == 999);  // rank 999
    CHECK(r.max_ns == 1000);
    CHECK(r.samples == 1000);
    CHECK_FALSE(r.sample_cap_hit);
    free_all(v);

    // Ten probes: ranks 5, 10, 10.
    LatencyProbe ten(LatencyProbeConfig{});
    v = send_n(ten, pool.get(), 10, 0, 0);
    const uint64_t lat[10] = {70, 10, 100, 30, 50, 90, 20, 60, 40, 80};
    for (int i = 0; i < 10; ++i) CHECK(ten.on_receive(v[i], lat[i]));
    const LatencyReport t = ten.report();
    CHECK(t.min_ns == 10);
    CHECK(t.p50_ns == 50);
    CHECK(t.p99_ns == 100);
    CHECK(t.p999_ns == 100);
    CHECK(t.max_ns == 100);
    CHECK(ten.samples() == std::vector<uint64_t>(lat, lat + 10));  // arrival order
    free_all(v);

    // One probe: every percentile is it. None: all zero.
    LatencyProbe one(LatencyProbeConfig{});
    v = send_n(one, pool.get(), 1, 100, 0);
    CHECK(one.on_receive(v[0], 345));
    const LatencyReport o = one.report();
    CHECK((o.min_ns == 245 && o.p50_ns == 245 && o.p99_ns == 245 && o.p999_ns == 245 &&
           o.max_ns == 245));
    CHECK(o.jitter_ns == 0);
    free_all(v);
    const LatencyReport none = LatencyProbe(LatencyProbeConfig{}).report();
    CHECK((none.count == 0 && none.max_ns == 0 && none.p50_ns == 0 && none.lost == 0));

    // Random latencies: always min <= p50 <= p99 <= p99.9 <= max.
    LatencyProbe rnd(LatencyProbeConfig{});
    v = send_n(rnd, pool.get(), 3000, 0, 100);
    std::exponential_distribution<double> expo(1.0 / 2000);
    for (size_t i = 0; i < v.size(); ++i)
      CHECK(rnd.on_receive(v[i], 100 * i + static_cast<uint64_t>(expo(rng))));
    const LatencyReport x = rnd.report();
    CHECK(x.min_ns <= x.p50_ns);
    CHECK(x.p50_ns <= x.p99_ns);
    CHECK(x.p99_ns <= x.p999_ns);
    CHECK(x.p999_ns <= x.max_ns);
    CHECK(x.p50_ns < x.p999_ns);
    free_all(v);
  }
  CHECK(pool.whole());
}

TEST_CASE("lost, out of order (counted and recorded) and duplicates") {
  TestPool pool;
  {
    LatencyProbe probe(LatencyProbeConfig{});
    std::vector<rte_mbuf*> v = send_n(probe, pool.get(), 10, 0, 1000);
    // Arrivals by sequence: 0 1 3 2 5 5 9 4 -- 6, 7, 8 never arrive; 2 and 4 arrive after a
    // higher one; the second 5 is a duplicate.
    const int seqs[] = {0, 1, 3, 2, 5, 5, 9, 4};
    uint64_t now = 100'000;
    for (int s : seqs) CHECK(probe.on_receive(v[s], now += 10));
    const LatencyReport r = probe.report();
    CHECK(r.sent == 10);
    CHECK(r.count == 7);
    CHECK(r.lost == 3);
    CHECK(r.out_of_order == 2);
    CHECK(r.duplicates == 1);
    CHECK(r.samples == 7);                         // out-of-order ones recorded, the duplicate not
    CHECK(probe.samples()[3] == 100'040 - 2'000);  // probe 2, fourth to arrive
    CHECK(probe.samples()[6] == 100'080 - 4'000);  // probe 4, last
    free_all(v);

    // A receiver that sent nothing itself: lost counts from the highest sequence seen.
    LatencyProbe sender(LatencyProbeConfig{}), receiver(LatencyProbeConfig{});
    v = send_n(sender, pool.get(), 6, 0, 0);
    for (int s : {0, 2, 5}) CHECK(receiver.on_receive(v[s], 1));
    CHECK(receiver.report().lost == 3);
    CHECK(receiver.report().out_of_order == 0);
    free_all(v);

    // Beyond the sequence window a late probe cannot be told from a duplicate: out of order.
    LatencyProbeConfig small;
    small.sequence_window = 4;
    LatencyProbe windowed(small), src(small);
    v = send_n(src, pool.get(), 12, 0, 0);
    // The second 1 is a duplicate (within 4 of 2); after 6, the 1 (5 below) is out of order,
    // as is 3 (within the window, never seen); after 11, 6 is 5 below: out of order, not a
    // duplicate.
    for (int s : {0, 1, 2, 1, 6, 1, 3, 11, 6}) CHECK(windowed.on_receive(v[s], 10));
    const LatencyReport w = windowed.report();
    CHECK(w.duplicates == 1);
    CHECK(w.out_of_order == 3);
    CHECK(w.count == 8);
    free_all(v);
  }
  CHECK(pool.whole());
}

TEST_CASE("jitter equals an independent RFC 3550 computation; changes over a threshold") {
  TestPool pool;
  {
    // Transit 100, 120, 90: J = 20/16 = 1.25, then 1.25 + (30 - 1.25)/16 = 3.046875.
    LatencyProbe small(LatencyProbeConfig{});
    std::vector<rte_mbuf*> v = send_n(small, pool.get(), 3, 1000, 1000);
    CHECK(small.on_receive(v[0], 1100));
    CHECK(small.on_receive(v[1], 2120));
    CHECK(small.on_receive(v[2], 3090));
    CHECK(small.jitter_ns() == 3.046875);
    CHECK(small.report().jitter_ns == 3.046875);
    free_all(v);

    // 2,000 probes, random latencies, a fifth of them delivered late (out of order).
    LatencyProbeConfig c;
    c.change_threshold_ns = 3'000;
    LatencyProbe probe(c);
    v = send_n(probe, pool.get(), 2000, 10'000, 2'500);
    std::mt19937_64 rng(7);
    std::uniform_int_distribution<uint64_t> lat(500, 9'000);
    std::vector<std::pair<uint64_t, size_t>> arrivals;  // (receive time, index)
    for (size_t i = 0; i < v.size(); ++i) {
      const uint64_t s = 10'000 + 2'500 * i;
      arrivals.push_back({s + lat(rng) + (rng() % 5 == 0 ? 20'000 : 0), i});
    }
    std::sort(arrivals.begin(), arrivals.end());
    std::vector<std::pair<uint64_t, uint64_t>> pairs;  // (S, R) in arrival order
    std::vector<uint64_t> latencies;
    for (const auto& [r, i] : arrivals) {
      const uint64_t s = 10'000 + 2'500 * i;
      CHECK(probe.on_receive(v[i], r));
      pairs.push_back({s, r});
      latencies.push_back(r - s);
    }
    const LatencyReport rep = probe.report();
    CHECK(rep.count == 2000);
    CHECK(rep.out_of_order > 100);
    CHECK(rep.jitter_ns == rfc3550_jitter(pairs));  // same operations, same double
    CHECK(rep.jitter_ns > 0);
    uint64_t over = 0, over_1000 = 0;
    for (size_t i = 1; i < latencies.size(); ++i) {
      const uint64_t d = latencies[i] > latencies[i - 1] ? latencies[i] - latencies[i - 1]
                                                         : latencies[i - 1] - latencies[i];
      over += d > 3'000;
      over_1000 += d > 1'000;
    }
    CHECK(rep.changes_over_threshold == over);
    CHECK(probe.latency_changes_over(3'000) == over);
    CHECK(probe.latency_changes_over(1'000) == over_1000);
    CHECK(over > 0);
    free_all(v);

    // 100 150 120 400 390, threshold 40: changes 50 and 280.
    LatencyProbeConfig t;
    t.change_threshold_ns = 40;
    LatencyProbe ch(t);
    v = send_n(ch, pool.get(), 5, 0, 0);
    const uint64_t l[] = {100, 150, 120, 400, 390};
    for (int i = 0; i < 5; ++i) ch.on_receive(v[i], l[i]);
    CHECK(ch.report().changes_over_threshold == 2);
    CHECK(ch.latency_changes_over(20) == 3);
    CHECK(ch.latency_changes_over(1000) == 0);
    free_all(v);
  }
  CHECK(pool.whole());
}

TEST_CASE("other packets untouched and uncounted; malformed ones on the probe port counted") {
  TestPool pool;
  {
    LatencyProbeConfig c;
    c.dst_port = 7777;
    LatencyProbe probe(c);
    std::vector<uint8_t> payload(64, 0xAB);
    std::memcpy(payload.data(), "SPRYPRB1", 8);  // the signature, but another port
    FrameSpec f;
    f.ip.src = 0x0A000001;
    f.ip.dst = 0x0A000002;
    f.udp.src_port = 7777;
    f.udp.dst_port = 7000;
    f.payload = payload;
    rte_mbuf* other = build_udp_mbuf(pool.get(), f);
    RoceSpec roce;
    rte_mbuf* rocem = build_roce_mbuf(pool.get(), f, roce);
    REQUIRE(other != nullptr);
    REQUIRE(rocem != nullptr);
    const auto before = bytes_of(other);
    const auto before_roce = bytes_of(rocem);
    CHECK_FALSE(probe.on_receive(other, 100));
    CHECK_FALSE(probe.on_receive(rocem, 100));
    CHECK(bytes_of(other) == before);
    CHECK(bytes_of(rocem) == before_roce);
    const std::vector<uint8_t> arp(60, 0);  // EtherType 0: not IPv4
    CHECK_FALSE(probe.on_receive(arp.data(), arp.size(), 100));
    CHECK_FALSE(probe.on_receive(arp.data(), 5, 100));  // shorter than Ethernet
    LatencyReport r = probe.report();
    CHECK((r.count == 0 && r.malformed == 0 && r.lost == 0));
    rte_pktmbuf_free(other);
    rte_pktmbuf_free(rocem);

    // To the probe port: a short payload, a wrong signature, a bad IPv4 checksum, a frame cut
    // short (IP total length beyond it), a UDP length that disagrees with IP.
    f.udp.dst_port = 7777;
    std::vector<uint8_t> short_payload(10, 0);
    std::memcpy(short_payload.data(), "SPRYPRB1", 8);
    f.payload = short_payload;
    rte_mbuf* s = build_udp_mbuf(pool.get(), f);
    std::vector<uint8_t> wrong(24, 0);
    std::memcpy(wrong.data(), "SPRYPRB2", 8);
    f.payload = wrong;
    rte_mbuf* w = build_udp_mbuf(pool.get(), f);
    REQUIRE(s != nullptr);
    REQUIRE(w != nullptr);
    CHECK_FALSE(probe.on_receive(s, 100));
    CHECK_FALSE(probe.on_receive(w, 100));
    rte_pktmbuf_free(s);
    rte_pktmbuf_free(w);

    rte_mbuf* good = probe.make_probe(pool.get(), 0);
    REQUIRE(good != nullptr);
    std::vector<uint8_t> frame = bytes_of(good);
    rte_pktmbuf_free(good);
    std::vector<uint8_t> bad_cksum = frame;
    bad_cksum[14 + 10] ^= 0xFF;
    CHECK_FALSE(probe.on_receive(bad_cksum.data(), bad_cksum.size(), 100));
    CHECK_FALSE(probe.on_receive(frame.data(), frame.size() - 10, 100));  // cut short
    std::vector<uint8_t> udp_len = frame;
    store_be16(udp_len.data() + 14 + 20 + 4, 20);  // UDP says 20, IP says 52
    CHECK_FALSE(probe.on_receive(udp_len.data(), udp_len.size(), 100));
    // Every prefix of a probe: never a probe, never a crash, never read past the length (ASan).
    for (size_t len = 0; len < frame.size(); ++len) {
      std::vector<uint8_t> cut(frame.begin(), frame.begin() + static_cast<long>(len));
      CHECK_FALSE(probe.on_receive(cut.data(), cut.size(), 100));
    }
    r = probe.report();
    CHECK(r.count == 0);
    CHECK(r.malformed >= 5 + 1);  // the five above, and prefixes that still show the port
    CHECK(probe.on_receive(frame.data(), frame.size(), 100));  // the whole one is a probe
    CHECK(probe.report().count == 1);

    // A chained mbuf whose first segment is a probe: not taken (single segments only), counted.
    const uint64_t malformed = probe.report().malformed;
    rte_mbuf* head = probe.make_probe(pool.get(), 0);
    rte_mbuf* tail = pool.make(std::vector<uint8_t>(16, 0));
    REQUIRE(head != nullptr);
    REQUIRE(rte_pktmbuf_chain(head, tail) == 0);
    CHECK_FALSE(probe.on_receive(head, 100));
    CHECK(probe.report().malformed == malformed + 1);
    CHECK(probe.report().count == 1);
    rte_pktmbuf_free(head);
  }
  CHECK(pool.whole());
}

TEST_CASE("sample cap, clock going back, config errors, JSON") {
  TestPool pool;
  {
    LatencyProbeConfig c;
    c.max_samples = 5;
    LatencyProbe probe(c);
    std::vector<rte_mbuf*> v = send_n(probe, pool.get(), 8, 1000, 0);
    const uint64_t lat[] = {50, 40, 30, 20, 10, 5, 500, 60};
    for (int i = 0; i < 8; ++i) CHECK(probe.on_receive(v[i], 1000 + lat[i]));
    LatencyReport r = probe.report();
    CHECK(r.count == 8);
    CHECK(r.samples == 5);
    CHECK(r.sample_cap_hit);
    CHECK(r.p50_ns == 30);  // over the first five
    CHECK(r.p99_ns == 50);
    CHECK(r.min_ns == 5);  // over all
    CHECK(r.max_ns == 500);
    free_all(v);

    LatencyProbe back(LatencyProbeConfig{});
    v = send_n(back, pool.get(), 2, 1000, 0);
    CHECK(back.on_receive(v[0], 900));   // before it was sent: 0, counted
    CHECK(back.on_receive(v[1], 1100));  // transit -100 then +100: |D| = 200
    r = back.report();
    CHECK(r.clock_backwards == 1);
    CHECK(r.min_ns == 0);
    CHECK(r.jitter_ns == 200.0 / 16);
    free_all(v);

    // A send time from some other clock, far off: no overflow (UBSan), latency clamped.
    LatencyProbe wild(LatencyProbeConfig{});
    rte_mbuf* w0 = wild.make_probe(pool.get(), 0);
    rte_mbuf* w1 = wild.make_probe(pool.get(), 100);
    REQUIRE(w0 != nullptr);
    REQUIRE(w1 != nullptr);
    CHECK(wild.on_receive(w0, uint64_t{INT64_MAX}));  // transit 2^63 - 1
    CHECK(wild.on_receive(w1, 98));                   // transit -2: D = -2^63 - 1 overflows
    CHECK(wild.report().clock_backwards == 1);
    CHECK(wild.report().min_ns == 0);
    CHECK(std::isfinite(wild.jitter_ns()));
    rte_pktmbuf_free(w0);
    rte_pktmbuf_free(w1);

    const std::string json = r.to_json();
    for (const char* key : {"\"count\": 2", "\"lost\": 0", "\"out_of_order\": 0", "\"p50_ns\"",
                            "\"p99_ns\"", "\"p999_ns\"", "\"max_ns\": 100", "\"jitter_ns\": 12.500",
                            "\"changes_over_threshold\": 0", "\"sample_cap_hit\": false"})
      CHECK(json.find(key) != std::string::npos);

    auto err = [](auto edit) {
      LatencyProbeConfig k;
      edit(k);
      return k.check();
    };
    CHECK(err([](LatencyProbeConfig&) {}).empty());
    CHECK(err([](LatencyProbeConfig& k) { k.frame_length = 65; }).rfind("frame_length:", 0) == 0);
    CHECK(err([](LatencyProbeConfig& k) { k.frame_length = 66; }).empty());
    CHECK(err([](LatencyProbeConfig& k) {
            k.eth.vlan = true;
            k.frame_length = 66;
          }).rfind("frame_length:", 0) == 0);
    CHECK(err([](LatencyProbeConfig& k) { k.frame_length = 9001; }).rfind("frame_length:", 0) == 0);
    CHECK(err([](LatencyProbeConfig& k) { k.dscp = 64; }).rfind("dscp:", 0) == 0);
    CHECK(err([](LatencyProbeConfig& k) { k.dst_port = 0; }).rfind("dst_port:", 0) == 0);
    CHECK(err([](LatencyProbeConfig& k) { k.rate_pps = 0; }).rfind("rate_pps:", 0) == 0);
    CHECK(err([](LatencyProbeConfig& k) { k.max_samples = 0; }).rfind("max_samples:", 0) == 0);
    CHECK(err([](LatencyProbeConfig& k) { k.sequence_window = 0; }).rfind("sequence_window:", 0) ==
          0);
    LatencyProbeConfig bad;
    bad.rate_pps = 0;
    CHECK_THROWS_AS(LatencyProbe(bad), std::invalid_argument);
  }
  CHECK(pool.whole());
}
