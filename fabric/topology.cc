#include "fabric/topology.h"

#include <stdexcept>

#include "dataplane/splitmix64.h"
#include "dataplane/wire/roce_headers.h"

namespace spraynet::fabric {

namespace {

std::string plane_prefix(uint32_t plane) {
  return plane == 0 ? "" : "p" + std::to_string(plane) + ".";
}

control::LinkSettings link_settings(const FabricConfig& c, double gbps = 0) {
  control::LinkSettings l;
  l.rate_gbps = gbps > 0 ? gbps : c.link_gbps;
  l.delay_ns = c.delay_ns;
  return l;
}

std::string group_mode(FabricMode mode) {
  switch (mode) {
    case FabricMode::kWeighted: return "weighted";
    case FabricMode::kDlb: return "dlb";
    case FabricMode::kDrill: return "drill";
    case FabricMode::kLetflow: return "letflow";
    default: return "ecmp";  // sprayed packets use the bucket table whatever the mode
  }
}

// A SplitMix64 step: per-switch hash seeds that differ in every bit.
uint64_t mix(uint64_t x) { return splitmix64_next(x); }

control::SwitchConfig base_switch(const FabricConfig& c, FabricMode mode, const std::string& name,
                                  uint64_t seed, uint32_t switch_index) {
  control::SwitchConfig s;
  s.file = "fabric";
  s.name = name;
  s.seed = mix(seed * 1000 + switch_index);
  s.ppcid_layout = c.effective_ppcid_layout();
  s.hash.algorithm = "crc32c";
  s.hash.dest_qp = mode == FabricMode::kEcmpQp;
  // "same": every switch at every tier hashes alike, which is what polarizes.
  s.hash.seed = static_cast<uint32_t>(c.same_hash_seed ? mix(seed) : mix(seed * 7 + switch_index + 1));
  s.pfc.enabled = c.pfc;
  s.pfc.pool_bytes = c.pfc_pool_bytes;
  s.pfc.alpha = c.pfc_alpha;
  s.pfc.static_threshold_bytes = c.pfc_static_threshold_bytes;
  s.pfc.headroom_bytes = c.pfc_headroom_bytes;
  s.pfc.xoff_offset_bytes = c.pfc_xoff_offset_bytes;
  s.pfc.xon_offset_bytes = c.pfc_xon_offset_bytes;
  s.pfc.fast_feedback = c.fast_feedback;
  s.pfc.watchdog = c.pfc_watchdog;
  s.pfc.watchdog_detect_ns = c.pfc_watchdog_ns;
  s.pfc.watchdog_restore_ns = c.pfc_watchdog_ns;
  s.pfc.watchdog_action = c.pfc_watchdog_action;
  s.control.period_ms = std::max<uint64_t>(1, c.control_period_ns / 1'000'000);
  s.tcam.spray_rule_limit = c.tcam_spray_rules;
  s.tcam.capacity = c.tcam_capacity;
  if (c.tcam_roce_partition > 0) s.tcam.partitions.push_back({"roce", c.tcam_roce_partition});
  // Hundreds of switches: bytes per route, not 64 MiB. Three tiers: no DPDK memzone either
  // (an rte_rib takes three of RTE_MAX_MEMZONE's 2560: 32 spines per pod of 16 pods make 1280
  // switches); two tiers keep the rib, and their reports' memory figures.
  s.route_table = c.tiers == 3 ? RouteTableBackend::kHash : RouteTableBackend::kRib;
  if (mode == FabricMode::kConga) {
    // Every switch keeps DREs and raises CE; leaves add their id and tables (see Topology).
    s.conga.enabled = true;
    s.conga.dre = DreSettings{c.conga_dre_ns, c.conga_alpha, c.conga_bits};
    s.conga.aging_ns = c.conga_aging_ns;
  }
  // HPCC: every port writes its INT record on the data packets the NICs send with INT.
  s.int_telemetry.enabled = c.cc.mode == control::CcMode::kHpcc;
  if (c.cc.marks_ecn()) {
    // DCQCN's congestion point (and DCTCP's marks): every port marks the lossless class (the
    // RoCE data's, class 3).
    s.ecn.enabled = true;
    s.ecn.classes = 1u << 3;
    s.ecn.preset = c.effective_ecn_preset();
    s.ecn.pmax = c.effective_ecn_pmax();
    s.ecn.mark_at = c.ecn_mark_at == "enqueue" ? EcnMarkPoint::kEnqueue : EcnMarkPoint::kDequeue;
    if (c.ecn_kmin_bytes != 0 || c.ecn_kmax_bytes != 0) {
      s.ecn.kmin_bytes = c.ecn_kmin_bytes;
      s.ecn.kmax_bytes = c.ecn_kmax_bytes;
    }
  }
  return s;
}

control::PortSettings port(const FabricConfig& c, const std::string& name, double gbps = 0) {
  control::PortSettings p;
  p.name = name;
  p.device = "fabric";
  p.link = link_settings(c, gbps);
  p.queue_bytes = c.queue_bytes;
  return p;
}

// A group that balances over `ports` in the mode's way (up groups, and the parallel links down).
control::GroupSettings balanced_group(const FabricConfig& c, FabricMode mode, std::string name,
                                      std::vector<uint16_t> ports) {
  control::GroupSettings g;
  g.name = std::move(name);
  g.mode = group_mode(mode);
  g.dlb_gap_ns = mode == FabricMode::kLetflow ? c.letflow_timeout_ns : c.dlb_gap_ns;
  // Memory: only the flowlet modes use the table.
  g.flowlet_entries = mode == FabricMode::kDlb || mode == FabricMode::kLetflow ? 4096 : 16;
  g.ports = std::move(ports);
  return g;
}

// A ConWeave leaf's group towards leaf `dl`: its ConweaveTx chooses for the RoCE data.
control::GroupSettings conweave_group(std::string name, std::vector<uint16_t> ports, uint32_t dl) {
  control::GroupSettings g;
  g.name = std::move(name);
  g.mode = "conweave";
  g.overlay_leaf = static_cast<int>(dl);
  g.flowlet_entries = 16;
  g.ports = std::move(ports);
  return g;
}

// A CONGA leaf's group towards leaf `dl`: flowlets on the least congested uplink, tunnelled.
control::GroupSettings conga_group(const FabricConfig& c, std::string name,
                                   std::vector<uint16_t> ports, uint32_t dl) {
  control::GroupSettings g;
  g.name = std::move(name);
  g.mode = "conga";
  g.overlay_leaf = static_cast<int>(dl);
  g.dlb_gap_ns = c.conga_flowlet_ns;
  g.flowlet_entries = 4096;
  g.ports = std::move(ports);
  return g;
}

// The catch-all spray rule of spines and super-spines: every RoCEv2 packet with a PPCID takes
// its member from the path id (the leaf's per-QP rules already decided which QPs spray; a
// packet without a PPCID, checksum 0, still goes by ECMP).
control::TcamRuleSettings transit_spray_rule(const FabricConfig& c) {
  control::TcamRuleSettings rule;
  rule.id = 0;
  rule.priority = 10;
  rule.proto = 17;
  rule.proto_mask = 0xFF;
  rule.dst_port = {kRoceV2UdpPort, kRoceV2UdpPort};
  rule.action = "spray";
  if (c.tcam_roce_partition > 0) rule.partition = "roce";
  return rule;
}

// Adds group g and a route for addr/len through it; returns the group's index.
uint32_t add_route(control::SwitchConfig& config, uint32_t addr, uint8_t len,
                   control::GroupSettings g) {
  const auto index = static_cast<uint32_t>(config.groups.size());
  config.groups.push_back(std::move(g));
  control::RouteSettings r;
  r.prefix = {addr, len};
  r.group = index;
  config.routes.push_back(r);
  return index;
}

}  // namespace

Topology::Topology(const FabricConfig& c, FabricMode mode, uint64_t seed)
    : tiers_(c.tiers),
      leaves_per_plane_(c.total_leaves()),
      spines_per_plane_(c.pods * c.spines),
      spines_per_pod_(c.spines),
      supers_per_column_(c.tiers == 3 ? c.super_spines : 0) {
  if (const std::string why = c.check(); !why.empty()) throw std::invalid_argument(why);
  switches_per_plane_ = leaves_per_plane_ + spines_per_plane_ + c.spines * supers_per_column_;
  const uint32_t H = c.hosts_per_leaf;
  const uint32_t K = c.links_per_spine;
  const uint32_t K2 = c.links_per_super;
  const uint32_t L = c.leaves;  // per pod
  const bool clos = c.tiers == 3;
  // Two tiers keep their names (leaf0, spine3); three prefix the pod (pod1.leaf0).
  const auto pod_prefix = [&](uint32_t q) {
    return clos ? "pod" + std::to_string(q) + "." : std::string();
  };
  const auto super_name = [](uint32_t s, uint32_t m) {
    return "super" + std::to_string(s) + "." + std::to_string(m);
  };

  for (uint32_t gl = 0; gl < leaves_per_plane_; ++gl) {
    const uint32_t q = gl / L, l = gl % L;
    for (uint32_t i = 0; i < H; ++i) {
      HostSpec h;
      h.name = "h" + std::to_string(hosts_.size());
      h.leaf = gl;
      h.pod = q;
      h.index = i;
      h.ip = host_ip(l, i, q);
      h.mac = {0x02,
               0x53,
               0x50,
               static_cast<uint8_t>(q),
               static_cast<uint8_t>(l),
               static_cast<uint8_t>(i + 1)};
      control::NicConfig& n = h.nic;
      n.file = "fabric";
      n.name = h.name;
      n.seed = mix(seed * 100003 + hosts_.size());
      for (uint32_t p = 0; p < c.planes; ++p) {
        control::UplinkSettings u;
        u.name = "plane" + std::to_string(p);
        u.device = "fabric";
        u.path_id = static_cast<uint8_t>(p);
        u.path_id_from_config = true;
        u.link = link_settings(c);
        n.uplinks.push_back(u);
      }
      // Pitfall 2: a host may be given the other layout (a NIC on other firmware).
      n.spray.ppcid_layout = *parse_ppcid_layout(c.host_ppcid_layout(h.name));
      if (is_spray(mode)) {
        n.spray.mode = *parse_spray_mode(c.spray_policy);
        n.spray.fabric_paths = static_cast<uint16_t>(
            c.fabric_paths != 0 ? c.fabric_paths
                                : c.auto_fabric_paths(max_path_id(n.spray.ppcid_layout) + 1));
      } else {
        n.spray.mode = SprayMode::kFlow;  // one flow, one plane: the ECMP baseline at the NIC
      }
      n.receive = *control::parse_receive_model(c.effective_receive(mode));
      n.placement.nak_delay_ns = c.placement_nak_delay_ns;
      n.reorder.window = c.reorder_window;
      n.reorder.hold_timeout_ns = c.reorder_hold_ns;
      if (c.transport == "irn") {
        n.irn = true;
        n.irn_settings.rto_low_ns = c.irn_rto_low_ns;
        n.irn_settings.rto_low_packets = c.irn_rto_low_packets;
        // IRN NAKs the first packet past a gap unless packets of a QP take several paths (behind
        // a reorder engine, which has waited for the late ones, at once: apply_receive_side).
        n.placement.nak_delay_ns = spreads_per_packet(mode) ? c.irn_reorder_wait_ns : 0;
        n.reorder.hold_timeout_ns = std::max<uint64_t>(c.irn_reorder_wait_ns, 1000);
      }
      n.rc_engine = control::RcEngineSettings{};  // no host port: the RC engine is the host
      n.cc = c.cc;
      if ((c.cc.mode == control::CcMode::kHpcc || c.cc.mode == control::CcMode::kDctcp) &&
          n.cc.base_rtt_ns == 0) {
        // HPCC's T (and DCTCP's window, a BDP) as ns-3 HPCC computes it (third.cc: rtt = 2 x the
        // path's delay + the packet's transmission delay over its hops), for the longest path:
        // 4 links, 6 with three tiers.
        const double links = c.tiers == 3 ? 6 : 4;
        const double frame_bits = (c.mtu + 78.0) * 8;  // headers, ICRC, preamble, IFG, FCS
        n.cc.base_rtt_ns = static_cast<uint64_t>(
            2 * links * static_cast<double>(c.delay_ns) + links * frame_bits / c.link_gbps);
      }
      hosts_.push_back(std::move(h));
    }
  }

  const double leaf_spine_gbps = c.leaf_spine_rate();  // --oversubscription's, if given
  const double spine_super_gbps = c.spine_super_rate();
  uint32_t switch_index = 0;
  for (uint32_t p = 0; p < c.planes; ++p) {
    const std::string pre = plane_prefix(p);
    for (uint32_t gl = 0; gl < leaves_per_plane_; ++gl) {
      const uint32_t q = gl / L, l = gl % L;
      const std::string pod = pre + pod_prefix(q);
      SwitchSpec s;
      s.name = pod + "leaf" + std::to_string(l);
      s.plane = p;
      s.leaf = true;
      s.tier = Tier::kLeaf;
      s.pod = q;
      s.index = gl;
      s.config = base_switch(c, mode, s.name, seed, switch_index++);
      // spray-rules all-roce: the spines' catch-all at the leaf too (Fabric adds per-QP rules
      // otherwise).
      if (is_spray(mode) && c.spray_rules == "all-roce") {
        s.config.tcam.rules.push_back(transit_spray_rule(c));
      }
      for (uint32_t i = 0; i < H; ++i) {
        s.config.ports.push_back(port(c, "h" + std::to_string(gl * H + i)));
        control::GroupSettings g;
        g.name = "to_h" + std::to_string(gl * H + i);
        g.ports = {static_cast<uint16_t>(i)};
        g.flowlet_entries = 16;
        add_route(s.config, host_ip(l, i, q), 32, std::move(g));
      }
      // One group per remote leaf, every uplink in each: the route to a leaf can then lose a
      // spine that lost that leaf (as BGP withdraws it) while the other leaves keep it.
      std::vector<uint16_t> uplinks;
      for (uint32_t sp = 0; sp < c.spines; ++sp) {
        for (uint32_t k = 0; k < K; ++k) {
          uplinks.push_back(static_cast<uint16_t>(s.config.ports.size()));
          s.config.ports.push_back(port(
              c, pod + "spine" + std::to_string(sp) + "#" + std::to_string(k), leaf_spine_gbps));
        }
      }
      s.leaf_group.assign(leaves_per_plane_, -1);
      if (mode == FabricMode::kConweave) {  // two tiers (FabricConfig::check): pod 0
        control::ConweaveSwitchSettings& w = s.config.conweave;
        w.enabled = true;
        w.leaf = static_cast<int>(l);
        w.vtep = vtep_ip(l);
        for (uint32_t dl = 0; dl < L; ++dl) {
          if (dl != l) w.leaves.emplace_back(static_cast<uint8_t>(dl), vtep_ip(dl));
        }
        // Leaf to spine to leaf and back: four cables, propagation only (conweave-ns3's
        // m_rxToRId2BaseRTT: 4 x 1 us on its leaf-spine).
        w.base_rtt_ns = 4 * c.delay_ns;
        w.params = c.conweave;
        w.control_dscp = c.cc.cnp_dscp;
      }
      if (mode == FabricMode::kConga) {  // two tiers (FabricConfig::check): pod 0
        s.config.conga.leaf = static_cast<int>(l);
        s.config.conga.vtep = vtep_ip(l);
        for (uint32_t dl = 0; dl < L; ++dl) {
          if (dl != l) s.config.conga.leaves.emplace_back(static_cast<uint8_t>(dl), vtep_ip(dl));
        }
      }
      for (uint32_t dl = 0; dl < L; ++dl) {
        if (dl == l) continue;
        const std::string name = "to_" + pod + "leaf" + std::to_string(dl);
        s.leaf_group[q * L + dl] = static_cast<int32_t>(
            add_route(s.config, 0x0A000000u | (q << 16) | (dl << 8), 24,
                      mode == FabricMode::kConga      ? conga_group(c, name, uplinks, dl)
                      : mode == FabricMode::kConweave ? conweave_group(name, uplinks, dl)
                                                      : balanced_group(c, mode, name, uplinks)));
      }
      for (uint32_t r = 0; clos && r < c.pods; ++r) {
        // Every leaf of every other pod over every uplink (any spine reaches it through its
        // super-spines), a /24 each and not a /16 per pod: a leaf-spine link down in pod r
        // leaves that spine's whole super-spine plane without a way to that one leaf, and only
        // a route per leaf can withdraw the spine for it alone (as BGP does in a Clos without
        // aggregation, RFC 7938).
        if (r == q) continue;
        for (uint32_t dl = 0; dl < L; ++dl) {
          s.leaf_group[r * L + dl] = static_cast<int32_t>(add_route(
              s.config, 0x0A000000u | (r << 16) | (dl << 8), 24,
              balanced_group(c, mode,
                             "to_" + pre + "pod" + std::to_string(r) + ".leaf" + std::to_string(dl),
                             uplinks)));
        }
      }
      switches_.push_back(std::move(s));
    }
    for (uint32_t q = 0; q < c.pods; ++q) {
      const std::string pod = pre + pod_prefix(q);
      for (uint32_t sp = 0; sp < c.spines; ++sp) {
        SwitchSpec s;
        s.name = pod + "spine" + std::to_string(sp);
        s.plane = p;
        s.leaf = false;
        s.tier = Tier::kSpine;
        s.pod = q;
        s.index = sp;
        s.config = base_switch(c, mode, s.name, seed, switch_index++);
        for (uint32_t l = 0; l < L; ++l) {
          std::vector<uint16_t> down;
          for (uint32_t k = 0; k < K; ++k) {
            down.push_back(static_cast<uint16_t>(s.config.ports.size()));
            s.config.ports.push_back(port(
                c, pod + "leaf" + std::to_string(l) + "#" + std::to_string(k), leaf_spine_gbps));
          }
          add_route(s.config, 0x0A000000u | (q << 16) | (l << 8), 24,
                    balanced_group(c, mode, "to_" + pod + "leaf" + std::to_string(l), down));
        }
        if (clos) {
          std::vector<uint16_t> up;
          for (uint32_t m = 0; m < supers_per_column_; ++m) {
            for (uint32_t k = 0; k < K2; ++k) {
              up.push_back(static_cast<uint16_t>(s.config.ports.size()));
              s.config.ports.push_back(
                  port(c, pre + super_name(sp, m) + "#" + std::to_string(k), spine_super_gbps));
            }
          }
          s.pod_group.assign(c.pods, -1);
          for (uint32_t r = 0; r < c.pods; ++r) {
            if (r == q) continue;
            control::GroupSettings g =
                balanced_group(c, mode, "to_" + pre + "pod" + std::to_string(r), up);
            // Sprayed packets: the spine reads the path id's next digit, id / (the leaf's
            // uplinks), the leaf having chosen by the id modulo them. Reading the whole id, as
            // the leaf does, would relabel the leaf's choice: every id that reached this spine
            // from one leaf uplink would take the same super-spine link (measured: half the
            // spine-super links idle under spray).
            g.spray_path_divisor = std::min<uint32_t>(c.leaf_uplinks(), 256);
            s.pod_group[r] =
                static_cast<int32_t>(add_route(s.config, 0x0A000000u | (r << 16), 16, std::move(g)));
          }
        }
        // Parallel links to each leaf are a choice too: the spine sprays on them by the PPCID's
        // path id, as the leaf does on its uplinks, and with three tiers also on its links up
        // (by the id's next digit, above). Without it, spray reached the spine and stopped
        // there.
        if (is_spray(mode) && (K > 1 || clos)) s.config.tcam.rules.push_back(transit_spray_rule(c));
        switches_.push_back(std::move(s));
      }
    }
    for (uint32_t sp = 0; clos && sp < c.spines; ++sp) {
      for (uint32_t m = 0; m < supers_per_column_; ++m) {
        SwitchSpec s;
        s.name = pre + super_name(sp, m);
        s.plane = p;
        s.leaf = false;
        s.tier = Tier::kSuper;
        s.index = m;
        s.column = sp;
        s.config = base_switch(c, mode, s.name, seed, switch_index++);
        for (uint32_t q = 0; q < c.pods; ++q) {
          std::vector<uint16_t> down;
          for (uint32_t k = 0; k < K2; ++k) {
            down.push_back(static_cast<uint16_t>(s.config.ports.size()));
            s.config.ports.push_back(port(
                c, pre + pod_prefix(q) + "spine" + std::to_string(sp) + "#" + std::to_string(k),
                spine_super_gbps));
          }
          add_route(s.config, 0x0A000000u | (q << 16), 16,
                    balanced_group(c, mode, "to_" + pre + "pod" + std::to_string(q), down));
        }
        if (is_spray(mode) && K2 > 1) s.config.tcam.rules.push_back(transit_spray_rule(c));
        switches_.push_back(std::move(s));
      }
    }
  }

  const uint32_t hosts = static_cast<uint32_t>(hosts_.size());
  for (uint32_t p = 0; p < c.planes; ++p) {
    for (uint32_t h = 0; h < hosts; ++h) {
      const uint32_t leaf = leaf_index(p, hosts_[h].leaf);
      Cable cable;
      cable.a_node = h;
      cable.a_port = static_cast<uint16_t>(p);
      cable.b_node = switch_node(leaf);
      cable.b_port = static_cast<uint16_t>(hosts_[h].index);
      cable.name = hosts_[h].name + "-" + switches_[leaf].name;
      cables_.push_back(cable);
    }
    for (uint32_t gl = 0; gl < leaves_per_plane_; ++gl) {
      const uint32_t q = gl / L, l = gl % L;
      for (uint32_t sp = 0; sp < c.spines; ++sp) {
        for (uint32_t k = 0; k < K; ++k) {
          Cable cable;
          cable.a_node = switch_node(leaf_index(p, gl));
          cable.a_port = static_cast<uint16_t>(H + sp * K + k);
          cable.b_node = switch_node(spine_index(p, sp, q));
          cable.b_port = static_cast<uint16_t>(l * K + k);
          cable.name = switches_[leaf_index(p, gl)].name + "-" +
                       switches_[spine_index(p, sp, q)].name + "#" + std::to_string(k);
          cable.fabric = true;
          cable.upper = Tier::kSpine;
          cables_.push_back(cable);
        }
      }
    }
    for (uint32_t q = 0; clos && q < c.pods; ++q) {
      for (uint32_t sp = 0; sp < c.spines; ++sp) {
        for (uint32_t m = 0; m < supers_per_column_; ++m) {
          for (uint32_t k = 0; k < K2; ++k) {
            Cable cable;
            cable.a_node = switch_node(spine_index(p, sp, q));
            cable.a_port = static_cast<uint16_t>(L * K + m * K2 + k);
            cable.b_node = switch_node(super_index(p, sp, m));
            cable.b_port = static_cast<uint16_t>(q * K2 + k);
            cable.name = switches_[spine_index(p, sp, q)].name + "-" +
                         switches_[super_index(p, sp, m)].name + "#" + std::to_string(k);
            cable.fabric = true;
            cable.upper = Tier::kSuper;
            cables_.push_back(cable);
          }
        }
      }
    }
  }
  spread_cable_delays(c, seed);
}

void Topology::spread_cable_delays(const FabricConfig& c, uint64_t seed) {
  if (c.cable_spread_ns == 0) return;
  // Cables of different lengths: each gets delay_ns plus its own share of the spread, the same
  // both ways (both ends' egress carry it).
  uint64_t state = mix(seed ^ 0xCAB1E5ull);
  for (Cable& cable : cables_) {
    state = mix(state);
    const uint64_t delay = c.delay_ns + state % (c.cable_spread_ns + 1);
    for (const auto& [node, port] : {std::pair{cable.a_node, cable.a_port}, std::pair{cable.b_node, cable.b_port}}) {
      if (node < hosts_.size()) {
        hosts_[node].nic.uplinks.at(port).link.delay_ns = delay;
      } else {
        switches_[node - hosts_.size()].config.ports.at(port).link.delay_ns = delay;
      }
    }
  }
}

uint32_t Topology::leaf_index(uint32_t plane, uint32_t leaf) const {
  return plane * switches_per_plane_ + leaf;
}

uint32_t Topology::spine_index(uint32_t plane, uint32_t spine, uint32_t pod) const {
  return plane * switches_per_plane_ + leaves_per_plane_ + pod * spines_per_pod_ + spine;
}

uint32_t Topology::super_index(uint32_t plane, uint32_t column, uint32_t m) const {
  return plane * switches_per_plane_ + leaves_per_plane_ + spines_per_plane_ +
         column * supers_per_column_ + m;
}

std::vector<uint32_t> Topology::find_cables(const std::string& link) const {
  std::vector<uint32_t> out;
  // "leaf0-spine3" names every parallel link; "p1.leaf0-spine3" is short for
  // "p1.leaf0-p1.spine3", and "pod1.leaf0-spine3" for "pod1.leaf0-pod1.spine3": the far end
  // takes the plane and pod qualifiers of the near one it leaves out (a super-spine, in no
  // pod, takes only the plane).
  std::string want = link;
  if (const size_t dash = want.find('-'); dash != std::string::npos) {
    const auto qualifier = [](const std::string& name, size_t at, const char* word) -> size_t {
      // The length of "<word><digits>." at `at`, or 0.
      const size_t w = std::char_traits<char>::length(word);
      if (name.compare(at, w, word) != 0) return 0;
      size_t i = at + w;
      while (i < name.size() && name[i] >= '0' && name[i] <= '9') ++i;
      return i > at + w && i < name.size() && name[i] == '.' ? i + 1 - at : 0;
    };
    const std::string a = want.substr(0, dash);
    std::string b = want.substr(dash + 1);
    const size_t a_plane = qualifier(a, 0, "p");
    const size_t a_pod = qualifier(a, a_plane, "pod");
    if (a_plane > 0 && qualifier(b, 0, "p") == 0) b = a.substr(0, a_plane) + b;
    const size_t b_plane = qualifier(b, 0, "p");
    if (a_pod > 0 && qualifier(b, b_plane, "pod") == 0 &&
        (b.compare(b_plane, 4, "leaf") == 0 || b.compare(b_plane, 5, "spine") == 0)) {
      b = b.substr(0, b_plane) + a.substr(a_plane, a_pod) + b.substr(b_plane);
    }
    want = a + "-" + b;
  }
  const bool one = want.find('#') != std::string::npos;
  for (uint32_t i = 0; i < cables_.size(); ++i) {
    const std::string& name = cables_[i].name;
    if (one ? name == want : (name == want || name.rfind(want + "#", 0) == 0)) out.push_back(i);
  }
  return out;
}

std::vector<std::pair<uint32_t, uint16_t>> Topology::find_link_ends(const std::string& link) const {
  std::vector<std::pair<uint32_t, uint16_t>> out;
  const size_t gt = link.find('>');
  if (gt == std::string::npos) {
    for (const uint32_t c : find_cables(link)) {
      for (const auto& end : cables_[c].ends()) out.push_back(end);
    }
    return out;
  }
  // "A>B[#k]": cables are named with the leaf (or host) first, so try both orders.
  const std::string from = link.substr(0, gt);
  std::string to = link.substr(gt + 1), suffix;
  if (const size_t hash = to.find('#'); hash != std::string::npos) {
    suffix = to.substr(hash);
    to = to.substr(0, hash);
  }
  if (from.empty() || to.empty() || from.find('#') != std::string::npos) return out;
  std::vector<uint32_t> cables = find_cables(from + "-" + to + suffix);
  if (cables.empty()) cables = find_cables(to + "-" + from + suffix);
  for (const uint32_t c : cables) {
    for (const auto& [node, port] : cables_[c].ends()) {
      // The plane prefix may have been left out of B ("p1.spine3>leaf1"): match A by the
      // cable's name of that end.
      const std::string name = node_name(node);
      if (name == from || (from.find('.') == std::string::npos && name.ends_with("." + from))) {
        out.emplace_back(node, port);
      }
    }
  }
  return out;
}

std::optional<uint32_t> Topology::find_switch(const std::string& name) const {
  for (uint32_t i = 0; i < switches_.size(); ++i) {
    if (switches_[i].name == name) return i;
  }
  return std::nullopt;
}

std::optional<uint32_t> Topology::find_host(const std::string& name) const {
  for (uint32_t i = 0; i < hosts_.size(); ++i) {
    if (hosts_[i].name == name) return i;
  }
  return std::nullopt;
}

std::string Topology::node_name(uint32_t node) const {
  if (node < hosts_.size()) return hosts_[node].name;
  return switches_.at(node - hosts_.size()).name;
}

}  // namespace spraynet::fabric
