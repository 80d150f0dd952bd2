// Bit-at-a-time reflected CRCs written from the polynomial definitions, independent of DPDK's
// tables and instructions and of zlib: what the tests check the flow hash against.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace spraynet::test {

// rte_hash_crc semantics (rte_hash_crc.h, rte_crc_sw.h): the register starts at init, each
// byte is XORed into the low end and shifted out right through 0x82F63B78, no final XOR.
inline uint32_t reference_crc32c_dpdk(std::span<const uint8_t> bytes, uint32_t init) {
  uint32_t crc = init;
  for (uint8_t b : bytes) {
    crc ^= b;
    for (int i = 0; i < 8; ++i) crc = (crc >> 1) ^ ((crc & 1) ? 0x82F63B78u : 0u);
  }
  return crc;
}

// zlib's crc32(prev, ...): the register starts at ~prev and the result is inverted.
inline uint32_t reference_crc32_zlib(std::span<const uint8_t> bytes, uint32_t prev) {
  uint32_t crc = ~prev;
  for (uint8_t b : bytes) {
    crc ^= b;
    for (int i = 0; i < 8; ++i) crc = (crc >> 1) ^ ((crc & 1) ? 0xEDB88320u : 0u);
  }
  return ~crc;
}

}  // namespace spraynet::test
