// RoCEv2 invariant CRC (IBA vol. 1 annex A17.3.3 for IPv4): a standard CRC-32 (zlib's) over
// 8 bytes of 0xFF, then the IPv4 header, UDP header, BTH and everything after it up to the
// ICRC, with the fields that routers may change set to all ones first: IPv4 TOS, TTL and header
// checksum; the UDP checksum (where PPCID lives); BTH byte 4 (FECN, BECN). It is sent least
// significant byte first.
#pragma once

#include <cstddef>
#include <cstdint>

struct rte_mbuf;

namespace spraynet {

class PayloadStore;

// `ip` points at the IPv4 header; `len` counts the bytes from there up to, not including, the
// ICRC. The caller guarantees len >= IHL*4 + 8 + 12 (PacketParser does).
uint32_t compute_icrc(const uint8_t* ip, size_t len);

// `len` here includes the trailing 4-byte ICRC.
bool verify_icrc(const uint8_t* ip, size_t len);

// Writes the ICRC of the `len` bytes at `ip` into the four bytes that follow them.
void write_icrc(uint8_t* ip, size_t len);

// The same over a packet that may be chained: the `len` bytes from `l3_offset` of `m`, whose
// IPv4, UDP and BTH headers lie in its first segment (PacketParser makes sure they do). A
// segment whose bytes lie in `store` (may be null) is folded in by its known CRC.
uint32_t compute_icrc(const rte_mbuf* m, size_t l3_offset, size_t len, const PayloadStore* store);

// `len` includes the trailing ICRC; false when the packet holds fewer bytes.
bool verify_icrc(const rte_mbuf* m, size_t l3_offset, size_t len, const PayloadStore* store);

// The CRC-32 of a block A followed by a block B, from crc1 = CRC(A), crc2 = CRC(B) and
// op = zlib's crc32_combine_gen(len(B)): zlib's crc32_combine_op, with a carry-less multiply
// (PCLMULQDQ) in place of its bit loop when the CPU has one.
uint32_t crc32_combine_with_op(uint32_t crc1, uint32_t crc2, uint32_t op);

// The ICRC as carried in the packet (little-endian on the wire).
uint32_t load_icrc(const uint8_t* icrc_bytes);

}  // namespace spraynet
