// SwitchNode's CONGA part (Alizadeh et al., SIGCOMM 2014): the DRE of every port, the CE a
// departing overlay packet carries, and on a leaf the tunnel to other leaves with the
// Congestion-To-Leaf / Congestion-From-Leaf tables (dataplane/forwarding/conga_tables.h) and the
// overlay on the wire (dataplane/wire/conga_overlay.h). The pipeline calls in at three points:
// arrival (receive), the choice of uplink and the tunnel (forward), departure (enqueue).
#include <algorithm>
#include <stdexcept>

#include "dataplane/wire/conga_overlay.h"
#include "switch_emu/switch_node.h"

namespace spraynet::switch_emu {

void SwitchNode::make_conga() {
  const control::CongaSettings& k = config_.conga;
  if (!k.enabled) return;
  conga_ = std::make_unique<Conga>();
  for (const auto& port : config_.ports) conga_->dre.emplace_back(k.dre, port.link.rate_gbps);
  conga_->group_leaf.assign(config_.groups.size(), -1);
  if (k.leaf < 0) return;  // a spine: DREs and CE only
  conga_->vtep = vtep_by_leaf(k.leaf, k.vtep, k.leaves);
  conga_->tables =
      std::make_unique<CongaTables>(static_cast<unsigned>(conga_->vtep.size()), k.aging_ns);
  for (size_t g = 0; g < config_.groups.size(); ++g) {
    conga_->group_leaf[g] = config_.groups[g].overlay_leaf;
  }
  conga_->metrics.resize(CongaTables::kUplinks);
}

uint8_t SwitchNode::conga_port_metric(uint16_t port, uint64_t now_ns) const {
  if (!conga_ || port >= conga_->dre.size()) return 0;
  // metric() brings the register to now (the decays due), which changes no answer.
  return const_cast<DiscountingRateEstimator&>(conga_->dre[port]).metric(now_ns);
}

bool SwitchNode::conga_arrival(Lane& L, uint16_t port, rte_mbuf* m, ParsedPacket& p,
                               uint64_t now_ns) {
  uint32_t dst = 0;
  const auto fields = conga_parse(m, &dst);
  if (!fields) return true;
  if (!conga_->tables || dst != config_.conga.vtep) {
    ++conga_->counters.transit;  // routed on its outer header
    return true;
  }
  CongaTables& t = *conga_->tables;
  t.record_arrival(fields->src_leaf, fields->lbtag, fields->ce, now_ns);
  if (fields->fb_valid) {
    t.record_feedback(fields->src_leaf, fields->fb_lbtag, fields->fb_metric, now_ns);
  }
  conga_decapsulate(m);
  ++conga_->counters.decapsulated;
  const ParseStatus s = parser_.parse(m, p);
  if (s == ParseStatus::kOk && p.kind != PacketKind::kMacControl) return true;
  drop_unparsed(L, port, s, m);
  return false;
}

std::vector<uint32_t> SwitchNode::vtep_by_leaf(
    int leaf, uint32_t vtep, std::span<const std::pair<uint8_t, uint32_t>> leaves) {
  size_t n = static_cast<size_t>(leaf) + 1;
  for (const auto& [id, address] : leaves) n = std::max(n, size_t{id} + 1);
  std::vector<uint32_t> out(n, 0);
  out[static_cast<size_t>(leaf)] = vtep;
  for (const auto& [id, address] : leaves) out[id] = address;
  return out;
}

void SwitchNode::drop_unparsed(Lane& L, uint16_t port, ParseStatus s, rte_mbuf* m) {
  const size_t cause = static_cast<size_t>(s == ParseStatus::kOk ? ParseStatus::kNotIpv4 : s);
  L.drops.parse[cause]++;
  L.port_drops[port].parse[cause]++;
  rte_pktmbuf_free(m);
}

uint16_t SwitchNode::conga_select(PathSelector& sel, int leaf, uint32_t hash,
                                  std::span<const PathLoad> view, uint64_t now_ns) {
  const auto members = sel.member_ports();
  const auto dst = static_cast<uint8_t>(leaf);
  for (size_t i = 0; i < members.size(); ++i) {
    const uint8_t local = conga_->dre[members[i]].metric(now_ns);
    const uint8_t remote = conga_->tables->remote_metric(dst, static_cast<uint8_t>(i), now_ns);
    conga_->metrics[i] = std::max(local, remote);
  }
  return sel.select_conga(hash, now_ns, view,
                          std::span<const uint8_t>(conga_->metrics.data(), members.size()));
}

bool SwitchNode::conga_tunnel(Lane& L, uint16_t in_port, rte_mbuf* m, const PathSelector& sel,
                              uint16_t out_port, int leaf, uint32_t hash, uint64_t now_ns) {
  const auto members = sel.member_ports();
  const auto it = std::find(members.begin(), members.end(), out_port);
  CongaFields f;
  f.lbtag = static_cast<uint8_t>(it - members.begin());
  f.ce = 0;  // this leaf's uplink raises it on departure, as every hop does
  f.src_leaf = static_cast<uint8_t>(config_.conga.leaf);
  f.vni = config_.conga.vni;
  if (const auto fb = conga_->tables->next_feedback(static_cast<uint8_t>(leaf), now_ns)) {
    f.fb_valid = true;
    f.fb_lbtag = fb->lbtag;
    f.fb_metric = fb->metric;
  }
  const CongaTunnel tunnel{config_.conga.vtep, conga_->vtep[static_cast<size_t>(leaf)], hash};
  if (!conga_encapsulate(m, tunnel, f)) {
    count_drop(L, in_port, &SwitchDropCounters::overlay_no_headroom);
    rte_pktmbuf_free(m);
    return false;
  }
  ++conga_->counters.encapsulated;
  if (f.fb_valid) ++conga_->counters.feedback_carried;
  return true;
}

void SwitchNode::conga_departure(uint16_t out_port, rte_mbuf* m, uint64_t now_ns) {
  DiscountingRateEstimator& dre = conga_->dre[out_port];
  dre.add(rte_pktmbuf_pkt_len(m), now_ns);
  const auto fields = conga_parse(m);
  if (!fields) return;
  const uint8_t metric = dre.metric(now_ns);
  if (metric > fields->ce) {
    conga_raise_ce(m, metric);
    ++conga_->counters.ce_raised;
  }
}

}  // namespace spraynet::switch_emu
