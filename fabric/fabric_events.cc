// The model's timed events: links down and up, rates, BER, background load, filters, and the
// routes withdrawn across tiers and pods when a link goes.
#include "fabric/fabric.h"

#include <algorithm>

#include "fabric/fabric_detail.h"

namespace spraynet::fabric {

using detail::kNever;

void Fabric::set_cable_up(uint32_t c, bool up) {
  const Cable& cable = topology_.cables()[c];
  for (const auto& [node, port] : cable.ends()) {
    Node& n = nodes_[node];
    if (n.sw) {
      n.sw->set_link_up(port, up, now_);
      if (!up && n.control) n.control->on_link_down(port, now_);
    } else {
      n.nic->set_link_up(port, up, now_);
    }
  }
  down_since_ns_[c] = up ? kNever : std::min(down_since_ns_[c], now_);
}

namespace {

// Takes the members of `sel` on ports first..first+n-1 out of the group (or back).
void exclude_ports(PathSelector& sel, uint32_t first, uint32_t n, bool withdrawn) {
  const auto members = sel.member_ports();
  for (uint16_t m = 0; m < members.size(); ++m) {
    if (members[m] >= first && members[m] < first + n) sel.set_member_excluded(m, withdrawn);
  }
}

}  // namespace

void Fabric::withdraw(uint32_t plane, uint32_t leaf, uint32_t spine, bool withdrawn) {
  // Every other leaf of the pod stops (or resumes) using this spine towards `leaf` (global).
  const uint32_t K = config_.links_per_spine;
  const uint32_t H = config_.hosts_per_leaf;
  const uint32_t first = leaf - leaf % config_.leaves;
  for (uint32_t l = first; l < first + config_.leaves; ++l) {
    if (l == leaf) continue;
    const uint32_t si = topology_.leaf_index(plane, l);
    const int32_t g = topology_.switches()[si].leaf_group[leaf];
    if (g < 0) continue;
    PathSelector& sel = nodes_[topology_.switch_node(si)].sw->group(static_cast<size_t>(g));
    exclude_ports(sel, H + spine * K, K, withdrawn);
  }
}

void Fabric::withdraw_across_pods(uint32_t plane) {
  // Three tiers: a super-spine that has no link left to pod r's spine is withdrawn from the
  // other pods' spines' routes to r, and a spine from its pod's leaves' routes to a leaf d of
  // pod r when it has no super-spine left that reaches r, or when pod r's spine of its plane has
  // no link left to d (the only way down to d in that plane), as BGP withdraws them, at once.
  // Within a pod withdraw() does it.
  const uint32_t K = config_.links_per_spine;
  const uint32_t K2 = config_.links_per_super;
  const uint32_t H = config_.hosts_per_leaf;
  const uint32_t L = config_.leaves;
  const uint32_t M = config_.super_spines;
  const auto up = [&](uint32_t switch_index, uint32_t port) {
    const switch_emu::SwitchNode& sw = *nodes_[topology_.switch_node(switch_index)].sw;
    return sw.egress(static_cast<uint16_t>(port)).link_up();
  };
  for (uint32_t sp = 0; sp < config_.spines; ++sp) {
    // has_leaf[d]: global leaf d has a link up to its pod's spine sp (a cable down is down at
    // both ends).
    std::vector<uint8_t> has_leaf(config_.total_leaves(), 0);
    for (uint32_t d = 0; d < config_.total_leaves(); ++d) {
      for (uint32_t k = 0; k < K; ++k) {
        has_leaf[d] = has_leaf[d] || up(topology_.leaf_index(plane, d), H + sp * K + k);
      }
    }
    // reaches[m][r]: super-spine sp.m has a link up to pod r's spine sp.
    std::vector<std::vector<uint8_t>> reaches(M, std::vector<uint8_t>(config_.pods, 0));
    for (uint32_t m = 0; m < M; ++m) {
      const uint32_t u = topology_.super_index(plane, sp, m);
      for (uint32_t r = 0; r < config_.pods; ++r) {
        for (uint32_t k = 0; k < K2; ++k) reaches[m][r] = reaches[m][r] || up(u, r * K2 + k);
      }
    }
    for (uint32_t q = 0; q < config_.pods; ++q) {
      const uint32_t si = topology_.spine_index(plane, sp, q);
      switch_emu::SwitchNode& spine = *nodes_[topology_.switch_node(si)].sw;
      for (uint32_t r = 0; r < config_.pods; ++r) {
        const int32_t g = topology_.switches()[si].pod_group[r];
        if (g < 0) continue;
        bool spine_reaches = false;
        for (uint32_t m = 0; m < M; ++m) {
          exclude_ports(spine.group(static_cast<size_t>(g)), L * K + m * K2, K2, !reaches[m][r]);
          bool link = false;
          for (uint32_t k = 0; k < K2; ++k) link = link || up(si, L * K + m * K2 + k);
          spine_reaches = spine_reaches || (link && reaches[m][r]);
        }
        for (uint32_t l = 0; l < L; ++l) {
          const uint32_t li = topology_.leaf_index(plane, q * L + l);
          switch_emu::SwitchNode& leaf = *nodes_[topology_.switch_node(li)].sw;
          for (uint32_t d = r * L; d < (r + 1) * L; ++d) {
            const int32_t lg = topology_.switches()[li].leaf_group[d];
            if (lg < 0) continue;
            exclude_ports(leaf.group(static_cast<size_t>(lg)), H + sp * K, K,
                          !(spine_reaches && has_leaf[d]));
          }
        }
      }
    }
  }
}

void Fabric::apply_event(const FabricEvent& e) {
  if (e.kind == FabricEvent::Kind::kFilter) {
    const bool on = e.value != 0;
    if (const auto h = topology_.find_host(e.target)) {
      nic_emu::NicHostSide side = nodes_[*h].nic->host_side();
      side.filter_nonzero_udp_checksum = on;
      nodes_[*h].nic->set_host_side(side);
    } else {
      for (const uint32_t c : topology_.find_cables(e.target)) cable_filter_[c] = on;
    }
    return;
  }
  if (e.kind == FabricEvent::Kind::kBackground) {
    // Traffic outside the experiment takes `value` of each of the switch's links, both ways:
    // what is left for the fabric's own traffic is the rest of the line rate.
    // A switch: both directions of every link of it (a host's NIC uplink too). A link
    // (h0-p1.leaf0, leaf0-spine2): one direction, from its first-named end, so that a host's
    // other traffic loads its uplink and not what it receives. The background's bytes count in
    // the ports' link state (add_background), as they would in real port counters.
    const double rate = config_.link_gbps * (1.0 - e.value);
    const auto take = [&](uint32_t nid, uint16_t port) {
      if (nodes_[nid].sw) {
        nodes_[nid].sw->set_link_rate_gbps(port, rate, now_);
      } else {
        nodes_[nid].nic->set_link_rate_gbps(port, rate, now_);
      }
      set_background(nid, port, e.value);
    };
    if (const auto s = topology_.find_switch(e.target)) {
      const uint32_t node = topology_.switch_node(*s);
      for (const Cable& cable : topology_.cables()) {
        if (cable.a_node != node && cable.b_node != node) continue;
        for (const auto& [nid, port] : cable.ends()) take(nid, port);
      }
    } else {
      for (const uint32_t c : topology_.find_cables(e.target)) {
        take(topology_.cables()[c].a_node, topology_.cables()[c].a_port);
      }
    }
    for (uint32_t id = 0; id < nodes_.size(); ++id) schedule_at(id, now_);
    return;
  }
  if (e.kind == FabricEvent::Kind::kBer || e.kind == FabricEvent::Kind::kRate) {
    // Both directions of a link, or one ("spine3>leaf1": what spine3 sends to leaf1).
    for (const auto& [nid, port] : topology_.find_link_ends(e.target)) {
      Node& n = nodes_[nid];
      if (!n.sw) continue;  // a NIC's side of a host cable keeps its settings
      if (e.kind == FabricEvent::Kind::kBer) n.sw->set_link_ber(port, e.value, now_);
      if (e.kind == FabricEvent::Kind::kRate) n.sw->set_link_rate_gbps(port, e.value, now_);
    }
  }
  for (const uint32_t c : topology_.find_cables(e.target)) {
    if (e.kind == FabricEvent::Kind::kLinkDown) {
      set_cable_up(c, false);
      drop_mail_on_cable(c);
    }
    if (e.kind == FabricEvent::Kind::kLinkUp) set_cable_up(c, true);
  }
  if (e.kind == FabricEvent::Kind::kLinkDown || e.kind == FabricEvent::Kind::kLinkUp) {
    // Routing: a spine that has no link left to a leaf is withdrawn from the other leaves'
    // routes to it (and comes back with its first link).
    const uint32_t K = config_.links_per_spine;
    for (uint32_t p = 0; p < config_.planes; ++p) {
      if (config_.tiers == 3) withdraw_across_pods(p);
      for (uint32_t l = 0; l < config_.total_leaves(); ++l) {
        for (uint32_t sp = 0; sp < config_.spines; ++sp) {
          const uint32_t leaf_node = topology_.switch_node(topology_.leaf_index(p, l));
          bool any_up = false;
          for (uint32_t k = 0; k < K; ++k) {
            const uint16_t port = static_cast<uint16_t>(config_.hosts_per_leaf + sp * K + k);
            any_up = any_up || nodes_[leaf_node].sw->egress(port).link_up();
          }
          withdraw(p, l, sp, !any_up);
        }
      }
    }
  }
  for (uint32_t id = 0; id < nodes_.size(); ++id) schedule_at(id, now_);
}

}  // namespace spraynet::fabric
