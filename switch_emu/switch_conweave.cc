// SwitchNode's ConWeave part (Song et al., SIGCOMM 2023; dataplane/forwarding/conweave_tx.h and
// conweave_rx.h hold the two leaves' rules): the RoCE data a leaf's conweave groups carry leaves
// in ConWeave's overlay (dataplane/wire/conweave_overlay.h) on the uplink ConweaveTx chooses; at
// the destination leaf ConweaveRx may hold it, and RTT replies, CLEARs and NOTIFYs go back to the
// source leaf as control frames through this same pipeline. Acknowledgements and CNPs are not
// tunnelled (ECMP, as in conweave-ns3). Spines route the overlay by its outer header and need
// nothing of this.
#include <algorithm>

#include "dataplane/splitmix64.h"
#include "dataplane/wire/conweave_overlay.h"
#include "dataplane/wire/flow_key.h"
#include "switch_emu/switch_node.h"

namespace spraynet::switch_emu {

namespace {

// The flow's key at both leaves: its 5-tuple's addresses and ports (the inner packet's).
uint64_t conweave_flow_key(const ParsedPacket& p) {
  return splitmix64_mix(uint64_t{p.src_ip} << 32 | p.dst_ip) ^
         (uint64_t{p.src_port} << 16 | p.dst_port);
}

constexpr uint64_t kAgeEveryNs = 1'000'000;

}  // namespace

void SwitchNode::make_conweave() {
  const control::ConweaveSwitchSettings& k = config_.conweave;
  if (!k.enabled) return;
  conweave_ = std::make_unique<Conweave>(k.params, config_.seed * 0x9E3779B97F4A7C15ull + 43);
  conweave_->vtep = vtep_by_leaf(k.leaf, k.vtep, k.leaves);
  conweave_->group_leaf.assign(config_.groups.size(), -1);
  for (size_t g = 0; g < config_.groups.size(); ++g) {
    if (config_.groups[g].mode == "conweave") {
      conweave_->group_leaf[g] = config_.groups[g].overlay_leaf;
    }
  }
}

bool SwitchNode::conweave_arrival(Lane& L, uint16_t port, rte_mbuf* m, ParsedPacket& p,
                                  uint64_t now_ns) {
  uint32_t dst = 0;
  const auto w = conweave_parse(m, &dst);
  if (!w || dst != config_.conweave.vtep) return true;  // routed on its outer header
  ConweaveTx& tx = conweave_->tx;
  switch (w->message) {
    case ConweaveMessage::kRttReply:
    case ConweaveMessage::kClear:
      tx.on_reply(w->flow_key, w->message == ConweaveMessage::kClear, w->tag.epoch, w->tag.phase,
                  now_ns);
      break;
    case ConweaveMessage::kNotify:
      tx.on_notify(w->leaf, w->tag.member, now_ns);
      break;
    case ConweaveMessage::kData: {
      const bool ce = (rte_pktmbuf_mtod(m, const uint8_t*)[kVxlanOuterIpOffset + 1] & 3) == 3;
      conweave_decapsulate(m);
      const ParseStatus s = parser_.parse(m, p);
      if (s != ParseStatus::kOk || p.kind == PacketKind::kMacControl) {
        drop_unparsed(L, port, s, m);
        return false;
      }
      const uint64_t key = conweave_flow_key(p);
      const ConweaveRx::Result r = conweave_->rx.on_data(key, w->tag, ce, now_ns, m);
      ConweaveWire reply;
      reply.tag.epoch = w->tag.epoch;
      reply.tag.member = w->tag.member;
      reply.flow_key = key;
      if (r.rtt_reply || r.clear) {
        reply.message = r.clear ? ConweaveMessage::kClear : ConweaveMessage::kRttReply;
        reply.tag.phase = r.clear ? 1 : 0;
        conweave_send(L, port, w->leaf, reply, now_ns);
      }
      if (r.notify) {
        reply.message = ConweaveMessage::kNotify;
        reply.tag.phase = 0;
        reply.flow_key = 0;
        conweave_send(L, port, w->leaf, reply, now_ns);
      }
      if (!r.held) return true;
      m->port = port;  // where route_one sends it from when it is let out
      ++L.counters.conweave_held;
      return false;
    }
  }
  ++L.counters.conweave_control_consumed;
  rte_pktmbuf_free(m);
  return false;
}

bool SwitchNode::conweave_tunnels(const ParsedPacket& p, uint32_t group) const {
  // RoCE data: every RC opcode up to RDMA READ response last (0x10); not the acknowledgements
  // (0x11, 0x12) or CNPs (0x81).
  return p.kind == PacketKind::kRoce && p.bth_opcode <= 0x10 &&
         group < conweave_->group_leaf.size() && conweave_->group_leaf[group] >= 0 &&
         lanes_[0]->groups[group]->mode() == LbMode::kConweave;
}

uint16_t SwitchNode::conweave_select(const ParsedPacket& p, uint32_t group,
                                     std::span<const PathLoad> view, uint64_t now_ns,
                                     ConweaveTag& tag) {
  const auto members = lanes_[0]->groups[group]->member_ports();
  PathLoad loads[CongaTables::kUplinks];
  for (size_t i = 0; i < members.size(); ++i) {
    loads[i] = members[i] < view.size() ? view[members[i]] : PathLoad{0, false};
  }
  const auto leaf = static_cast<uint8_t>(conweave_->group_leaf[group]);
  const ConweaveTx::Decision d = conweave_->tx.on_data(
      conweave_flow_key(p), leaf, now_ns, std::span<const PathLoad>(loads, members.size()),
      config_.conweave.base_rtt_ns);
  if (d.member == ConweaveTx::kNoMember) return PathSelector::kNoPort;
  tag = d.tag;
  return members[d.member];
}

bool SwitchNode::conweave_tunnel(Lane& L, uint16_t in_port, rte_mbuf* m, uint32_t group,
                                 const ConweaveTag& tag, uint32_t hash) {
  const auto leaf = static_cast<size_t>(conweave_->group_leaf[group]);
  const VxlanTunnel tunnel{config_.conweave.vtep, conweave_->vtep[leaf], hash};
  if (conweave_encapsulate(m, tunnel, tag, static_cast<uint8_t>(config_.conweave.leaf),
                           config_.conweave.vni)) {
    return true;
  }
  count_drop(L, in_port, &SwitchDropCounters::overlay_no_headroom);
  rte_pktmbuf_free(m);
  return false;
}

void SwitchNode::conweave_send(Lane& L, uint16_t in_port, uint8_t leaf, const ConweaveWire& message,
                               uint64_t now_ns) {
  if (leaf >= conweave_->vtep.size() || conweave_->vtep[leaf] == 0) return;  // no tunnel to it
  rte_mbuf* m = rte_pktmbuf_alloc(pool_);
  if (m == nullptr) {
    ++L.counters.conweave_control_no_mbuf;
    return;
  }
  ConweaveWire w = message;
  w.leaf = static_cast<uint8_t>(config_.conweave.leaf);
  w.vni = config_.conweave.vni;
  uint8_t macs[12];
  std::memcpy(macs, macs_[in_port].data(), 6);
  std::memcpy(macs + 6, macs_[in_port].data(), 6);
  const VxlanTunnel tunnel{config_.conweave.vtep, conweave_->vtep[leaf],
                           static_cast<uint32_t>(message.flow_key)};
  if (!conweave_control(m, macs, tunnel, config_.conweave.control_dscp, w)) {
    rte_pktmbuf_free(m);
    ++L.counters.conweave_control_no_mbuf;
    return;
  }
  ++L.counters.conweave_control_sent;
  route_one(L, in_port, m, now_ns);
}

void SwitchNode::conweave_poll(Lane& L, uint64_t now_ns) {
  Conweave& c = *conweave_;
  if (c.rx.held_now() != 0 && c.rx.next_due_ns() <= now_ns) {
    c.released.clear();
    c.rx.take_due(now_ns, c.released);
    for (rte_mbuf* m : c.released) {
      ++L.counters.conweave_released;
      route_one(L, m->port < egress_.size() ? m->port : 0, m, now_ns);
    }
    c.released.clear();
  }
  if (now_ns >= c.next_age_ns) {
    c.tx.age(now_ns);
    c.rx.age(now_ns);
    c.next_age_ns = now_ns + kAgeEveryNs;
  }
}

void SwitchNode::route_one(Lane& L, uint16_t in_port, rte_mbuf* m, uint64_t now_ns) {
  // Its own parse and match, not the burst's scratch: this may run in the middle of a burst.
  ParsedPacket p;
  const ParseStatus s = parser_.parse(m, p);
  if (s != ParseStatus::kOk || p.kind == PacketKind::kMacControl) {
    drop_unparsed(L, in_port, s, m);
    return;
  }
  const ParsedPacket* ip[1] = {&p};
  TcamMatch match;
  tcam_->classify(ip, 1, &match, &L.tcam_cache);
  uint32_t dst = p.dst_ip;
  uint32_t group = RouteTable::kNoRoute;
  routes_->lookup_burst(std::span<const uint32_t>(&dst, 1), std::span<uint32_t>(&group, 1),
                        L.route_cache);
  const uint32_t hash = hasher_.hash(make_flow_key(p, hasher_.config().dest_qp_in_key));
  forward(L.index, L, in_port, m, p, match, group, hash, now_ns);
}

}  // namespace spraynet::switch_emu
