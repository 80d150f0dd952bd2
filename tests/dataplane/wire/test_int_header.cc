// INT-MD over UDP for HPCC (dataplane/wire/int_header.h), byte by byte against offsets and values
// the test writes out itself, on the RoCEv2 test vector of DESIGN.md and on frames from the
// packet builder.
#include "dataplane/wire/int_header.h"

#include <rte_mbuf.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <random>
#include <vector>

#include "dataplane/wire/conga_overlay.h"
#include "dataplane/wire/conweave_overlay.h"
#include "dataplane/wire/icrc.h"
#include "dataplane/wire/packet_builder.h"
#include "dataplane/wire/packet_parser.h"
#include "dataplane/wire/vxlan_tunnel.h"
#include "tests/support/dpdk_test.h"
#include "tests/support/ipv4_checksum.h"
#include "tests/support/roce_vector.h"

using namespace spraynet;
using spraynet::test::TestPool;

namespace {

// Offsets in the untagged test vector: IPv4 at 14, UDP at 34, the shim at 42.
constexpr size_t kL3 = 14, kUdp = 34, kShim = 42, kMd = 46, kStack = 58;

uint16_t be16(const std::vector<uint8_t>& f, size_t at) {
  return static_cast<uint16_t>(f[at] << 8 | f[at + 1]);
}

void put(std::vector<uint8_t>& out, uint64_t v, int bytes) {
  for (int i = bytes - 1; i >= 0; --i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

// A record as the test expects it on the wire: 6 words, big-endian.
std::vector<uint8_t> record_bytes(const IntHopRecord& h) {
  std::vector<uint8_t> r;
  r.push_back(h.queue_id);
  put(r, h.qlen_bytes / 80, 3);  // 80-byte cells, rounded down
  put(r, h.egress_ts_ns, 8);
  put(r, h.tx_bytes, 8);
  put(r, h.line_rate_mbps, 4);
  REQUIRE(r.size() == 24);
  return r;
}

std::vector<uint8_t> slice(const std::vector<uint8_t>& f, size_t from, size_t n) {
  return {f.begin() + static_cast<std::ptrdiff_t>(from),
          f.begin() + static_cast<std::ptrdiff_t>(from + n)};
}

std::vector<uint8_t> tail(const std::vector<uint8_t>& f, size_t from) {
  return {f.begin() + static_cast<std::ptrdiff_t>(from), f.end()};
}

IntHopRecord hop_a() {
  IntHopRecord h;
  h.queue_id = 3;
  h.qlen_bytes = 8'000;  // 100 cells
  h.egress_ts_ns = 0x0102030405060708;
  h.tx_bytes = 0x1112131415161718;
  h.line_rate_mbps = 100'000;
  return h;
}

IntHopRecord hop_b() {
  IntHopRecord h;
  h.queue_id = 1;
  h.qlen_bytes = 1'000'079;  // 12500 cells and 79 bytes: read back as 1000000
  h.egress_ts_ns = 0x2122232425262728;
  h.tx_bytes = 0x3132333435363738;
  h.line_rate_mbps = 400'000;
  return h;
}

// A RoCE frame from the builder.
std::vector<uint8_t> built(size_t payload, bool vlan, uint16_t udp_checksum) {
  std::vector<uint8_t> data(payload);
  for (size_t i = 0; i < payload; ++i) data[i] = static_cast<uint8_t>(i * 7 + 1);
  FrameSpec f;
  f.eth.vlan = vlan;
  f.eth.pcp = 3;
  f.eth.vlan_id = 42;
  f.ip.src = 0x0A000001;
  f.ip.dst = 0x0A000102;
  f.ip.tos = 0x6A;
  f.ip.id = 0x5555;
  f.udp.src_port = 0xC0DE;
  f.udp.checksum = udp_checksum;
  f.payload = data;
  RoceSpec r;
  r.opcode = opcode::kRcWriteMiddle;
  r.dest_qp = 0x123456;
  r.psn = 0xABCDEF;
  std::vector<uint8_t> out(roce_frame_length(f, r));
  REQUIRE(build_roce_frame(out, f, r) == out.size());
  return out;
}

size_t l3_of(const std::vector<uint8_t>& f) {
  return be16(f, 12) == 0x8100 ? 18 : 14;
}

bool icrc_ok(const std::vector<uint8_t>& f) {
  const size_t l3 = l3_of(f);
  return verify_icrc(f.data() + l3, be16(f, l3 + 2));
}

}  // namespace

TEST_CASE("int: insert, then two pushes, byte by byte") {
  const std::vector<uint8_t> orig = test::roce_vector_frame();
  REQUIRE(orig.size() == 106);
  std::vector<uint8_t> f = orig;

  REQUIRE(int_insert(f, 5));
  REQUIRE(f.size() == orig.size() + 16);
  // Ethernet and IPv4 as before but for the total length (92 + 16) and the checksum.
  CHECK(slice(f, 0, 16) == slice(orig, 0, 16));
  CHECK(be16(f, kL3 + 2) == 92 + 16);
  CHECK(slice(f, 18, 6) == slice(orig, 18, 6));
  CHECK(slice(f, 26, 8) == slice(orig, 26, 8));
  CHECK(test::ipv4_checksum_ok(f.data() + kL3));
  // UDP: the source port, then 4792, length 72 + 16, checksum 0 as it was.
  CHECK(be16(f, kUdp) == 0xC123);
  CHECK(be16(f, kUdp + 2) == 4792);
  CHECK(be16(f, kUdp + 4) == 72 + 16);
  CHECK(be16(f, kUdp + 6) == 0);
  // Shim: Type 1, NPT 1 (0x14); Length 3 words (the INT-MD header; the shim is not counted);
  // the original port 4791 (0x12B7).
  CHECK(slice(f, kShim, 4) == std::vector<uint8_t>{0x14, 0x03, 0x12, 0xB7});
  // INT-MD: Ver 2, no flags; Hop ML 6; 5 hops left; bitmap bits 3 and 5 (0x1400); domain
  // 0x4850; DS instruction bits 0 and 1 (0xC000); DS flags 0.
  CHECK(slice(f, kMd, 12) == std::vector<uint8_t>{0x20, 0x00, 0x06, 0x05, 0x14, 0x00, 0x48, 0x50,
                                                  0xC0, 0x00, 0x00, 0x00});
  CHECK(tail(f, kStack) == tail(orig, kShim));  // BTH, RETH, payload, ICRC untouched

  const std::vector<uint8_t> after_insert = f;
  REQUIRE(int_push_hop(f, hop_a()) == IntPushResult::kPushed);
  REQUIRE(f.size() == orig.size() + 16 + 24);
  CHECK(be16(f, kL3 + 2) == 92 + 40);
  CHECK(test::ipv4_checksum_ok(f.data() + kL3));
  CHECK(be16(f, kUdp + 4) == 72 + 40);
  CHECK(f[kShim + 1] == 3 + 6);
  CHECK(f[kMd + 3] == 4);
  const std::vector<uint8_t> a = record_bytes(hop_a());
  CHECK(a == std::vector<uint8_t>{3,    0,    0,    100,  0x01, 0x02, 0x03, 0x04,
                                  0x05, 0x06, 0x07, 0x08, 0x11, 0x12, 0x13, 0x14,
                                  0x15, 0x16, 0x17, 0x18, 0x00, 0x01, 0x86, 0xA0});
  CHECK(slice(f, kStack, 24) == a);
  CHECK(tail(f, kStack + 24) == tail(orig, kShim));

  REQUIRE(int_push_hop(f, hop_b()) == IntPushResult::kPushed);
  REQUIRE(f.size() == orig.size() + 16 + 48);
  CHECK(be16(f, kL3 + 2) == 92 + 64);
  CHECK(test::ipv4_checksum_ok(f.data() + kL3));
  CHECK(be16(f, kUdp + 4) == 72 + 64);
  CHECK(f[kShim + 1] == 3 + 12);
  CHECK(f[kMd + 3] == 3);
  // The newest record on top: B, then A.
  CHECK(slice(f, kStack, 24) == record_bytes(hop_b()));
  CHECK(slice(f, kStack + 24, 24) == a);
  CHECK(tail(f, kStack + 48) == tail(orig, kShim));
  // Everything before the stack as after the insert, but the lengths, checksum, Length, RHC.
  for (size_t i = 0; i < kStack; ++i) {
    if (i == 16 || i == 17 || i == 24 || i == 25 || i == 38 || i == 39 || i == kShim + 1 ||
        i == kMd + 3) {
      continue;
    }
    INFO("byte " << i);
    CHECK(f[i] == after_insert[i]);
  }
}

TEST_CASE("int: parse gives the records oldest first, and the header's fields") {
  std::vector<uint8_t> f = test::roce_vector_frame();
  CHECK_FALSE(int_parse(f).has_value());  // plain RoCE: no INT
  REQUIRE(int_insert(f, 5));
  auto s = int_parse(f);
  REQUIRE(s.has_value());
  CHECK(s->nhop == 0);
  CHECK(s->hops().empty());
  CHECK(s->remaining_hops == 5);
  CHECK(s->length_words == 3);
  CHECK(s->int_bytes() == 16);

  REQUIRE(int_push_hop(f, hop_a()) == IntPushResult::kPushed);
  REQUIRE(int_push_hop(f, hop_b()) == IntPushResult::kPushed);
  s = int_parse(f);
  REQUIRE(s.has_value());
  REQUIRE(s->nhop == 2);
  const IntHopRecord& first = s->hops()[0];
  const IntHopRecord& second = s->hops()[1];
  CHECK(first.queue_id == 3);
  CHECK(first.qlen_bytes == 8'000);
  CHECK(first.egress_ts_ns == 0x0102030405060708);
  CHECK(first.tx_bytes == 0x1112131415161718);
  CHECK(first.line_rate_mbps == 100'000);
  CHECK(second.queue_id == 1);
  CHECK(second.qlen_bytes == 1'000'079 / 80 * 80);
  CHECK(second.egress_ts_ns == 0x2122232425262728);
  CHECK(second.tx_bytes == 0x3132333435363738);
  CHECK(second.line_rate_mbps == 400'000);
  CHECK(s->original_dport == 4791);
  CHECK(s->length_words == 3 + 12);
  CHECK(s->remaining_hops == 3);
  CHECK(s->int_bytes() == 16 + 48);
  CHECK(s->shim_offset == kShim);
  CHECK_FALSE(s->discard);
  CHECK_FALSE(s->hops_exceeded);
  CHECK_FALSE(s->mtu_exceeded);
  CHECK(s->ds_flags == 0);
  // Another port is not INT.
  CHECK_FALSE(int_parse(f, 5000).has_value());
  CHECK_FALSE(int_parse(f, 4791).has_value());

  // A queue longer than 24 bits of cells saturates at 2^24 - 2 (all ones means "invalid").
  IntHopRecord big = hop_a();
  big.qlen_bytes = uint64_t{1} << 40;
  REQUIRE(int_push_hop(f, big) == IntPushResult::kPushed);
  CHECK(int_parse(f)->hops()[2].qlen_bytes == uint64_t{0xFFFFFE} * 80);
}

TEST_CASE("int: E is set when the hop budget is spent, M when the frame would be too long") {
  std::vector<uint8_t> f = test::roce_vector_frame();
  REQUIRE(int_insert(f, 1));
  REQUIRE(int_push_hop(f, hop_a()) == IntPushResult::kPushed);
  const size_t len = f.size();
  CHECK(int_push_hop(f, hop_b()) == IntPushResult::kHopsExceeded);
  CHECK(f.size() == len);
  CHECK(f[kMd] == (0x20 | 0x04));  // Ver 2 | E
  CHECK(test::ipv4_checksum_ok(f.data() + kL3));
  auto s = int_parse(f);
  REQUIRE(s.has_value());
  CHECK(s->hops_exceeded);
  CHECK(s->nhop == 1);
  CHECK(s->remaining_hops == 0);
  CHECK(s->hops()[0].tx_bytes == hop_a().tx_bytes);

  // No hops allowed at all: the first push already sets E.
  std::vector<uint8_t> g = test::roce_vector_frame();
  REQUIRE(int_insert(g, 0));
  CHECK(int_push_hop(g, hop_a()) == IntPushResult::kHopsExceeded);
  CHECK(int_parse(g)->hops_exceeded);

  // One byte short of room for the record: M, nothing added; with the room: pushed.
  std::vector<uint8_t> h = test::roce_vector_frame();
  REQUIRE(int_insert(h, 3));
  const size_t before = h.size();
  CHECK(int_push_hop(h, hop_a(), kIntUdpPort, before + 23) == IntPushResult::kMtuExceeded);
  CHECK(h.size() == before);
  CHECK(h[kMd] == (0x20 | 0x02));
  CHECK(int_parse(h)->mtu_exceeded);
  CHECK(int_parse(h)->remaining_hops == 3);
  CHECK(int_push_hop(h, hop_a(), kIntUdpPort, before + 24) == IntPushResult::kPushed);
  CHECK(test::ipv4_checksum_ok(h.data() + kL3));

  // At most 42 hops: the shim's Length counts 3 + 6 x 42 = 255 words.
  std::vector<uint8_t> full = test::roce_vector_frame();
  CHECK_FALSE(int_insert(full, 43));
  REQUIRE(int_insert(full, 42));
  for (int i = 0; i < 42; ++i) REQUIRE(int_push_hop(full, hop_a()) == IntPushResult::kPushed);
  CHECK(full[kShim + 1] == 255);
  CHECK(int_push_hop(full, hop_a()) == IntPushResult::kHopsExceeded);
  CHECK(int_parse(full)->nhop == 42);
}

TEST_CASE("int: strip restores the original frame byte for byte, with a valid ICRC") {
  std::vector<std::vector<uint8_t>> frames = {test::roce_vector_frame(),
                                              built(0, false, 0),  // 58 bytes padded to 60
                                              built(1, true, 0),   // a VLAN tag, a pad byte
                                              built(1000, false, 0x5A3C)};  // a PPCID
  for (size_t k = 0; k < frames.size(); ++k) {
    const std::vector<uint8_t>& orig = frames[k];
    REQUIRE(icrc_ok(orig));
    const size_t l3 = l3_of(orig);
    for (int hops = 0; hops <= 3; ++hops) {
      INFO("frame " << k << ", " << hops << " hops");
      std::vector<uint8_t> f = orig;
      REQUIRE(int_insert(f, 2));
      CHECK(test::ipv4_checksum_ok(f.data() + l3));
      CHECK(be16(f, l3 + 20 + 6) == be16(orig, l3 + 20 + 6));  // UDP checksum / PPCID kept
      for (int i = 0; i < hops; ++i) {
        const IntPushResult r = int_push_hop(f, i % 2 ? hop_b() : hop_a());
        CHECK(r == (i < 2 ? IntPushResult::kPushed : IntPushResult::kHopsExceeded));
        CHECK(test::ipv4_checksum_ok(f.data() + l3));
      }
      CHECK(f.size() == orig.size() + 16 + 24 * std::min(hops, 2));
      CHECK_FALSE(icrc_ok(f));  // the ICRC covers what INT changed
      const auto parsed = int_parse(f);
      REQUIRE(parsed.has_value());
      IntStack taken;
      REQUIRE(int_strip(f, kIntUdpPort, &taken));  // what it removed: what int_parse read
      CHECK(taken.nhop == parsed->nhop);
      CHECK(taken.length_words == parsed->length_words);
      for (size_t h = 0; h < taken.nhop; ++h) {
        CHECK(taken.hops()[h].tx_bytes == parsed->hops()[h].tx_bytes);
        CHECK(taken.hops()[h].egress_ts_ns == parsed->hops()[h].egress_ts_ns);
      }
      CHECK(f == orig);
      CHECK(icrc_ok(f));
      CHECK(test::ipv4_checksum_ok(f.data() + l3));
      CHECK_FALSE(int_strip(f));  // nothing left to strip
    }
  }
}

TEST_CASE("int: what is not a RoCE frame, or not INT of this format, is refused") {
  const std::vector<uint8_t> roce = test::roce_vector_frame();

  SECTION("insert refuses non-RoCE frames, bad headers, INT frames and port 4791") {
    std::vector<uint8_t> f = roce;
    CHECK_FALSE(int_insert(f, 5, 4791));
    f[kL3 + 10] ^= 0x01;  // a bad IPv4 checksum
    CHECK_FALSE(int_insert(f, 5));
    CHECK(f.size() == roce.size());
    f = roce;
    f[kL3 + 6] |= 0x20;  // More Fragments: a fragment has no UDP header to trust
    test::fix_ipv4_checksum(f, kL3);
    CHECK_FALSE(int_insert(f, 5));
    // UDP, but not to 4791.
    const std::vector<uint8_t> data(40, 0xAB);
    FrameSpec spec;
    spec.udp.dst_port = 1234;
    spec.payload = data;
    std::vector<uint8_t> udp(udp_frame_length(spec));
    REQUIRE(build_udp_frame(udp, spec) == udp.size());
    const std::vector<uint8_t> udp_orig = udp;
    CHECK_FALSE(int_insert(udp, 5));
    CHECK(udp == udp_orig);
    CHECK_FALSE(int_parse(udp).has_value());
    // Already INT.
    f = roce;
    REQUIRE(int_insert(f, 5));
    const std::vector<uint8_t> once = f;
    CHECK_FALSE(int_insert(f, 5));
    CHECK(f == once);
    // Not INT: push and strip leave it alone.
    f = roce;
    CHECK(int_push_hop(f, hop_a()) == IntPushResult::kNotInt);
    CHECK_FALSE(int_strip(f));
    CHECK(f == roce);
  }

  SECTION("every truncation of an INT frame is refused") {
    std::vector<uint8_t> f = roce;
    REQUIRE(int_insert(f, 5));
    REQUIRE(int_push_hop(f, hop_a()) == IntPushResult::kPushed);
    REQUIRE(int_push_hop(f, hop_b()) == IntPushResult::kPushed);
    REQUIRE(int_parse(f).has_value());
    for (size_t n = 0; n < f.size(); ++n) {
      INFO("first " << n << " bytes");
      // An exact-size copy, so that a read past it is a read past the allocation.
      std::vector<uint8_t> cut(f.begin(), f.begin() + static_cast<std::ptrdiff_t>(n));
      CHECK_FALSE(int_parse(cut).has_value());
      CHECK(int_push_hop(cut, hop_a()) == IntPushResult::kNotInt);
      CHECK_FALSE(int_strip(cut));
      CHECK(cut.size() == n);
    }
  }

  SECTION("fields of another kind or out of range are refused") {
    std::vector<uint8_t> good = roce;
    REQUIRE(int_insert(good, 5));
    REQUIRE(int_push_hop(good, hop_a()) == IntPushResult::kPushed);
    REQUIRE(int_push_hop(good, hop_b()) == IntPushResult::kPushed);
    struct Edit {
      const char* what;
      size_t at;
      uint8_t value;
    };
    const std::vector<Edit> edits = {
        {"Type 2 (INT-Destination)", kShim, 0x24},
        {"NPT 2 (an L4 header follows)", kShim, 0x18},
        {"NPT 0", kShim, 0x10},
        {"Length past the UDP payload", kShim + 1, 200},
        {"Length shorter than the INT-MD header", kShim + 1, 2},
        {"a stack of 4 words, not whole records", kShim + 1, 3 + 4},
        {"Ver 1", kMd, 0x10},
        {"Hop ML 5", kMd + 2, 5},
        {"Hop ML 0", kMd + 2, 0},
        {"more hops allowed than 42 in all", kMd + 3, 41},
        {"another instruction bitmap", kMd + 4, 0x94},
        {"another domain", kMd + 7, 0x51},
        {"another DS instruction", kMd + 8, 0x80},
    };
    for (const Edit& e : edits) {
      INFO(e.what);
      std::vector<uint8_t> f = good;
      f[e.at] = e.value;
      const std::vector<uint8_t> edited = f;
      CHECK_FALSE(int_parse(f).has_value());
      CHECK(int_push_hop(f, hop_a()) == IntPushResult::kNotInt);
      CHECK_FALSE(int_strip(f));
      CHECK(f == edited);
    }
    // A 12-word stack is two whole records: consistent, so it parses (the values are the test's).
    std::vector<uint8_t> f = good;
    f[kShim + 1] = 3 + 6;  // claims one record; the other 24 bytes then belong to the payload
    const auto s = int_parse(f);
    REQUIRE(s.has_value());
    CHECK(s->nhop == 1);
    CHECK(s->hops()[0].tx_bytes == hop_b().tx_bytes);
  }

  SECTION("random corruption never reads past the frame, and what parses is consistent") {
    std::vector<uint8_t> good = roce;
    REQUIRE(int_insert(good, 5));
    REQUIRE(int_push_hop(good, hop_a()) == IntPushResult::kPushed);
    std::mt19937 rng(2024);
    size_t parsed = 0;
    for (int i = 0; i < 20'000; ++i) {
      std::vector<uint8_t> f = good;
      const int flips = 1 + static_cast<int>(rng() % 3);
      for (int k = 0; k < flips; ++k) {
        const size_t at = kL3 + rng() % (kStack + 24 - kL3);
        f[at] = static_cast<uint8_t>(rng());
      }
      if (rng() % 2) test::fix_ipv4_checksum(f, kL3);
      f.resize(f.size() - rng() % 8);
      const auto s = int_parse(f);
      if (!s) continue;
      ++parsed;
      CHECK(s->shim_offset + s->int_bytes() <= f.size());
      CHECK(s->int_bytes() == 16u + 24u * s->nhop);
      std::vector<uint8_t> g = f;
      CHECK(int_strip(g));
      CHECK(g.size() == f.size() - s->int_bytes());
    }
    CHECK(parsed > 0);
  }
}

TEST_CASE("int: the same on an mbuf, headers moved into the headroom and back") {
  TestPool pool;
  const std::vector<uint8_t> orig = test::roce_vector_frame();
  std::vector<uint8_t> v = orig;
  rte_mbuf* m = pool.make(orig);
  auto bytes = [&] {
    const auto* p = rte_pktmbuf_mtod(m, const uint8_t*);
    return std::vector<uint8_t>(p, p + rte_pktmbuf_data_len(m));
  };
  const uint16_t headroom = rte_pktmbuf_headroom(m);
  REQUIRE(int_insert(m, 10));
  REQUIRE(int_insert(v, 10));
  CHECK(bytes() == v);
  CHECK(rte_pktmbuf_pkt_len(m) == orig.size() + 16);
  CHECK(rte_pktmbuf_headroom(m) == headroom - 16);
  // Pushes while the headroom lasts, then M.
  size_t pushed = 0;
  while (rte_pktmbuf_headroom(m) >= 24) {
    REQUIRE(int_push_hop(m, hop_a()) == IntPushResult::kPushed);
    REQUIRE(int_push_hop(v, hop_a()) == IntPushResult::kPushed);
    ++pushed;
    CHECK(bytes() == v);
  }
  CHECK(pushed == (headroom - 16u) / 24);
  CHECK(int_push_hop(m, hop_b()) == IntPushResult::kMtuExceeded);
  const auto s = int_parse(m);
  REQUIRE(s.has_value());
  CHECK(s->nhop == pushed);
  CHECK(s->mtu_exceeded);
  CHECK(test::ipv4_checksum_ok(bytes().data() + kL3));
  REQUIRE(int_strip(m));
  CHECK(bytes() == orig);  // M lived in the stripped header
  CHECK(rte_pktmbuf_headroom(m) == headroom);
  CHECK(verify_icrc(m, kL3, orig.size() - kL3, nullptr));
  CHECK_FALSE(int_parse(m).has_value());
  CHECK_FALSE(int_strip(m));
  CHECK(int_push_hop(m, hop_a()) == IntPushResult::kNotInt);
  rte_pktmbuf_free(m);

  // No headroom for the header: insert refuses, the frame unchanged.
  rte_mbuf* tight = pool.alloc();
  tight->data_off = 15;
  char* p = rte_pktmbuf_append(tight, static_cast<uint16_t>(orig.size()));
  REQUIRE(p != nullptr);
  std::copy(orig.begin(), orig.end(), p);
  CHECK_FALSE(int_insert(tight, 5));
  const auto* t = rte_pktmbuf_mtod(tight, const uint8_t*);
  CHECK(std::vector<uint8_t>(t, t + rte_pktmbuf_data_len(tight)) == orig);
  rte_pktmbuf_free(tight);
  CHECK(pool.whole());
}

TEST_CASE("int: a source makes headroom for the header and every hop, when the buffer has it") {
  TestPool pool;
  const std::vector<uint8_t> orig = test::roce_vector_frame();
  rte_mbuf* m = pool.make(orig);
  const size_t head = rte_pktmbuf_headroom(m);
  CHECK(int_make_headroom(m, head - 1));  // already there: nothing moves
  CHECK(rte_pktmbuf_headroom(m) == head);
  const size_t need = kIntHeaderBytes + 6 * kIntHopBytes;  // 160: more than the default 128
  REQUIRE(need > head);
  REQUIRE(int_make_headroom(m, need));
  CHECK(rte_pktmbuf_headroom(m) == need);
  const auto* p = rte_pktmbuf_mtod(m, const uint8_t*);
  CHECK(std::vector<uint8_t>(p, p + rte_pktmbuf_data_len(m)) == orig);
  REQUIRE(int_insert(m, 6));
  for (int i = 0; i < 6; ++i) CHECK(int_push_hop(m, hop_a()) == IntPushResult::kPushed);
  CHECK(int_parse(m)->nhop == 6);
  REQUIRE(int_strip(m));
  p = rte_pktmbuf_mtod(m, const uint8_t*);
  CHECK(std::vector<uint8_t>(p, p + rte_pktmbuf_data_len(m)) == orig);
  // More than the buffer holds: refused, unchanged.
  const size_t before = rte_pktmbuf_headroom(m);
  CHECK_FALSE(int_make_headroom(m, before + (m->buf_len - before - orig.size()) + 1));
  CHECK(rte_pktmbuf_headroom(m) == before);
  // A shared buffer is never moved.
  rte_mbuf_refcnt_update(m, 1);
  CHECK_FALSE(int_make_headroom(m, before + 8));
  rte_mbuf_refcnt_update(m, -1);
  rte_pktmbuf_free(m);
  CHECK(pool.whole());
}

TEST_CASE("int: inside a leaf overlay, a hop pushes on the inner packet's INT") {
  TestPool pool;
  const std::vector<uint8_t> orig = test::roce_vector_frame();
  std::vector<uint8_t> plain = orig;
  REQUIRE(int_insert(plain, 5));
  REQUIRE(int_push_hop(plain, hop_a()) == IntPushResult::kPushed);
  auto bytes = [](const rte_mbuf* m) {
    const auto* p = rte_pktmbuf_mtod(m, const uint8_t*);
    return std::vector<uint8_t>(p, p + rte_pktmbuf_data_len(m));
  };
  struct Overlay {
    const char* name;
    size_t outer;  // bytes before the inner frame
    bool (*wrap)(rte_mbuf*);
    bool (*unwrap)(rte_mbuf*);
  };
  const Overlay overlays[] = {
      {"conga", 50,
       [](rte_mbuf* m) {
         return conga_encapsulate(m, CongaTunnel{1, 2, 3}, {});
       },
       conga_decapsulate},
      {"conweave", 58,
       [](rte_mbuf* m) {
         return conweave_encapsulate(m, VxlanTunnel{1, 2, 3}, {}, 4, 0x77);
       },
       conweave_decapsulate},
  };
  for (const Overlay& o : overlays) {
    SECTION(o.name) {
      // The source NIC inserted INT and the first hop pushed, then the leaf wrapped the frame;
      // the mbuf has the headroom a source makes (int_make_headroom) for the overlay and hops.
      rte_mbuf* m = pool.make(plain);
      REQUIRE(int_make_headroom(m, o.outer + 2 * kIntHopBytes));
      REQUIRE(o.wrap(m));
      const std::vector<uint8_t> wrapped = bytes(m);
      REQUIRE(wrapped.size() == plain.size() + o.outer);
      REQUIRE(vxlan_inner_frame_offset(wrapped.data(), wrapped.size()) == o.outer);
      REQUIRE(int_parse(m).has_value());
      CHECK(int_parse(m)->nhop == 1);
      // A spine pushes: the inner packet as it would be without the overlay, the outer lengths
      // 24 bytes longer, the outer checksum still valid; the vector form does the same.
      REQUIRE(int_push_hop(m, hop_b()) == IntPushResult::kPushed);
      std::vector<uint8_t> v = wrapped;
      REQUIRE(int_push_hop(v, hop_b()) == IntPushResult::kPushed);
      const std::vector<uint8_t> b = bytes(m);
      CHECK(b == v);
      std::vector<uint8_t> two = plain;
      REQUIRE(int_push_hop(two, hop_b()) == IntPushResult::kPushed);
      CHECK(tail(b, o.outer) == two);
      CHECK(be16(b, 16) == be16(wrapped, 16) + 24);  // outer IPv4 total length
      CHECK(be16(b, 38) == be16(wrapped, 38) + 24);  // outer UDP length
      CHECK(test::ipv4_checksum_ok(b.data() + 14));
      CHECK(slice(b, 18, 6) == slice(wrapped, 18, 6));    // outer IPv4: id, flags, TTL, proto
      CHECK(slice(b, 26, 12) == slice(wrapped, 26, 12));  // addresses, UDP ports
      const auto s = int_parse(m);
      REQUIRE(s.has_value());
      REQUIRE(s->nhop == 2);
      CHECK(s->hop[1].egress_ts_ns == hop_b().egress_ts_ns);
      CHECK(s->shim_offset == kShim);  // in the inner frame
      // Too long for the egress MTU: M set in the inner header, nothing pushed.
      CHECK(int_push_hop(m, hop_a(), kIntUdpPort, b.size() + 23) == IntPushResult::kMtuExceeded);
      CHECK(int_parse(m)->mtu_exceeded);
      // The destination leaf unwraps: the inner frame is the plain one's, its ICRC valid after
      // the NIC strips the INT.
      REQUIRE(o.unwrap(m));
      std::vector<uint8_t> inner = bytes(m);
      inner[kMd] &= static_cast<uint8_t>(~0x02);  // M
      CHECK(inner == two);
      REQUIRE(int_strip(m));
      CHECK(bytes(m) == orig);
      CHECK(verify_icrc(m, kL3, orig.size() - kL3, nullptr));
      rte_pktmbuf_free(m);
    }
  }
  // As fabric_emu's NICs build them: the headers in one segment, the payload chained behind.
  {
    ParsedPacket pp;
    REQUIRE(PacketParser().parse(plain.data(), plain.size(), pp) == ParseStatus::kOk);
    const auto cut = static_cast<long>(pp.payload_offset);
    rte_mbuf* h = pool.make(std::vector<uint8_t>(plain.begin(), plain.begin() + cut));
    REQUIRE(rte_pktmbuf_chain(
                h, pool.make(std::vector<uint8_t>(plain.begin() + cut, plain.end()))) == 0);
    REQUIRE(int_make_headroom(h, 50 + kIntHopBytes));
    REQUIRE(overlays[0].wrap(h));
    REQUIRE(int_push_hop(h, hop_b()) == IntPushResult::kPushed);
    CHECK(int_parse(h)->nhop == 2);
    CHECK(rte_pktmbuf_pkt_len(h) == plain.size() + 50 + kIntHopBytes);
    CHECK(be16(bytes(h), 16) == rte_pktmbuf_pkt_len(h) - 14);  // outer IPv4 total length
    REQUIRE(conga_decapsulate(h));
    std::vector<uint8_t> two = plain;
    REQUIRE(int_push_hop(two, hop_b()) == IntPushResult::kPushed);
    std::vector<uint8_t> all(rte_pktmbuf_pkt_len(h));
    const auto* r = static_cast<const uint8_t*>(rte_pktmbuf_read(h, 0, all.size(), all.data()));
    REQUIRE(r != nullptr);
    CHECK(std::vector<uint8_t>(r, r + all.size()) == two);
    rte_pktmbuf_free(h);
  }
  // A ConWeave control message and plain VXLAN are not overlays with an inner frame.
  rte_mbuf* c = pool.alloc();
  const uint8_t macs[12] = {};
  ConweaveWire clear;
  clear.message = ConweaveMessage::kClear;
  clear.flow_key = 0x0123456789ABCDEF;
  REQUIRE(conweave_control(c, macs, VxlanTunnel{1, 2, 3}, 0, clear));
  CHECK(vxlan_inner_frame_offset(rte_pktmbuf_mtod(c, const uint8_t*), rte_pktmbuf_data_len(c)) ==
        0);
  CHECK(int_push_hop(c, hop_a()) == IntPushResult::kNotInt);
  rte_pktmbuf_free(c);
  CHECK(pool.whole());
}
