// The flow hash that ECMP, weighted buckets and DLB index with. The input is a canonical byte
// string in network order, laid out the way switch ASICs feed their hash units:
//   src IP (4) | dst IP (4) | src port (2) | dst port (2) | protocol (1) [| BTH DestQP (3)]
// i.e. 13 bytes, or 16 with the DestQP ("E-ECMP"). Hashing bytes rather than the in-memory
// FlowKey makes the result independent of host endianness and reproducible by hand.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "dataplane/wire/flow_key.h"

namespace spraynet {

enum class HashAlgorithm : uint8_t {
  // CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) as DPDK's rte_hash_crc computes it:
  // the CRC register starts at the seed itself and the result is not inverted. SSE4.2 crc32
  // instructions where the CPU has them, DPDK's table-driven fallback otherwise (same values).
  kCrc32c,
  // CRC-32 (IEEE 802.3, reflected polynomial 0xEDB88320) as zlib's crc32() computes it,
  // continued from the seed: hash = crc32(seed, bytes). With seed 0 this is the standard CRC-32
  // of the bytes; a seed s gives the CRC-32 of (some prefix whose CRC-32 is s) + bytes, i.e. the
  // register starts at ~s and the result is inverted, as zlib always does.
  kCrc32,
};

std::string_view to_string(HashAlgorithm algorithm);
std::optional<HashAlgorithm> parse_hash_algorithm(std::string_view name);  // "crc32c" | "crc32"

struct HashConfig {
  HashAlgorithm algorithm = HashAlgorithm::kCrc32c;
  // Per-switch seed. Two tiers with the same seed and algorithm make the same choices for the
  // same flows: hash polarization, reproducible on purpose.
  uint32_t seed = 0;
  // Append the BTH DestQP to the key. The FlowKey must then have been made with
  // make_flow_key(p, /*with_dest_qp=*/true), otherwise its DestQP is 0 and adds nothing.
  bool dest_qp_in_key = false;
};

class FlowHasher {
 public:
  static constexpr size_t kKeyBytes = 13;        // 5-tuple
  static constexpr size_t kKeyBytesWithQp = 16;  // 5-tuple + DestQP

  explicit FlowHasher(HashConfig config = {}) : config_(config) {}

  uint32_t hash(const FlowKey& key) const;

  // Writes the canonical key bytes into `out` (at least kKeyBytesWithQp bytes); returns how
  // many were written (13 or 16).
  size_t key_bytes(const FlowKey& key, uint8_t* out) const;

  const HashConfig& config() const { return config_; }

 private:
  HashConfig config_;
};

}  // namespace spraynet
