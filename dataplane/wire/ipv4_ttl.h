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

// Patches the header checksum of `ipv4_header` for one 16-bit word of it that changed from
// old_word to new_word (RFC 1624 eqn. 3, as above): what the TTL decrement and ECN's CE
// marking (dataplane/egress/ecn_marker.h) both do after writing their byte.
void patch_ipv4_checksum(uint8_t* ipv4_header, uint16_t old_word, uint16_t new_word);

}  // namespace spraynet
