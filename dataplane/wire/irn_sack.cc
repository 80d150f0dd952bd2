#include "dataplane/wire/irn_sack.h"

#include <algorithm>

namespace spraynet {

void IrnSack::clear() {
  std::fill(std::begin(words_), std::end(words_), 0);
  highest_ = 0;
  any_ = false;
}

bool IrnSack::set(uint32_t offset) {
  if (offset >= kMaxBits) return false;
  words_[offset / 64] |= uint64_t{1} << (offset % 64);
  highest_ = any_ ? std::max(highest_, offset) : offset;
  any_ = true;
  return true;
}

bool IrnSack::test(uint32_t offset) const {
  return offset < kMaxBits && ((words_[offset / 64] >> (offset % 64)) & 1) != 0;
}

size_t IrnSack::write(std::span<uint8_t> out) const {
  const size_t n = wire_bytes();
  if (n == 0 || out.size() < n) return 0;
  const uint32_t b = bits();
  out[0] = static_cast<uint8_t>(b >> 8);
  out[1] = static_cast<uint8_t>(b);
  out[2] = 0;
  out[3] = 0;
  for (uint32_t byte = 0; byte < b / 8; ++byte) {
    uint8_t v = 0;
    for (uint32_t k = 0; k < 8; ++k) {
      if (test(byte * 8 + k)) v |= static_cast<uint8_t>(0x80u >> k);
    }
    out[kIrnSackHeaderBytes + byte] = v;
  }
  return n;
}

bool IrnSack::read(std::span<const uint8_t> payload) {
  clear();
  if (payload.empty()) return true;
  if (payload.size() < kIrnSackHeaderBytes) return false;
  const uint32_t b = (uint32_t{payload[0]} << 8) | payload[1];
  if (b < 32 || b > kMaxBits || b % 32 != 0 || payload[2] != 0 || payload[3] != 0 ||
      payload.size() != kIrnSackHeaderBytes + b / 8) {
    return false;
  }
  for (uint32_t byte = 0; byte < b / 8; ++byte) {
    const uint8_t v = payload[kIrnSackHeaderBytes + byte];
    for (uint32_t k = 0; k < 8; ++k) {
      if ((v & (0x80u >> k)) != 0) set(byte * 8 + k);
    }
  }
  return true;
}

}  // namespace spraynet
