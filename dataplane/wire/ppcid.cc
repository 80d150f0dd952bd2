#include "dataplane/wire/ppcid.h"

namespace spraynet {

std::string_view to_string(PpcidLayout layout) {
  return layout == PpcidLayout::kTsHigh ? "ts-high" : "path-high";
}

std::optional<PpcidLayout> parse_ppcid_layout(std::string_view name) {
  if (name == "ts-high") return PpcidLayout::kTsHigh;
  if (name == "path-high") return PpcidLayout::kPathHigh;
  return std::nullopt;
}

uint8_t ppcid_check_nibble(uint32_t dest_qp, uint32_t psn) {
  const uint32_t x = (dest_qp ^ psn) & 0xFFFFFF;
  uint32_t n = 0;
  for (int shift = 0; shift < 24; shift += 4) n ^= x >> shift;  // XOR of the six nibbles
  return static_cast<uint8_t>(n & 0xF);
}

uint8_t ppcid_timestamp_hash(uint64_t ns_since_update, unsigned bits) {
  uint64_t t = ns_since_update / 10;
  t ^= t >> 32;
  t ^= t >> 16;
  t ^= t >> 8;
  if (bits >= 8) return static_cast<uint8_t>(t);
  t ^= t >> 4;
  return static_cast<uint8_t>(t & 0xF);
}

uint16_t ppcid_encode(PpcidLayout layout, uint8_t path_id, uint8_t timestamp, uint32_t dest_qp,
                      uint32_t psn) {
  const unsigned check = ppcid_check_nibble(dest_qp, psn);
  unsigned v;
  if (layout == PpcidLayout::kTsHigh) {
    v = (unsigned{timestamp} << 8) | ((path_id & 0xFu) << 4) | check;
  } else {
    v = (unsigned{path_id} << 8) | ((timestamp & 0xFu) << 4) | check;
  }
  if (v == 0) v = layout == PpcidLayout::kTsHigh ? 0x0100 : 0x0010;
  return static_cast<uint16_t>(v);
}

PpcidFields ppcid_decode(uint16_t value, PpcidLayout layout) {
  PpcidFields f;
  f.check = value & 0xF;
  if (layout == PpcidLayout::kTsHigh) {
    f.timestamp = static_cast<uint8_t>(value >> 8);
    f.path_id = (value >> 4) & 0xF;
  } else {
    f.path_id = static_cast<uint8_t>(value >> 8);
    f.timestamp = (value >> 4) & 0xF;
  }
  return f;
}

PpcidReading ppcid_read(uint16_t value, PpcidLayout configured, uint32_t dest_qp, uint32_t psn,
                        const PathIdSet& known_paths) {
  if (value == 0) return {PpcidVerdict::kAbsent, 0};
  // The check nibble sits in bits 3-0 in both layouts, so it cannot tell them apart; the path
  // id can, because each layout puts it where the other puts the timestamp.
  if ((value & 0xF) != ppcid_check_nibble(dest_qp, psn)) return {PpcidVerdict::kBadCheck, 0};
  const PpcidFields mine = ppcid_decode(value, configured);
  if (known_paths.test(mine.path_id)) return {PpcidVerdict::kOk, mine.path_id};
  const PpcidLayout other =
      configured == PpcidLayout::kTsHigh ? PpcidLayout::kPathHigh : PpcidLayout::kTsHigh;
  const PpcidFields theirs = ppcid_decode(value, other);
  if (known_paths.test(theirs.path_id)) return {PpcidVerdict::kLayoutMismatch, theirs.path_id};
  return {PpcidVerdict::kUnknownPath, mine.path_id};
}

}  // namespace spraynet
