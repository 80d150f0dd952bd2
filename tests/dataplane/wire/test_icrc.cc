#include "dataplane/wire/icrc.h"

#include <catch2/catch.hpp>

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
