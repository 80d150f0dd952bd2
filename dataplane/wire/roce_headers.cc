#include "dataplane/wire/roce_headers.h"

#include <array>

namespace spraynet {

namespace {

constexpr int extension_length_of(uint8_t op) {
  if (op == opcode::kCnp) return 16;  // 16 reserved bytes after the BTH
  const uint8_t transport = op >> 5;
  const uint8_t operation = op & 0x1F;
  // Extension headers by operation code, shared by RC (0), UC (1), RD (2, not supported), UD (3).
  int len;
  switch (operation) {
    case 0x00:
    case 0x01:
    case 0x02:
    case 0x04:
    case 0x07:
    case 0x08:
    case 0x0E:
      len = 0;
      break;
    case 0x03:
    case 0x05:
    case 0x09:
      len = 4;  // ImmDt
      break;
    case 0x06:
    case 0x0A:
    case 0x0C:
      len = 16;  // RETH
      break;
    case 0x0B:
      len = 20;  // RETH + ImmDt
      break;
    case 0x0D:
    case 0x0F:
    case 0x10:
    case 0x11:
      len = 4;  // AETH
      break;
    case 0x12:
      len = 12;  // AETH + AtomicAckETH
      break;
    case 0x13:
    case 0x14:
      len = 28;  // AtomicETH
      break;
    case 0x16:
    case 0x17:
      len = 4;  // IETH
      break;
    default:
      return -1;
  }
  switch (transport) {
    case 0:  // RC: every operation above exists
      return len;
    case 1:  // UC: sends and writes only
      return (operation <= 0x0B && operation != 0x0C) ? len : -1;
    case 3:  // UD: SEND ONLY (+Imm), with a DETH
      return (operation == 0x04 || operation == 0x05) ? len + 8 : -1;
    default:
      return -1;
  }
}

constexpr std::array<int8_t, 256> extension_lengths() {
  std::array<int8_t, 256> t{};
  for (unsigned op = 0; op < 256; ++op) {
    t[op] = static_cast<int8_t>(extension_length_of(static_cast<uint8_t>(op)));
  }
  return t;
}

}  // namespace

// Computed once, at compile time: the parser asks for every RoCE packet.
const std::array<int8_t, 256> kRoceExtensionLength = extension_lengths();

}  // namespace spraynet
