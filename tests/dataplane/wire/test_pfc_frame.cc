#include "dataplane/wire/pfc_frame.h"

#include <rte_mbuf.h>
#include <catch2/catch.hpp>

#include <vector>

#include "dataplane/wire/packet_parser.h"
#include "tests/support/dpdk_test.h"

using namespace spraynet;

namespace {
const uint8_t kSrc[6] = {0x02, 0, 0, 0, 0, 0x0A};
}

TEST_CASE("PFC frame layout on the wire") {
  PfcFrame p;
  p.class_enable = 0b00001000;  // priority 3
  p.quanta[3] = 0xFFFF;
  std::vector<uint8_t> f(kPfcFrameLength);
  build_pfc_frame(f.data(), kSrc, p);
  const std::vector<uint8_t> head = {0x01, 0x80, 0xC2, 0x00, 0x00, 0x01,  // dst
                                     0x02, 0x00, 0x00, 0x00, 0x00, 0x0A,  // src
                                     0x88, 0x08, 0x01, 0x01,              // MAC control, PFC
                                     0x00, 0x08};                         // class-enable vector
  CHECK(std::vector<uint8_t>(f.begin(), f.begin() + 18) == head);
  CHECK(f[18 + 6] == 0xFF);  // time for priority 3
  CHECK(f[18 + 7] == 0xFF);
  for (size_t i = 34; i < f.size(); ++i) CHECK(f[i] == 0);
}

TEST_CASE("PFC frame round trip with quanta, through an mbuf and the packet parser") {
  spraynet::test::TestPool pool(63);
  PfcFrame p;
  p.class_enable = 0b10100101;
  p.quanta = {0xFFFF, 0, 1, 0, 0, 0x1234, 0, 0};  // priority 2 enabled with time 1; 5 with 0x1234
  p.quanta[7] = 0;                                // enabled with 0: XON for priority 7
  rte_mbuf* m = pool.alloc();
  REQUIRE(build_pfc_frame(m, kSrc, p));
  CHECK(rte_pktmbuf_data_len(m) == kPfcFrameLength);

  ParsedPacket parsed;
  REQUIRE(PacketParser().parse(m, parsed) == ParseStatus::kOk);
  CHECK(parsed.kind == PacketKind::kMacControl);

  PfcFrame back;
  REQUIRE(parse_pfc_frame(rte_pktmbuf_mtod(m, const uint8_t*), rte_pktmbuf_data_len(m), back) ==
          PfcParseStatus::kOk);
  CHECK(back == p);
  CHECK(back.is_xon(7));
  CHECK_FALSE(back.is_xon(5));
  CHECK_FALSE(back.enabled(1));
  rte_pktmbuf_free(m);
  CHECK(pool.whole());
}

TEST_CASE("PFC parse rejects what is not a PFC frame, never reading past the data") {
  PfcFrame p;
  p.class_enable = 1;
  p.quanta[0] = 100;
  std::vector<uint8_t> good(kPfcFrameLength);
  build_pfc_frame(good.data(), kSrc, p);
  PfcFrame out;
  for (size_t len = 0; len < 34; ++len) {
    std::vector<uint8_t> cut(good.begin(), good.begin() + static_cast<long>(len));
    CHECK(parse_pfc_frame(cut.data(), cut.size(), out) == PfcParseStatus::kTooShort);
  }
  auto pause = good;
  pause[14] = 0x00;  // opcode 0x0001: 802.3x PAUSE
  CHECK(parse_pfc_frame(pause.data(), pause.size(), out) == PfcParseStatus::kNotPfc);
  auto ip = good;
  ip[12] = 0x08;
  ip[13] = 0x00;
  CHECK(parse_pfc_frame(ip.data(), ip.size(), out) == PfcParseStatus::kNotMacControl);
  auto dst = good;
  dst[5] = 0x02;
  CHECK(parse_pfc_frame(dst.data(), dst.size(), out) == PfcParseStatus::kBadDestination);
  auto reserved = good;
  reserved[16] = 0x01;
  CHECK(parse_pfc_frame(reserved.data(), reserved.size(), out) == PfcParseStatus::kReservedBitsSet);
}

TEST_CASE("pause quanta are 512 bit times at the link rate") {
  CHECK(pfc_quantum_ns(100.0) == Approx(5.12));
  CHECK(pfc_quantum_ns(400.0) == Approx(1.28));
  CHECK(pfc_quantum_ns(25.0) == Approx(20.48));
  CHECK(pfc_quanta_to_ns(0xFFFF, 100.0) == 335539);  // 65535 * 5.12 = 335539.2
  CHECK(pfc_quanta_to_ns(1000, 400.0) == 1280);
  CHECK(pfc_ns_to_quanta(5120, 100.0) == 1000);
  CHECK(pfc_ns_to_quanta(5121, 100.0) == 1001);  // rounds up: the pause must cover the time
  CHECK(pfc_ns_to_quanta(10'000'000, 100.0) == 0xFFFF);
}
