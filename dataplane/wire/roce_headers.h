// RoCEv2 transport headers (InfiniBand Architecture Specification vol. 1, ch. 9) as zero-copy
// views over packet bytes: BTH, RETH, AETH. A view holds a pointer; it never copies and never
// checks bounds: PacketParser establishes that the bytes are there before handing views out.
#pragma once

#include <cstddef>
#include <array>
#include <cstdint>

#include "dataplane/wire/byte_order.h"

namespace spraynet {

inline constexpr uint16_t kRoceV2UdpPort = 4791;
inline constexpr size_t kBthSize = 12;
inline constexpr size_t kRethSize = 16;
inline constexpr size_t kAethSize = 4;
inline constexpr size_t kIcrcSize = 4;
inline constexpr uint16_t kDefaultPkey = 0xFFFF;

// RC opcodes (transport 000b). UC is 001b, UD 011b in the top three bits.
namespace opcode {
inline constexpr uint8_t kRcSendFirst = 0x00;
inline constexpr uint8_t kRcSendMiddle = 0x01;
inline constexpr uint8_t kRcSendLast = 0x02;
inline constexpr uint8_t kRcSendLastImm = 0x03;
inline constexpr uint8_t kRcSendOnly = 0x04;
inline constexpr uint8_t kRcSendOnlyImm = 0x05;
inline constexpr uint8_t kRcWriteFirst = 0x06;
inline constexpr uint8_t kRcWriteMiddle = 0x07;
inline constexpr uint8_t kRcWriteLast = 0x08;
inline constexpr uint8_t kRcWriteLastImm = 0x09;
inline constexpr uint8_t kRcWriteOnly = 0x0A;
inline constexpr uint8_t kRcWriteOnlyImm = 0x0B;
inline constexpr uint8_t kRcReadRequest = 0x0C;
inline constexpr uint8_t kRcReadResponseFirst = 0x0D;
inline constexpr uint8_t kRcReadResponseMiddle = 0x0E;
inline constexpr uint8_t kRcReadResponseLast = 0x0F;
inline constexpr uint8_t kRcReadResponseOnly = 0x10;
inline constexpr uint8_t kRcAck = 0x11;
inline constexpr uint8_t kRcAtomicAck = 0x12;
inline constexpr uint8_t kRcCompareSwap = 0x13;
inline constexpr uint8_t kRcFetchAdd = 0x14;
inline constexpr uint8_t kRcSendLastInv = 0x16;
inline constexpr uint8_t kRcSendOnlyInv = 0x17;
inline constexpr uint8_t kCnp = 0x81;  // RoCEv2 congestion notification packet
}  // namespace opcode

// AETH syndromes: 0x00-0x1F ACK (low 5 bits: credit count), 0x20-0x3F RNR NAK (timer),
// 0x60-0x7F NAK (low bits: code; 0x60 = PSN sequence error, the PSN is the expected one).
namespace aeth {
inline constexpr uint8_t kAck = 0x00;
inline constexpr uint8_t kNakPsnSequenceError = 0x60;
inline constexpr uint8_t kNakInvalidRequest = 0x61;
inline constexpr uint8_t kNakRemoteAccessError = 0x62;
inline constexpr uint8_t kNakRemoteOperationalError = 0x63;
inline bool is_ack(uint8_t syndrome) {
  return (syndrome & 0x60) == 0x00;
}
inline bool is_rnr_nak(uint8_t syndrome) {
  return (syndrome & 0x60) == 0x20;
}
inline bool is_nak(uint8_t syndrome) {
  return (syndrome & 0x60) == 0x60;
}
}  // namespace aeth

// Length of the extended transport headers that follow the BTH for an opcode, in bytes, or -1
// for an opcode this library does not know (reserved or manufacturer-specific). A table lookup:
// the parser asks for every RoCE packet.
extern const std::array<int8_t, 256> kRoceExtensionLength;
inline int roce_extension_length(uint8_t opcode) { return kRoceExtensionLength[opcode]; }

// PSNs are 24-bit serial numbers (RFC 1982 style arithmetic modulo 2^24).
inline constexpr uint32_t kPsnMask = 0xFFFFFF;
inline uint32_t psn_add(uint32_t psn, uint32_t n) {
  return (psn + n) & kPsnMask;
}
// Signed distance b - a in (-2^23, 2^23]: positive when b is after a.
inline int32_t psn_diff(uint32_t a, uint32_t b) {
  const uint32_t d = (b - a) & kPsnMask;
  return d > 0x800000 ? static_cast<int32_t>(d) - 0x1000000 : static_cast<int32_t>(d);
}
inline bool psn_before(uint32_t a, uint32_t b) {
  return psn_diff(a, b) > 0;
}

class BthView {
 public:
  explicit BthView(uint8_t* p) : p_(p) {}
  uint8_t* data() const { return p_; }

  uint8_t opcode() const { return p_[0]; }
  bool solicited() const { return p_[1] & 0x80; }
  bool migreq() const { return p_[1] & 0x40; }
  uint8_t pad_count() const { return (p_[1] >> 4) & 0x3; }
  uint8_t tver() const { return p_[1] & 0x0F; }
  uint16_t pkey() const { return load_be16(p_ + 2); }
  bool fecn() const { return p_[4] & 0x80; }
  bool becn() const { return p_[4] & 0x40; }
  uint32_t dest_qp() const { return load_be24(p_ + 5); }
  bool ack_req() const { return p_[8] & 0x80; }
  uint32_t psn() const { return load_be24(p_ + 9); }

  void set_opcode(uint8_t v) const { p_[0] = v; }
  void set_flags(bool se, bool m, uint8_t pad, uint8_t tver) const {
    p_[1] =
        static_cast<uint8_t>((se ? 0x80 : 0) | (m ? 0x40 : 0) | ((pad & 3) << 4) | (tver & 0xF));
  }
  void set_pkey(uint16_t v) const { store_be16(p_ + 2, v); }
  void set_fecn_becn(bool fecn, bool becn) const {
    p_[4] = static_cast<uint8_t>((fecn ? 0x80 : 0) | (becn ? 0x40 : 0));
  }
  void set_dest_qp(uint32_t qp) const { store_be24(p_ + 5, qp); }
  void set_ack_req_psn(bool ack_req, uint32_t psn) const {
    p_[8] = ack_req ? 0x80 : 0;
    store_be24(p_ + 9, psn & kPsnMask);
  }

 private:
  uint8_t* p_;
};

class RethView {
 public:
  explicit RethView(uint8_t* p) : p_(p) {}
  uint64_t virtual_address() const { return load_be64(p_); }
  uint32_t rkey() const { return load_be32(p_ + 8); }
  uint32_t dma_length() const { return load_be32(p_ + 12); }
  void set(uint64_t va, uint32_t rkey, uint32_t len) const {
    store_be64(p_, va);
    store_be32(p_ + 8, rkey);
    store_be32(p_ + 12, len);
  }

 private:
  uint8_t* p_;
};

class AethView {
 public:
  explicit AethView(uint8_t* p) : p_(p) {}
  uint8_t syndrome() const { return p_[0]; }
  uint32_t msn() const { return load_be24(p_ + 1); }
  void set(uint8_t syndrome, uint32_t msn) const {
    p_[0] = syndrome;
    store_be24(p_ + 1, msn);
  }

 private:
  uint8_t* p_;
};

}  // namespace spraynet
