#include "dataplane/wire/ipv4_ttl.h"

#include <catch2/catch.hpp>

#include <random>
#include <vector>

#include "dataplane/wire/packet_parser.h"
#include "tests/support/roce_vector.h"

using namespace spraynet;

namespace {

// Full RFC 791 checksum of a header whose checksum field is taken as zero.
uint16_t full_checksum(const std::vector<uint8_t>& h) {
  uint32_t sum = 0;
  for (size_t i = 0; i < h.size(); i += 2) {
    if (i == 10) continue;
    sum += (uint32_t{h[i]} << 8) | h[i + 1];
  }
  while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
  return static_cast<uint16_t>(~sum);
}

void set_checksum(std::vector<uint8_t>& h, uint16_t c) {
  h[10] = uint8_t(c >> 8);
  h[11] = uint8_t(c);
}
uint16_t checksum_of(const std::vector<uint8_t>& h) {
  return uint16_t(h[10] << 8 | h[11]);
}

std::vector<uint8_t> random_header(std::mt19937& rng) {
  const unsigned ihl = 5 + rng() % 11;  // options too: the checksum covers them
  std::vector<uint8_t> h(ihl * 4);
  for (auto& b : h) b = static_cast<uint8_t>(rng());
  h[0] = uint8_t(0x40 | ihl);
  h[8] = static_cast<uint8_t>(2 + rng() % 254);  // forwardable TTL
  set_checksum(h, full_checksum(h));
  return h;
}

// Sets the IP id so that the header's one's-complement sum (checksum field zero) is 0xFFFF,
// i.e. its correct checksum is 0x0000: x + ~x = 0xFFFF in one's complement.
void force_zero_checksum(std::vector<uint8_t>& h) {
  h[4] = h[5] = 0;
  const uint16_t rest = static_cast<uint16_t>(~full_checksum(h));  // sum without the id
  const uint16_t id = static_cast<uint16_t>(~rest);
  h[4] = uint8_t(id >> 8);
  h[5] = uint8_t(id);
  REQUIRE(full_checksum(h) == 0x0000);
}

// RFC 1141's update, HC' = HC + m + ~m' (one's complement): what eqn. 3 exists to fix.
uint16_t rfc1141_update(uint16_t hc, uint16_t m, uint16_t m_new) {
  uint32_t sum = uint32_t{hc} + m + static_cast<uint16_t>(~m_new);
  while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
  return static_cast<uint16_t>(sum);
}

}  // namespace

TEST_CASE("the incremental checksum equals a full recomputation over random headers") {
  std::mt19937 rng(1624);
  for (int i = 0; i < 200'000; ++i) {
    std::vector<uint8_t> h = random_header(rng);
    const uint8_t ttl = h[8];
    std::vector<uint8_t> before = h;
    REQUIRE(decrement_ttl(h.data()) == TtlVerdict::kForwarded);
    REQUIRE(h[8] == ttl - 1);
    REQUIRE(checksum_of(h) == full_checksum(h));
    // Nothing but TTL and checksum changed.
    before[8] = h[8];
    before[10] = h[10];
    before[11] = h[11];
    REQUIRE(before == h);
  }
}

TEST_CASE("checksum edge cases: results of 0x0000, and 0x0000 to start from") {
  std::mt19937 rng(7);
  int rfc1141_wrong = 0;
  for (int i = 0; i < 2000; ++i) {
    // After the decrement the right checksum is 0x0000.
    std::vector<uint8_t> h = random_header(rng);
    --h[8];
    force_zero_checksum(h);
    ++h[8];
    set_checksum(h, full_checksum(h));
    const uint16_t m = uint16_t(h[8] << 8 | h[9]);
    const uint16_t hc = checksum_of(h);
    REQUIRE(decrement_ttl(h.data()) == TtlVerdict::kForwarded);
    REQUIRE(checksum_of(h) == 0x0000);
    rfc1141_wrong += rfc1141_update(hc, m, uint16_t(h[8] << 8 | h[9])) == 0xFFFF;

    // Before the decrement the checksum is 0x0000.
    std::vector<uint8_t> z = random_header(rng);
    force_zero_checksum(z);
    set_checksum(z, 0x0000);
    REQUIRE(decrement_ttl(z.data()) == TtlVerdict::kForwarded);
    REQUIRE(checksum_of(z) == full_checksum(z));
  }
  // The cases are the ones that matter: the older formula gets every one of them wrong.
  CHECK(rfc1141_wrong == 2000);
}

TEST_CASE("TTL 0 and 1 expire and leave the header untouched") {
  std::mt19937 rng(3);
  for (uint8_t ttl : {0, 1}) {
    std::vector<uint8_t> h = random_header(rng);
    h[8] = ttl;
    set_checksum(h, full_checksum(h));
    const std::vector<uint8_t> before = h;
    CHECK(decrement_ttl(h.data()) == TtlVerdict::kExpired);
    CHECK(h == before);
  }
  std::vector<uint8_t> h = random_header(rng);
  h[8] = 2;
  set_checksum(h, full_checksum(h));
  CHECK(decrement_ttl(h.data()) == TtlVerdict::kForwarded);
  CHECK(h[8] == 1);
  CHECK(decrement_ttl(h.data()) == TtlVerdict::kExpired);  // the next hop would drop it
  h[8] = 255;
  set_checksum(h, full_checksum(h));
  CHECK(decrement_ttl(h.data()) == TtlVerdict::kForwarded);
  CHECK(h[8] == 254);
  CHECK(checksum_of(h) == full_checksum(h));
}

TEST_CASE("a forwarded RoCE packet still parses, with its IP checksum and ICRC valid") {
  std::vector<uint8_t> frame = test::roce_vector_frame();
  uint8_t* ip = frame.data() + test::kVectorL3Offset;
  REQUIRE(decrement_ttl(ip) == TtlVerdict::kForwarded);
  CHECK(ip[8] == 63);
  CHECK(ip[10] == 0x15);  // 0x145b + 0x0100: the TTL word dropped by 0x0100
  CHECK(ip[11] == 0x5b);
  ParseOptions options;
  options.verify_ip_checksum = true;
  options.verify_icrc = true;  // TTL is masked out of the ICRC
  ParsedPacket p;
  CHECK(PacketParser(options).parse(frame.data(), frame.size(), p) == ParseStatus::kOk);
  CHECK(p.ttl == 63);
}
