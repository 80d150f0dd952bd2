#include "dataplane/forwarding/flow_hasher.h"

#include <rte_hash_crc.h>

#include <catch2/catch.hpp>

#include "tests/support/reference_crc.h"

#include <random>
#include <vector>

#include "dataplane/wire/flow_key.h"
#include "dataplane/wire/packet_parser.h"
#include "tests/support/roce_vector.h"

using namespace spraynet;

namespace {

uint32_t bitwise_crc32c_dpdk(const std::vector<uint8_t>& bytes, uint32_t init) {
  return test::reference_crc32c_dpdk(bytes, init);
}

uint32_t bitwise_crc32_zlib(const std::vector<uint8_t>& bytes, uint32_t prev) {
  return test::reference_crc32_zlib(bytes, prev);
}

// The canonical key, spelled out independently of FlowHasher::key_bytes.
std::vector<uint8_t> canonical(uint32_t sip, uint32_t dip, uint16_t sport, uint16_t dport,
                               uint8_t proto, std::optional<uint32_t> qp) {
  std::vector<uint8_t> v = {uint8_t(sip >> 24),
                            uint8_t(sip >> 16),
                            uint8_t(sip >> 8),
                            uint8_t(sip),
                            uint8_t(dip >> 24),
                            uint8_t(dip >> 16),
                            uint8_t(dip >> 8),
                            uint8_t(dip),
                            uint8_t(sport >> 8),
                            uint8_t(sport),
                            uint8_t(dport >> 8),
                            uint8_t(dport),
                            proto};
  if (qp) {
    v.push_back(uint8_t(*qp >> 16));
    v.push_back(uint8_t(*qp >> 8));
    v.push_back(uint8_t(*qp));
  }
  return v;
}

FlowKey key_of(uint32_t sip, uint32_t dip, uint16_t sport, uint16_t dport, uint8_t proto,
               uint32_t qp) {
  FlowKey k;
  k.src_ip = sip;
  k.dst_ip = dip;
  k.src_port = sport;
  k.dst_port = dport;
  k.proto_and_qp = (uint32_t{proto} << 24) | (qp & 0xFFFFFF);
  return k;
}

}  // namespace

TEST_CASE("the reference CRCs reproduce the published check values") {
  const std::vector<uint8_t> check = {'1', '2', '3', '4', '5', '6', '7', '8', '9'};
  // CRC-32C/iSCSI = ~crc(init 0xFFFFFFFF); CRC-32/IEEE = zlib's crc32(0, ...).
  CHECK((bitwise_crc32c_dpdk(check, 0xFFFFFFFF) ^ 0xFFFFFFFF) == 0xE3069283);
  CHECK(bitwise_crc32_zlib(check, 0) == 0xCBF43926);
}

TEST_CASE("algorithm names parse and print") {
  CHECK(parse_hash_algorithm("crc32c") == HashAlgorithm::kCrc32c);
  CHECK(parse_hash_algorithm("crc32") == HashAlgorithm::kCrc32);
  CHECK_FALSE(parse_hash_algorithm("CRC32").has_value());
  CHECK_FALSE(parse_hash_algorithm("").has_value());
  CHECK(to_string(HashAlgorithm::kCrc32c) == "crc32c");
  CHECK(to_string(HashAlgorithm::kCrc32) == "crc32");
}

TEST_CASE("the key is 13 bytes in network order, 16 with the DestQP") {
  const FlowKey k = key_of(0x0A000001, 0xC0A80102, 0xC123, 4791, 17, 0xABCDEF);
  uint8_t out[FlowHasher::kKeyBytesWithQp] = {};
  FlowHasher five_tuple({HashAlgorithm::kCrc32c, 0, false});
  REQUIRE(five_tuple.key_bytes(k, out) == 13);
  CHECK(std::vector<uint8_t>(out, out + 13) == std::vector<uint8_t>{0x0A, 0x00, 0x00, 0x01, 0xC0,
                                                                    0xA8, 0x01, 0x02, 0xC1, 0x23,
                                                                    0x12, 0xB7, 0x11});
  FlowHasher with_qp({HashAlgorithm::kCrc32c, 0, true});
  REQUIRE(with_qp.key_bytes(k, out) == 16);
  CHECK(out[13] == 0xAB);
  CHECK(out[14] == 0xCD);
  CHECK(out[15] == 0xEF);
}

TEST_CASE("hash equals the bitwise CRC of the canonical bytes, both algorithms, any seed") {
  std::mt19937 rng(2024);
  for (uint32_t seed : {0u, 1u, 0xFFFFFFFFu, 0xDEADBEEFu, static_cast<uint32_t>(rng())}) {
    for (bool with_qp : {false, true}) {
      FlowHasher c({HashAlgorithm::kCrc32c, seed, with_qp});
      FlowHasher z({HashAlgorithm::kCrc32, seed, with_qp});
      for (int i = 0; i < 2000; ++i) {
        const uint32_t sip = rng(), dip = rng(), qp = rng() & 0xFFFFFF;
        const uint16_t sport = static_cast<uint16_t>(rng()), dport = static_cast<uint16_t>(rng());
        const uint8_t proto = static_cast<uint8_t>(rng());
        const FlowKey k = key_of(sip, dip, sport, dport, proto, qp);
        const auto bytes =
            canonical(sip, dip, sport, dport, proto, with_qp ? std::optional(qp) : std::nullopt);
        REQUIRE(c.hash(k) == bitwise_crc32c_dpdk(bytes, seed));
        // and DPDK's own rte_hash_crc over the key bytes (what hash() called before it made the
        // words in registers).
        alignas(8) uint8_t kb[FlowHasher::kKeyBytesWithQp];
        const auto len = static_cast<uint32_t>(c.key_bytes(k, kb));
        REQUIRE(c.hash(k) == rte_hash_crc(kb, len, seed));
        REQUIRE(z.hash(k) == bitwise_crc32_zlib(bytes, seed));
      }
    }
  }
}

TEST_CASE("seed, algorithm and DestQP each change the hash; the same seed reproduces it") {
  const FlowKey k = key_of(0x0A000001, 0x0A000002, 0xC123, 4791, 17, 0x11);
  const uint32_t base = FlowHasher({HashAlgorithm::kCrc32c, 7, false}).hash(k);
  CHECK(FlowHasher({HashAlgorithm::kCrc32c, 7, false}).hash(k) == base);  // polarization
  CHECK(FlowHasher({HashAlgorithm::kCrc32c, 8, false}).hash(k) != base);
  CHECK(FlowHasher({HashAlgorithm::kCrc32, 7, false}).hash(k) != base);
  CHECK(FlowHasher({HashAlgorithm::kCrc32c, 7, true}).hash(k) != base);
  // Without dest_qp_in_key the QP bits of the key are ignored.
  const FlowKey other_qp = key_of(0x0A000001, 0x0A000002, 0xC123, 4791, 17, 0x12);
  CHECK(FlowHasher({HashAlgorithm::kCrc32c, 7, false}).hash(other_qp) == base);
  CHECK(FlowHasher({HashAlgorithm::kCrc32c, 7, true}).hash(other_qp) !=
        FlowHasher({HashAlgorithm::kCrc32c, 7, true}).hash(k));
}

TEST_CASE("a parsed RoCE packet hashes over its 5-tuple and QP as on the wire") {
  const auto frame = test::roce_vector_frame();
  ParsedPacket p;
  REQUIRE(PacketParser().parse(frame.data(), frame.size(), p) == ParseStatus::kOk);
  const uint32_t seed = 0x5EED;
  const auto five = canonical(0x0A000001, 0x0A000002, 0xC123, 4791, 17, std::nullopt);
  const auto with_qp = canonical(0x0A000001, 0x0A000002, 0xC123, 4791, 17, 0x11);
  CHECK(FlowHasher({HashAlgorithm::kCrc32c, seed, false}).hash(make_flow_key(p, false)) ==
        bitwise_crc32c_dpdk(five, seed));
  CHECK(FlowHasher({HashAlgorithm::kCrc32c, seed, true}).hash(make_flow_key(p, true)) ==
        bitwise_crc32c_dpdk(with_qp, seed));
  CHECK(FlowHasher({HashAlgorithm::kCrc32, seed, true}).hash(make_flow_key(p, true)) ==
        bitwise_crc32_zlib(with_qp, seed));
}
