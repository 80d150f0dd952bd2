#include "fabric/flow_path_delays.h"

#include <algorithm>
#include <stdexcept>

#include "dataplane/egress/link_emulator.h"

namespace spraynet::fabric {

namespace {

// RC opcodes (IBA 9.2: 0x00-0x1F); CNPs (0x81) and other transports are not a flow's data or
// acknowledgements and may take another path.
constexpr uint8_t kLastRcOpcode = 0x1F;

}  // namespace

FlowPathDelays::FlowPathDelays(const std::vector<QpFlow>& flows,
                               const std::vector<uint32_t>& host_ips,
                               const std::vector<uint32_t>& first_qpn,
                               const std::vector<uint32_t>& qps,
                               std::vector<uint32_t> cable_delay_ns, uint32_t first_psn,
                               double packet_ns, std::vector<float> ns_per_bit)
    : cable_delay_ns_(std::move(cable_delay_ns)),
      first_qpn_(first_qpn),
      flow_dst_(flows.size()),
      first_psn_(first_psn),
      packet_ns_(packet_ns),
      ns_per_bit_(std::move(ns_per_bit)),
      fwd_at_dst_(flows.size()),
      seen_(flows.size()) {
  static const rte_mbuf_dynfield kPathStamp = {"spraynet_fabric_path_ns", sizeof(Stamp),
                                               alignof(Stamp), 0};
  offset_ = rte_mbuf_dynfield_register(&kPathStamp);
  if (offset_ < 0) throw std::runtime_error("fabric: cannot register the path-delay mbuf field");
  if (host_ips.size() != first_qpn.size() || qps.size() != first_qpn.size()) {
    throw std::invalid_argument("FlowPathDelays: one IP, first QP and QP count per host");
  }
  role_.resize(qps.size());
  for (size_t h = 0; h < qps.size(); ++h) {
    role_[h].assign(qps[h], -1);
    host_of_ip_.emplace(host_ips[h], static_cast<uint32_t>(h));
  }
  for (size_t i = 0; i < flows.size(); ++i) {
    const QpFlow& f = flows[i];
    const auto flow = static_cast<int32_t>(i);
    flow_dst_[i] = f.dst;
    if (f.src < role_.size() && f.src_qp_index < role_[f.src].size()) {
      role_[f.src][f.src_qp_index] = flow;
    }
    if (f.dst < role_.size() && f.dst_qp_index < role_[f.dst].size()) {
      role_[f.dst][f.dst_qp_index] = -2 - flow;
    }
  }
}

bool FlowPathDelays::rc_frame(const rte_mbuf* m, uint32_t& dst_ip, uint32_t& dst_qpn,
                              uint32_t& psn) {
  // Read straight from the first segment (where the nodes put every header): this runs on
  // every frame a host sends or receives, and the frames are the fabric's own, already parsed
  // and checked by the nodes that handled them.
  const auto* f = rte_pktmbuf_mtod(m, const uint8_t*);
  const uint32_t len = rte_pktmbuf_data_len(m);
  uint32_t l3 = 14;
  if (len < l3 + 20) return false;
  uint16_t type = static_cast<uint16_t>(f[12] << 8 | f[13]);
  if (type == 0x8100) {
    l3 += 4;
    type = static_cast<uint16_t>(f[16] << 8 | f[17]);
  }
  if (type != 0x0800 || len < l3 + 20 || (f[l3] >> 4) != 4 || f[l3 + 9] != 17) return false;
  const uint32_t l4 = l3 + 4u * (f[l3] & 0xF);
  const uint32_t bth = l4 + 8;
  if (len < bth + 12 || (f[l4 + 2] << 8 | f[l4 + 3]) != 4791 || f[bth] > kLastRcOpcode) {
    return false;
  }
  dst_ip = static_cast<uint32_t>(f[l3 + 16]) << 24 | static_cast<uint32_t>(f[l3 + 17]) << 16 |
           static_cast<uint32_t>(f[l3 + 18]) << 8 | f[l3 + 19];
  dst_qpn =
      static_cast<uint32_t>(f[bth + 5]) << 16 | static_cast<uint32_t>(f[bth + 6]) << 8 | f[bth + 7];
  psn = static_cast<uint32_t>(f[bth + 9]) << 16 | static_cast<uint32_t>(f[bth + 10]) << 8 |
        f[bth + 11];
  return true;
}

int32_t FlowPathDelays::role(uint32_t host, uint32_t qpn) const {
  if (host >= role_.size() || qpn < first_qpn_[host]) return -1;
  const uint32_t index = qpn - first_qpn_[host];
  return index < role_[host].size() ? role_[host][index] : -1;
}

void FlowPathDelays::depart(uint32_t host, rte_mbuf* const* frames, uint16_t n) const {
  for (uint16_t i = 0; i < n; ++i) {
    Stamp* s = stamp(frames[i]);
    s->path_ns = 0;
    s->echo_ns = kUnknown;
    s->echo_tail_ns = kUnknown;
    uint32_t ip = 0, qpn = 0, psn = 0;
    if (!rc_frame(frames[i], ip, qpn, psn)) continue;
    const auto to = host_of_ip_.find(ip);
    if (to == host_of_ip_.end()) continue;
    // Back to the flow's sender from its receiver (this host): what came this way so far.
    const int32_t flow = role(to->second, qpn);
    if (flow >= 0 && flow_dst_[static_cast<size_t>(flow)] == host) {
      s->echo_ns = fwd_at_dst_[static_cast<size_t>(flow)].least;
      s->echo_tail_ns = fwd_at_dst_[static_cast<size_t>(flow)].tail;
    }
  }
}

void FlowPathDelays::cross(uint32_t cable, rte_mbuf* const* frames, uint16_t n) const {
  const uint32_t d = cable < cable_delay_ns_.size() ? cable_delay_ns_[cable] : 0;
  for (uint16_t i = 0; i < n; ++i) {
    Stamp* s = stamp(frames[i]);
    s->path_ns = s->path_ns > kUnknown - d ? kUnknown : s->path_ns + d;
  }
}

void FlowPathDelays::arrive(uint32_t host, rte_mbuf* const* frames, uint16_t n) {
  for (uint16_t i = 0; i < n; ++i) {
    uint32_t ip = 0, qpn = 0, psn = 0;
    if (!rc_frame(frames[i], ip, qpn, psn)) continue;
    const int32_t r = role(host, qpn);
    if (r == -1) continue;
    const Stamp* s = stamp(frames[i]);
    if (r >= 0) {  // at the flow's sender: the way back, and the way there it echoes
      Seen& seen = seen_[static_cast<size_t>(r)];
      // The way back that counts is the one of the frame acknowledging (or carrying) the
      // highest PSN: it completes what was sent. Of equals, the first to arrive completes it:
      // the least delay is a bound.
      const uint32_t at = (psn - first_psn_) & 0xFFFFFF;
      if (seen.reverse == kUnknown || at > seen.reverse_psn) {
        seen.reverse_psn = at;
        seen.reverse = s->path_ns;
      } else if (at == seen.reverse_psn) {
        seen.reverse = std::min(seen.reverse, s->path_ns);
      }
      seen.forward = std::min(seen.forward, s->echo_ns);
      if (s->echo_tail_ns != kUnknown) {
        seen.forward_tail = seen.forward_tail == kUnknown
                                ? s->echo_tail_ns
                                : std::max(seen.forward_tail, s->echo_tail_ns);
      }
    } else {
      AtDestination& fwd = fwd_at_dst_[static_cast<size_t>(-2 - r)];
      fwd.least = std::min(fwd.least, s->path_ns);
      // Packets ahead of this one (by PSN) held the sender's link before it.
      const uint32_t ahead = (psn - first_psn_) & 0xFFFFFF;
      const size_t flow = static_cast<size_t>(-2 - r);
      const double own =
          flow < ns_per_bit_.size()
              ? static_cast<double>(LinkEmulator::wire_bits(rte_pktmbuf_pkt_len(frames[i]))) *
                    ns_per_bit_[flow]
              : 0.0;
      const double tail = static_cast<double>(ahead) * packet_ns_ + s->path_ns + own;
      const auto t = static_cast<uint32_t>(std::min(tail, static_cast<double>(kUnknown - 1)));
      fwd.tail = fwd.tail == kUnknown ? t : std::max(fwd.tail, t);
    }
  }
}

}  // namespace spraynet::fabric
