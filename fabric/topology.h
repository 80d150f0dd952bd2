// A leaf-spine fabric as node configs and cables: what each switch is (a control::SwitchConfig
// that switch_emu would load), what each host's NIC is (a control::NicConfig with the RC engine
// as its host), and which port of which node each cable joins.
//
// Naming and addressing. Plane 0's switches are leaf0.., spine0..; plane p > 0 prefixes "pP."
// (p1.leaf0). Host h sits on leaf h / hosts_per_leaf as host h % hosts_per_leaf, with IP
// 10.0.L.(i+1) in every plane (one /24 per leaf). Node ids: hosts 0..H-1, then the switches,
// plane by plane, leaves before spines.
// Leaf ports: 0..H_L-1 to its hosts, then H_L + s*K + k to spine s over parallel link k. Spine
// ports: l*K + k to leaf l. Leaf groups: one per host (its port), then "up" (every uplink, in the
// mode's balancing) per other leaf; spine groups: one per leaf (its K links). Routes: host /32
// -> its group and other leaves' /24 -> their group at leaves; leaf /24 -> its group at spines.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "control/nic_config.h"
#include "control/switch_config.h"
#include "fabric/fabric_config.h"

namespace spraynet::fabric {

struct SwitchSpec {
  std::string name;
  uint32_t plane = 0;
  bool leaf = true;
  uint32_t index = 0;  // leaf or spine number within its plane
  control::SwitchConfig config;
  // Leaves: the group that reaches each leaf over the uplinks (-1 for itself).
  std::vector<int32_t> leaf_group;
};

struct HostSpec {
  std::string name;  // "h3"
  uint32_t leaf = 0;
  uint32_t index = 0;  // on its leaf
  uint32_t ip = 0;     // host order
  MacAddress mac{};
  control::NicConfig nic;  // uplink p goes to plane p's leaf
};

// One cable, full duplex: node a's port a_port <-> node b's port b_port.
struct Cable {
  uint32_t a_node = 0;
  uint16_t a_port = 0;
  uint32_t b_node = 0;
  uint16_t b_port = 0;
  std::string name;       // "leaf0-spine3#0", "h5-leaf0", "p1.leaf0-p1.spine3#0"
  bool fabric = false;    // leaf-spine (a = the leaf, b = the spine)

  // Both ends as (node, port): what an event on the cable acts on.
  std::array<std::pair<uint32_t, uint16_t>, 2> ends() const {
    return {{{a_node, a_port}, {b_node, b_port}}};
  }
};

class Topology {
 public:
  // Throws std::invalid_argument for a config that check() refuses.
  Topology(const FabricConfig& config, FabricMode mode, uint64_t seed);

  const std::vector<HostSpec>& hosts() const { return hosts_; }
  std::vector<HostSpec>& hosts() { return hosts_; }
  const std::vector<SwitchSpec>& switches() const { return switches_; }
  std::vector<SwitchSpec>& switches() { return switches_; }
  const std::vector<Cable>& cables() const { return cables_; }
  uint32_t node_count() const { return static_cast<uint32_t>(hosts_.size() + switches_.size()); }
  uint32_t switch_node(uint32_t switch_index) const {
    return static_cast<uint32_t>(hosts_.size()) + switch_index;
  }
  // Index into switches() of a leaf or a spine.
  uint32_t leaf_index(uint32_t plane, uint32_t leaf) const;
  uint32_t spine_index(uint32_t plane, uint32_t spine) const;
  // The cables an event's link name means ("leaf0-spine3": every parallel link; "#k": one).
  // Empty when the name matches none.
  std::vector<uint32_t> find_cables(const std::string& link) const;
  // The sending ends (node, port) a rate or BER event acts on: both ends of every cable
  // find_cables() names, or with "A>B" (spine3>leaf1, spine3>leaf1#0) only A's end of the cables
  // between A and B: one direction. Empty when the name matches none.
  std::vector<std::pair<uint32_t, uint16_t>> find_link_ends(const std::string& link) const;
  // The switch named (background events); nullopt when none.
  std::optional<uint32_t> find_switch(const std::string& name) const;
  // The host named ("h3"; filter events); nullopt when none.
  std::optional<uint32_t> find_host(const std::string& name) const;
  std::string node_name(uint32_t node) const;
  static uint32_t host_ip(uint32_t leaf, uint32_t index) {
    return 0x0A000000u | (leaf << 8) | (index + 1);
  }

 private:
  void spread_cable_delays(const FabricConfig& config, uint64_t seed);

  std::vector<HostSpec> hosts_;
  std::vector<SwitchSpec> switches_;
  std::vector<Cable> cables_;
  uint32_t leaves_per_plane_ = 0;
  uint32_t spines_per_plane_ = 0;
};

}  // namespace spraynet::fabric
