#include "dataplane/egress/ecn_marker.h"

#include <rte_mbuf.h>

#include <stdexcept>

#include "dataplane/wire/byte_order.h"
#include "dataplane/wire/ipv4_ttl.h"

namespace spraynet {

namespace {

constexpr uint8_t kEcnMask = 0x03;
constexpr uint8_t kNotEct = 0x00;
constexpr uint8_t kCe = 0x03;

}  // namespace

std::string EcnMarkerConfig::check() const {
  for (size_t tc = 0; tc < classes.size(); ++tc) {
    const EcnClassConfig& c = classes[tc];
    if (!c.enabled) continue;
    const std::string at = "classes[" + std::to_string(tc) + "].";
    if (c.kmin_bytes > c.kmax_bytes) {
      return at + "kmin_bytes: must be <= kmax_bytes (" + std::to_string(c.kmax_bytes) + ")";
    }
    if (!(c.pmax > 0.0 && c.pmax <= 1.0)) return at + "pmax: must be in (0, 1]";
  }
  return {};
}

EcnMarker::EcnMarker(const EcnMarkerConfig& config) : config_(config), rng_(config.seed) {
  if (const std::string why = config_.check(); !why.empty()) {
    throw std::invalid_argument("ecn: " + why);
  }
}

double EcnMarker::mark_probability(uint8_t tc, uint64_t queue_bytes) const {
  if (tc >= config_.classes.size()) return 0;
  const EcnClassConfig& c = config_.classes[tc];
  if (!c.enabled || queue_bytes <= c.kmin_bytes) return 0;
  if (queue_bytes > c.kmax_bytes) return 1;
  // kmin < q <= kmax, so kmax > kmin here.
  return c.pmax * static_cast<double>(queue_bytes - c.kmin_bytes) /
         static_cast<double>(c.kmax_bytes - c.kmin_bytes);
}

double EcnMarker::next_uniform() {
  return static_cast<double>(rng_() >> 11) * 0x1.0p-53;  // as LinkEmulator draws
}

bool EcnMarker::draw(uint8_t tc, uint64_t queue_bytes) {
  const double p = mark_probability(tc, queue_bytes);
  if (p <= 0) return false;
  // Above kmax every packet is marked without a draw, so the draws (and the marks after them)
  // do not depend on how long the queue stayed over kmax.
  return p >= 1 || next_uniform() < p;
}

bool EcnMarker::on_packet(rte_mbuf* m, uint16_t l3_offset, uint8_t tc, uint64_t queue_bytes) {
  return draw(tc, queue_bytes) && mark(m, l3_offset, tc);
}

bool EcnMarker::on_frame(rte_mbuf* m, uint8_t tc, uint64_t queue_bytes) {
  if (!draw(tc, queue_bytes)) return false;
  const int l3 = ipv4_offset(m);
  if (l3 < 0) {
    ++counters_[tc].not_ipv4;
    return false;
  }
  return mark(m, static_cast<uint16_t>(l3), tc);
}

bool EcnMarker::mark(rte_mbuf* m, uint16_t l3_offset, uint8_t tc) {
  EcnClassCounters& k = counters_[tc];
  if (m == nullptr || size_t{l3_offset} + 20 > rte_pktmbuf_data_len(m)) {
    ++k.not_ipv4;
    return false;
  }
  uint8_t* ip = rte_pktmbuf_mtod_offset(m, uint8_t*, l3_offset);
  if ((ip[0] >> 4) != 4) {
    ++k.not_ipv4;
    return false;
  }
  const uint8_t ecn = ip[1] & kEcnMask;
  if (ecn == kNotEct) {
    ++k.not_ect;
    return false;
  }
  if (ecn == kCe) {
    ++k.already_ce;
    return false;
  }
  ipv4_set_ce(ip);
  ++k.marked;
  return true;
}

uint64_t EcnMarker::total_marked() const {
  uint64_t n = 0;
  for (const EcnClassCounters& k : counters_) n += k.marked;
  return n;
}

int ipv4_offset(const rte_mbuf* m) {
  if (m == nullptr || rte_pktmbuf_data_len(m) < 14) return -1;
  const uint8_t* eth = rte_pktmbuf_mtod(m, const uint8_t*);
  uint16_t type = load_be16(eth + 12);
  int l3 = 14;
  if (type == 0x8100) {
    if (rte_pktmbuf_data_len(m) < 18) return -1;
    type = load_be16(eth + 16);
    l3 = 18;
  }
  return type == 0x0800 ? l3 : -1;
}

bool ipv4_set_ce(uint8_t* ip) {
  const uint8_t ecn = ip[1] & kEcnMask;
  if (ecn == kNotEct) return false;
  if (ecn == kCe) return true;
  const uint16_t old_word = load_be16(ip);  // version/IHL and TOS
  ip[1] = static_cast<uint8_t>(ip[1] | kCe);
  patch_ipv4_checksum(ip, old_word, load_be16(ip));
  return true;
}

}  // namespace spraynet
