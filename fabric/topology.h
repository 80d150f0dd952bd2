// A leaf-spine fabric as node configs and cables: what each switch is (a control::SwitchConfig
// that switch_emu would load), what each host's NIC is (a control::NicConfig with the RC engine
// as its host), and which port of which node each cable joins.
//
// Naming and addressing. Plane 0's switches are leaf0.., spine0..; plane p > 0 prefixes "pP."
// (p1.leaf0). Host h sits on leaf h / hosts_per_leaf as host h % hosts_per_leaf, with IP
// 10.0.L.(i+1) in every plane (one /24 per leaf). Node ids: hosts 0..H-1, then the switches,
// plane by plane, leaves before spines (before super-spines).
// Leaf ports: 0..H_L-1 to its hosts, then H_L + s*K + k to spine s over parallel link k. Spine
// ports: l*K + k to leaf l. Leaf groups: one per host (its port), then "up" (every uplink, in the
// mode's balancing) per other leaf; spine groups: one per leaf (its K links). Routes: host /32
// -> its group and other leaves' /24 -> their group at leaves; leaf /24 -> its group at spines.
//
// Three tiers (tiers 3, a folded Clos): P pods, each a leaf-spine of `leaves` leaves and
// `spines` spines, named pod<q>.leaf<l> and pod<q>.spine<s>; spine s of every pod goes up to
// super-spine plane s, super_spines switches named super<s>.<m> (plane prefix "pP." in front of
// all of them). Leaves are numbered across pods (global leaf q*leaves + l: host h sits on
// global leaf h / hosts_per_leaf), and pod q's hosts have IP 10.q.l.(i+1): one /16 per pod.
// Spine ports: l*K + k down to leaf l of its pod, then leaves*K + m*K2 + k2 up to super s.m
// over parallel link k2 (K2 = links_per_super). Super-spine ports: q*K2 + k2 down to pod q's
// spine s. Leaf groups and routes as above for every other leaf, of any pod (10.q.l/24, so
// that a spine can be withdrawn towards one leaf of another pod); spine groups: one per leaf of
// its pod (/24), one per other pod
// (every up link, 10.q/16); super-spine groups: one per pod (its K2 links, 10.q/16). Each
// destination has its own group so that routing can withdraw a member towards it alone.
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

enum class Tier : uint8_t { kLeaf = 0, kSpine = 1, kSuper = 2 };

struct SwitchSpec {
  std::string name;
  uint32_t plane = 0;
  bool leaf = true;
  Tier tier = Tier::kLeaf;
  uint32_t pod = 0;  // leaves and spines (0 in a two-tier fabric); super-spines: none
  // Leaves: the global leaf number (pod * leaves + leaf in pod); spines: the spine number within
  // its pod; super-spines: m in super<s>.<m>.
  uint32_t index = 0;
  uint32_t column = 0;  // super-spines: s, the spine index (super-spine plane) they serve
  control::SwitchConfig config;
  // Leaves: the group that reaches each leaf over the uplinks (-1 for itself), by global leaf
  // number: three tiers too, a /24 per leaf of every pod.
  std::vector<int32_t> leaf_group;
  // Spines of a three-tier fabric: the up group towards each pod (-1 for its own).
  std::vector<int32_t> pod_group;
};

struct HostSpec {
  std::string name;  // "h3"
  uint32_t leaf = 0;  // global leaf number (the rack)
  uint32_t pod = 0;
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
  // "leaf0-spine3#0", "h5-leaf0", "p1.leaf0-p1.spine3#0", "pod0.spine3-super3.1#0"
  std::string name;
  bool fabric = false;        // switch-switch (a = the lower tier, b = the upper)
  Tier upper = Tier::kSpine;  // fabric cables: b's tier (kSpine: leaf-spine, kSuper: spine-super)

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
  // Index into switches() of a leaf (global number), a spine (of a pod) or a super-spine.
  uint32_t leaf_index(uint32_t plane, uint32_t leaf) const;
  uint32_t spine_index(uint32_t plane, uint32_t spine, uint32_t pod = 0) const;
  uint32_t super_index(uint32_t plane, uint32_t column, uint32_t m) const;
  uint32_t tiers() const { return tiers_; }
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
  // `leaf` within its pod.
  static uint32_t host_ip(uint32_t leaf, uint32_t index, uint32_t pod = 0) {
    return 0x0A000000u | (pod << 16) | (leaf << 8) | (index + 1);
  }
  // CONGA: a leaf's tunnel address, the last of its /24 (hosts are .1 to .254): the spines'
  // route to the leaf carries the overlay to it.
  static uint32_t vtep_ip(uint32_t leaf) { return 0x0A000000u | (leaf << 8) | 0xFF; }

 private:
  void spread_cable_delays(const FabricConfig& config, uint64_t seed);

  std::vector<HostSpec> hosts_;
  std::vector<SwitchSpec> switches_;
  std::vector<Cable> cables_;
  uint32_t tiers_ = 2;
  uint32_t leaves_per_plane_ = 0;  // every pod's
  uint32_t spines_per_plane_ = 0;  // every pod's
  uint32_t spines_per_pod_ = 0;
  uint32_t supers_per_column_ = 0;
  uint32_t switches_per_plane_ = 0;
};

}  // namespace spraynet::fabric
