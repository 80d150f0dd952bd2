#include "dataplane/wire/pfc_frame.h"

#include <rte_mbuf.h>

#include <cmath>
#include <cstring>

#include "dataplane/wire/byte_order.h"

namespace spraynet {

void build_pfc_frame(uint8_t* out, const uint8_t src_mac[6], const PfcFrame& frame) {
  std::memset(out, 0, kPfcFrameLength);
  std::memcpy(out, kPfcDestMac, 6);
  std::memcpy(out + 6, src_mac, 6);
  store_be16(out + 12, kEtherTypeMacControl);
  store_be16(out + 14, kMacControlOpcodePfc);
  store_be16(out + 16, frame.class_enable);
  for (int p = 0; p < kPriorities; ++p) store_be16(out + 18 + 2 * p, frame.quanta[p]);
}

bool build_pfc_frame(rte_mbuf* m, const uint8_t src_mac[6], const PfcFrame& frame) {
  auto* p = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, kPfcFrameLength));
  if (p == nullptr) return false;
  build_pfc_frame(p, src_mac, frame);
  return true;
}

PfcParseStatus parse_pfc_frame(const uint8_t* f, size_t len, PfcFrame& out) {
  size_t off = 12;
  if (len < off + 2) return PfcParseStatus::kTooShort;
  if (load_be16(f + off) == 0x8100) off += 4;
  if (len < off + 2) return PfcParseStatus::kTooShort;
  if (load_be16(f + off) != kEtherTypeMacControl) return PfcParseStatus::kNotMacControl;
  if (len < off + 2 + 2) return PfcParseStatus::kTooShort;
  if (load_be16(f + off + 2) != kMacControlOpcodePfc) return PfcParseStatus::kNotPfc;
  if (len < off + 2 + 2 + 2 + 16) return PfcParseStatus::kTooShort;
  if (std::memcmp(f, kPfcDestMac, 6) != 0) return PfcParseStatus::kBadDestination;
  const uint16_t cev = load_be16(f + off + 4);
  if (cev & 0xFF00) return PfcParseStatus::kReservedBitsSet;
  out.class_enable = static_cast<uint8_t>(cev);
  for (int p = 0; p < kPriorities; ++p) out.quanta[p] = load_be16(f + off + 6 + 2 * p);
  return PfcParseStatus::kOk;
}

uint16_t pfc_ns_to_quanta(uint64_t ns, double link_gbps) {
  const double q = std::ceil(static_cast<double>(ns) / pfc_quantum_ns(link_gbps));
  return q >= 65535.0 ? 0xFFFF : static_cast<uint16_t>(q);
}

}  // namespace spraynet
