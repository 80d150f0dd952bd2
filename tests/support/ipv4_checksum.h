// Recomputes an IPv4 header checksum after a test edited the header: RFC 791's one's-complement
// sum written out here, independent of DPDK's rte_ipv4_cksum that the code under test uses.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace spraynet::test {

inline void fix_ipv4_checksum(std::vector<uint8_t>& frame, size_t l3_offset) {
  uint8_t* ip = frame.data() + l3_offset;
  const size_t ihl = size_t{ip[0] & 0xFu} * 4;
  ip[10] = ip[11] = 0;
  uint32_t sum = 0;
  for (size_t i = 0; i < ihl; i += 2) sum += (uint32_t{ip[i]} << 8) | ip[i + 1];
  while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
  ip[10] = static_cast<uint8_t>(~sum >> 8);
  ip[11] = static_cast<uint8_t>(~sum);
}

// Whether the IPv4 header at `ip` checks: its one's-complement sum, checksum included, is 0xFFFF.
inline bool ipv4_checksum_ok(const uint8_t* ip) {
  const size_t ihl = size_t{ip[0] & 0xFu} * 4;
  uint32_t sum = 0;
  for (size_t i = 0; i < ihl; i += 2) sum += (uint32_t{ip[i]} << 8) | ip[i + 1];
  while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
  return sum == 0xFFFF;
}

}  // namespace spraynet::test
