#include "dataplane/wire/icrc.h"

#include <zlib.h>

#include <catch2/catch.hpp>
#include <random>

#include <vector>

#include "dataplane/wire/packet_builder.h"
#include "tests/support/ipv4_checksum.h"
#include "tests/support/roce_vector.h"

using namespace spraynet;
using spraynet::test::kVectorL3Offset;
using spraynet::test::roce_vector_frame;

namespace {

void fix_ip_checksum(std::vector<uint8_t>& f) {
  test::fix_ipv4_checksum(f, kVectorL3Offset);
}

size_t icrc_span(const std::vector<uint8_t>& f) {
  return f.size() - kVectorL3Offset - 4;
}

}  // namespace

TEST_CASE("ICRC of the DESIGN.md test vector is 0x405566EF, sent ef 66 55 40") {
  auto f = roce_vector_frame();
  CHECK(compute_icrc(f.data() + kVectorL3Offset, icrc_span(f)) == 0x405566EFu);
  CHECK(verify_icrc(f.data() + kVectorL3Offset, f.size() - kVectorL3Offset));

  std::vector<uint8_t> copy = f;
  copy[copy.size() - 4] = copy[copy.size() - 3] = copy[copy.size() - 2] = copy[copy.size() - 1] = 0;
  write_icrc(copy.data() + kVectorL3Offset, icrc_span(copy));
  CHECK(copy == f);
}

TEST_CASE("the builder produces the test vector byte for byte") {
  std::vector<uint8_t> payload;
  for (uint8_t b = 0; b < 32; ++b) payload.push_back(b);
  FrameSpec fs;
  fs.ip.src = 0x0A000001;
  fs.ip.dst = 0x0A000002;
  fs.ip.id = 0x1234;
  fs.ip.ttl = 64;
  fs.udp.src_port = 0xC123;
  fs.payload = payload;
  RoceSpec r;
  r.opcode = opcode::kRcWriteOnly;
  r.dest_qp = 0x11;
  r.psn = 0x100;
  r.ack_req = true;
  r.virtual_address = 0x00007f0000001000ull;
  r.rkey = 0x1234abcd;
  r.dma_length = 32;
  std::vector<uint8_t> out(256);
  const size_t len = build_roce_frame(out, fs, r);
  out.resize(len);
  CHECK(out == roce_vector_frame());
}

TEST_CASE("ICRC is invariant under TOS, TTL, FECN, BECN and UDP checksum changes") {
  auto f = roce_vector_frame();
  uint8_t* ip = f.data() + kVectorL3Offset;
  ip[1] = 0x6B;           // TOS
  ip[8] = 3;              // TTL
  ip[20 + 8 + 4] = 0xC0;  // BTH byte 4: FECN | BECN
  fix_ip_checksum(f);
  CHECK(compute_icrc(ip, icrc_span(f)) == 0x405566EFu);
  CHECK(verify_icrc(ip, f.size() - kVectorL3Offset));

  ip[20 + 6] = 0xAB;  // a PPCID in the UDP checksum
  ip[20 + 7] = 0xCD;
  CHECK(verify_icrc(ip, f.size() - kVectorL3Offset));
}

TEST_CASE("ICRC changes with every covered field") {
  const auto base = roce_vector_frame();
  // Covered: IP id, flags, protocol, addresses, UDP ports and length, BTH except byte 4,
  // RETH, payload. Flip one bit in each covered byte and expect a different ICRC.
  const std::vector<size_t> masked = {1, 8, 10, 11, 26, 27, 32};
  for (size_t off = 0; off < base.size() - kVectorL3Offset - 4; ++off) {
    bool is_masked = false;
    for (size_t m : masked) is_masked |= (m == off);
    auto f = base;
    f[kVectorL3Offset + off] ^= 0x01;
    INFO("byte " << off << " of the IP datagram");
    CHECK(verify_icrc(f.data() + kVectorL3Offset, f.size() - kVectorL3Offset) == is_masked);
  }
}

TEST_CASE("crc32_combine_with_op is zlib's crc32_combine_op, for every length and CRC") {
  std::mt19937_64 rng(20261202);
  size_t wrong = 0;
  for (int i = 0; i < 200000; ++i) {
    const auto len = static_cast<z_off_t>(i < 10000 ? i : rng() % (1u << 20));
    const auto op = static_cast<uint32_t>(crc32_combine_gen(len));
    uint32_t a = static_cast<uint32_t>(rng()), b = static_cast<uint32_t>(rng());
    if (i % 7 == 0) a = 0;
    if (i % 11 == 0) a = 0xFFFFFFFF;
    if (i % 13 == 0) b = 0;
    wrong += crc32_combine_with_op(a, b, op) != static_cast<uint32_t>(crc32_combine_op(a, b, op));
  }
  CHECK(wrong == 0);
  // And what it is for: the CRC of A then B from the two CRCs.
  const std::vector<uint8_t> ab{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
  const auto crc = [](const uint8_t* d, size_t n) {
    return static_cast<uint32_t>(crc32(0, d, static_cast<uInt>(n)));
  };
  for (size_t cut = 0; cut <= ab.size(); ++cut) {
    const uint32_t combined =
        crc32_combine_with_op(crc(ab.data(), cut), crc(ab.data() + cut, ab.size() - cut),
                              static_cast<uint32_t>(crc32_combine_gen(
                                  static_cast<z_off_t>(ab.size() - cut))));
    CHECK(combined == crc(ab.data(), ab.size()));
  }
}
