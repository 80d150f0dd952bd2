#include "dataplane/forwarding/traffic_class_map.h"

#include <stdexcept>
#include <string>

namespace spraynet {

namespace {

void check_class(uint8_t traffic_class, const char* what, unsigned index) {
  if (traffic_class >= kTrafficClasses) {
    throw std::invalid_argument(std::string("traffic class map: ") + what + " " +
                                std::to_string(index) + " -> class " +
                                std::to_string(traffic_class) + ": classes are 0 to 7");
  }
}

bool has_ip_header(PacketKind kind) {
  return kind == PacketKind::kIpv4 || kind == PacketKind::kTcp || kind == PacketKind::kUdp ||
         kind == PacketKind::kRoce;
}

}  // namespace

std::string_view to_string(TrustMode mode) {
  return mode == TrustMode::kDscp ? "dscp" : "pcp";
}

std::optional<TrustMode> parse_trust_mode(std::string_view name) {
  if (name == "dscp") return TrustMode::kDscp;
  if (name == "pcp") return TrustMode::kPcp;
  return std::nullopt;
}

TrafficClassMap::TrafficClassMap(TrustMode trust) : trust_(trust) {
  for (unsigned d = 0; d < dscp_to_class_.size(); ++d) dscp_to_class_[d] = uint8_t(d >> 3);
  for (unsigned p = 0; p < pcp_to_class_.size(); ++p) pcp_to_class_[p] = uint8_t(p);
}

void TrafficClassMap::set_dscp(uint8_t dscp, uint8_t traffic_class) {
  if (dscp >= dscp_to_class_.size()) {
    throw std::invalid_argument("traffic class map: DSCP " + std::to_string(dscp) +
                                " is not 0 to 63");
  }
  check_class(traffic_class, "DSCP", dscp);
  dscp_to_class_[dscp] = traffic_class;
}

void TrafficClassMap::set_pcp(uint8_t pcp, uint8_t traffic_class) {
  if (pcp >= pcp_to_class_.size()) {
    throw std::invalid_argument("traffic class map: PCP " + std::to_string(pcp) + " is not 0 to 7");
  }
  check_class(traffic_class, "PCP", pcp);
  pcp_to_class_[pcp] = traffic_class;
}

uint8_t TrafficClassMap::classify(const ParsedPacket& p) const {
  const bool tagged = p.vlan_tags > 0;
  if (!has_ip_header(p.kind)) return tagged ? pcp_class(p.pcp) : 0;
  if (trust_ == TrustMode::kPcp && tagged) return pcp_class(p.pcp);
  return dscp_class(p.dscp());
}

}  // namespace spraynet
