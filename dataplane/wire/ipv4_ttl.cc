#include "dataplane/wire/ipv4_ttl.h"

#include "dataplane/wire/byte_order.h"

namespace spraynet {

namespace {

constexpr int kTtlOffset = 8;  // TTL, then protocol: one 16-bit word
constexpr int kChecksumOffset = 10;

}  // namespace

TtlVerdict decrement_ttl(uint8_t* ipv4_header) {
  const uint8_t ttl = ipv4_header[kTtlOffset];
  if (ttl <= 1) return TtlVerdict::kExpired;
  const uint16_t old_word = load_be16(ipv4_header + kTtlOffset);
  ipv4_header[kTtlOffset] = static_cast<uint8_t>(ttl - 1);
  patch_ipv4_checksum(ipv4_header, old_word, load_be16(ipv4_header + kTtlOffset));
  return TtlVerdict::kForwarded;
}

void patch_ipv4_checksum(uint8_t* ipv4_header, uint16_t old_word, uint16_t new_word) {
  const uint16_t old_checksum = load_be16(ipv4_header + kChecksumOffset);
  // One's complement sum of ~HC, ~m and m', carries folded back in (twice covers every case).
  uint32_t sum = uint32_t{static_cast<uint16_t>(~old_checksum)} +
                 uint32_t{static_cast<uint16_t>(~old_word)} + new_word;
  sum = (sum & 0xFFFF) + (sum >> 16);
  sum = (sum & 0xFFFF) + (sum >> 16);
  store_be16(ipv4_header + kChecksumOffset, static_cast<uint16_t>(~sum));
}

}  // namespace spraynet
