// Which of a port's 8 egress traffic classes (and PFC priorities) a packet belongs to, from
// its DSCP or its 802.1Q PCP, as a switch's QoS map does. Trust dscp (the RoCE default, since
// PFC over L3 fabrics keys on DSCP) or pcp; a packet without the trusted field falls back to
// the other, and a packet with neither (untagged non-IP, e.g. ARP) goes to class 0.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

#include "dataplane/wire/packet_parser.h"

namespace spraynet {

inline constexpr int kTrafficClasses = 8;

enum class TrustMode : uint8_t { kDscp, kPcp };

std::string_view to_string(TrustMode mode);
std::optional<TrustMode> parse_trust_mode(std::string_view name);  // "dscp" | "pcp"

class TrafficClassMap {
 public:
  // Default maps: DSCP d -> d >> 3 (class selector: CS3/AF3x -> 3, the usual RoCE class),
  // PCP p -> p.
  explicit TrafficClassMap(TrustMode trust = TrustMode::kDscp);

  // Overrides; throw std::invalid_argument for dscp > 63, pcp > 7 or traffic_class > 7.
  void set_dscp(uint8_t dscp, uint8_t traffic_class);
  void set_pcp(uint8_t pcp, uint8_t traffic_class);
  void set_trust(TrustMode trust) { trust_ = trust; }

  // IPv4 (any kind with an IP header) under dscp trust: the DSCP map. Tagged under pcp trust:
  // the PCP map; untagged IPv4 under pcp trust: the DSCP map. Non-IP: the PCP map when
  // tagged, else 0. Always 0..7.
  uint8_t classify(const ParsedPacket& p) const;

  TrustMode trust() const { return trust_; }
  uint8_t dscp_class(uint8_t dscp) const { return dscp_to_class_[dscp & 63]; }
  uint8_t pcp_class(uint8_t pcp) const { return pcp_to_class_[pcp & 7]; }

 private:
  TrustMode trust_;
  std::array<uint8_t, 64> dscp_to_class_;
  std::array<uint8_t, 8> pcp_to_class_;
};

}  // namespace spraynet
