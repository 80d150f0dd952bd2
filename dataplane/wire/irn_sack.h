// The selective acknowledgement an IRN responder puts in its NAK (Mittal et al., "Revisiting
// Network Support for RDMA", SIGCOMM 2018, §3.1: the NACK carries what the receiver has beyond
// the cumulative point, so that the sender resends only what is missing). RoCE's NAK names one
// PSN, the first the responder misses (BTH PSN, AETH "PSN sequence error"); IRN extends the
// packet. Here the extension follows the AETH as the ACK's payload, before the ICRC (which covers
// it, so a receiver that checks the ICRC reads it intact):
//
//   Eth | IPv4 | UDP 4791 | BTH (ACKNOWLEDGE, PSN = P) | AETH (NAK 0x60) | SACK | ICRC
//   SACK: bits (16b, a multiple of 32, 32..kMaxBits) | reserved (16b, 0) | bitmap (bits / 8 bytes)
//   bitmap bit i (byte i / 8, most significant bit first) set: PSN P + 1 + i has arrived.
//
// A NAK without the extension (rxe's, RcPlacementResponder without sack) is read as "nothing
// known beyond P". The bitmap covers the arrived PSNs from P + 1 up to the highest one, cut at
// kMaxBits: what lies past that is not reported (the next NAK will).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace spraynet {

inline constexpr size_t kIrnSackHeaderBytes = 4;

class IrnSack {
 public:
  static constexpr uint32_t kMaxBits = 1024;

  // Clears the bitmap (no PSN beyond P known).
  void clear();
  // PSN P + 1 + offset has arrived; offsets at or past kMaxBits are ignored (false).
  bool set(uint32_t offset);
  bool test(uint32_t offset) const;
  // Bits the wire form carries: up to the highest set, rounded up to 32; 0 when none is set.
  uint32_t bits() const { return (highest_ + 32) / 32 * 32 * (any_ ? 1 : 0); }
  bool any() const { return any_; }
  uint32_t highest() const { return highest_; }  // the highest offset set (valid when any())
  // Bytes of the wire form: 0 when nothing is set (the NAK then goes without the extension).
  size_t wire_bytes() const { return any_ ? kIrnSackHeaderBytes + bits() / 8 : 0; }
  // Writes the wire form; returns its length, 0 when `out` is too small or nothing is set.
  size_t write(std::span<uint8_t> out) const;
  // Reads a NAK's payload (after the AETH, before the ICRC). An empty payload is a NAK without
  // the extension: true, nothing set. False (and nothing set) when the length field is not a
  // multiple of 32 in 32..kMaxBits, the reserved field is not 0, or the payload's length is not
  // the header and the bitmap exactly.
  bool read(std::span<const uint8_t> payload);

 private:
  uint64_t words_[kMaxBits / 64] = {};
  uint32_t highest_ = 0;
  bool any_ = false;
};

}  // namespace spraynet
