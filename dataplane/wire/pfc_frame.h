// IEEE 802.1Qbb priority flow control frames: dst 01-80-C2-00-00-01, EtherType 0x8808, MAC
// control opcode 0x0101, a class-enable vector (bit n = priority n) and eight 16-bit pause
// times in quanta of 512 bit times at the link rate. A time of 0 for an enabled class is XON.
// No DPDK virtual PMD implements PFC, so spraynet builds, parses and honours it in software.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>

struct rte_mbuf;

namespace spraynet {

inline constexpr uint16_t kEtherTypeMacControl = 0x8808;
inline constexpr uint16_t kMacControlOpcodePfc = 0x0101;
inline constexpr uint16_t kMacControlOpcodePause = 0x0001;  // 802.3x link-level PAUSE
inline constexpr uint8_t kPfcDestMac[6] = {0x01, 0x80, 0xC2, 0x00, 0x00, 0x01};
inline constexpr size_t kPfcFrameLength = 60;  // 14 + 2 + 2 + 16, padded to the 60-byte minimum
inline constexpr int kPriorities = 8;

struct PfcFrame {
  uint8_t class_enable = 0;  // bit n set: quanta[n] applies to priority n
  std::array<uint16_t, kPriorities> quanta{};

  bool enabled(int prio) const { return (class_enable >> prio) & 1; }
  bool is_xon(int prio) const { return enabled(prio) && quanta[prio] == 0; }
  bool operator==(const PfcFrame&) const = default;
};

enum class PfcParseStatus : uint8_t {
  kOk,
  kTooShort,         // fewer bytes than a PFC frame needs
  kNotMacControl,    // EtherType is not 0x8808 (after any VLAN tag)
  kNotPfc,           // MAC control, but another opcode (802.3x PAUSE, ...)
  kBadDestination,   // not 01-80-C2-00-00-01
  kReservedBitsSet,  // upper byte of the class-enable vector must be zero
};

// Writes a complete 60-byte frame into `out` (at least kPfcFrameLength bytes).
void build_pfc_frame(uint8_t* out, const uint8_t src_mac[6], const PfcFrame& frame);
// Same, into an empty mbuf; returns false when the mbuf has no room.
bool build_pfc_frame(rte_mbuf* m, const uint8_t src_mac[6], const PfcFrame& frame);

// Parses a frame starting at the Ethernet header; PFC frames are never tagged on the wire, but a
// tag is tolerated because some capture paths insert one.
PfcParseStatus parse_pfc_frame(const uint8_t* frame, size_t len, PfcFrame& out);

// One quantum is 512 bit times: 5.12 ns at 100 Gbit/s, 1.28 ns at 400 Gbit/s.
inline double pfc_quantum_ns(double link_gbps) {
  return 512.0 / link_gbps;
}
inline uint64_t pfc_quanta_to_ns(uint16_t quanta, double link_gbps) {
  return static_cast<uint64_t>(quanta * pfc_quantum_ns(link_gbps) + 0.5);
}
// The smallest quanta value covering `ns`, saturated at 0xFFFF.
uint16_t pfc_ns_to_quanta(uint64_t ns, double link_gbps);

}  // namespace spraynet
