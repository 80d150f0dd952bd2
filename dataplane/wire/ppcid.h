// PPCID: the 16-bit per-packet path id carried in the UDP checksum field of fabric-side RoCEv2
// packets (the ICRC masks that field, so writing it keeps the ICRC valid).
//   layout ts-high (default): bits 15-8 timestamp hash, 7-4 path id, 3-0 check nibble
//   layout path-high:         bits 15-8 path id,        7-4 timestamp hash, 3-0 check nibble
// The check nibble is a fold of DestQP xor PSN. 0x0000 is never emitted: it means "no PPCID".
#pragma once

#include <bitset>
#include <cstdint>
#include <optional>
#include <string_view>

namespace spraynet {

enum class PpcidLayout : uint8_t { kTsHigh, kPathHigh };

std::string_view to_string(PpcidLayout layout);
std::optional<PpcidLayout> parse_ppcid_layout(std::string_view name);  // "ts-high" | "path-high"

// Largest path id each layout can carry: 15 in ts-high, 255 in path-high.
inline constexpr unsigned max_path_id(PpcidLayout l) {
  return l == PpcidLayout::kTsHigh ? 15 : 255;
}

// XOR-fold of (DestQP ^ PSN) over their 24 bits down to 4.
uint8_t ppcid_check_nibble(uint32_t dest_qp, uint32_t psn);

// Time since the last link-state update in 10 ns units, XOR-folded to `bits` (8 or 4) bits.
uint8_t ppcid_timestamp_hash(uint64_t ns_since_update, unsigned bits);

struct PpcidFields {
  uint8_t timestamp = 0;
  uint8_t path_id = 0;
  uint8_t check = 0;
};

// Encodes a PPCID. path_id must fit the layout (see max_path_id); extra bits are masked off.
// When every field is zero the timestamp's low bit is set, so the value is never 0x0000.
uint16_t ppcid_encode(PpcidLayout layout, uint8_t path_id, uint8_t timestamp, uint32_t dest_qp,
                      uint32_t psn);
PpcidFields ppcid_decode(uint16_t value, PpcidLayout layout);

enum class PpcidVerdict : uint8_t {
  kAbsent,          // 0x0000: the sender did not spray this packet
  kOk,              // check nibble right, path id known under the configured layout
  kBadCheck,        // check nibble does not match DestQP ^ PSN: corrupted or not a PPCID
  kLayoutMismatch,  // path id unknown as configured but known under the other layout
  kUnknownPath,     // path id unknown under both layouts
};

struct PpcidReading {
  PpcidVerdict verdict = PpcidVerdict::kAbsent;
  uint8_t path_id = 0;  // as decoded under the layout that recognised it
};

using PathIdSet = std::bitset<256>;

// Classifies a received PPCID against the path ids this receiver knows.
PpcidReading ppcid_read(uint16_t value, PpcidLayout configured, uint32_t dest_qp, uint32_t psn,
                        const PathIdSet& known_paths);

}  // namespace spraynet
