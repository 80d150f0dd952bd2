// Router TTL handling for IPv4: decrement the TTL and patch the header checksum incrementally
// (RFC 1624, eqn. 3: HC' = ~(~HC + ~m + m'), where m is the 16-bit word holding TTL and
// protocol). Eqn. 3 rather than RFC 1141's HC' = HC + m + ~m': the latter can turn a checksum
// that should be 0x0000 into 0xFFFF; eqn. 3 always equals a full recomputation.
#pragma once

#include <cstdint>

namespace spraynet {

enum class TtlVerdict : uint8_t {
  kForwarded,  // TTL was >= 2: decremented, checksum patched
  kExpired,    // TTL was 0 or 1: header untouched; the caller counts the drop (and frees it)
};

// `ipv4_header` points at a parsed IPv4 header (at least 20 bytes, checked by the parser).
TtlVerdict decrement_ttl(uint8_t* ipv4_header);

}  // namespace spraynet
