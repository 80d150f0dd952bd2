#include "dataplane/nic/spray_engine.h"

#include <rte_mbuf.h>

#include <algorithm>
#include <bit>
#include <stdexcept>

#include "dataplane/forwarding/flowlet_table.h"  // scale_to_range
#include "dataplane/memory_usage.h"
#include "dataplane/wire/byte_order.h"
#include "dataplane/wire/packet_parser.h"

namespace spraynet {

namespace {

// Index of the k-th set bit of mask (k < popcount(mask)).
uint16_t nth_set_bit(uint32_t mask, uint32_t k) {
  for (; k > 0; --k) mask &= mask - 1;  // clear the lowest set bit k times
  return static_cast<uint16_t>(std::countr_zero(mask));
}

}  // namespace

std::string_view to_string(SprayMode mode) {
  switch (mode) {
    case SprayMode::kFlow:
      return "flow";
    case SprayMode::kRoundRobin:
      return "rr";
    case SprayMode::kWeighted:
      return "weighted";
    case SprayMode::kAdaptive:
      return "adaptive";
  }
  return "?";
}

std::optional<SprayMode> parse_spray_mode(std::string_view name) {
  if (name == "flow") return SprayMode::kFlow;
  if (name == "rr") return SprayMode::kRoundRobin;
  if (name == "weighted") return SprayMode::kWeighted;
  if (name == "adaptive") return SprayMode::kAdaptive;
  return std::nullopt;
}

std::string SprayEngineConfig::check() const {
  if (to_string(mode) == "?") return "mode: unknown mode " + std::to_string(unsigned(mode));
  if (layout != PpcidLayout::kTsHigh && layout != PpcidLayout::kPathHigh) {
    return "layout: unknown layout " + std::to_string(unsigned(layout));
  }
  if (path_ids.empty()) return "path_ids: no uplinks (one path id per uplink)";
  if (path_ids.size() > SprayEngine::kMaxUplinks) {
    return "path_ids: " + std::to_string(path_ids.size()) + " uplinks, at most " +
           std::to_string(SprayEngine::kMaxUplinks);
  }
  const unsigned max_id = max_path_id(layout);
  if (fabric_paths > max_id + 1) {
    return "fabric_paths: " + std::to_string(fabric_paths) + " paths do not fit the " +
           std::string(to_string(layout)) + " layout (at most " + std::to_string(max_id + 1) + ")";
  }
  for (size_t i = 0; i < path_ids.size(); ++i) {
    if (path_ids[i] > max_id) {
      return "path_ids: path id " + std::to_string(path_ids[i]) + " of uplink " +
             std::to_string(i) + " does not fit the " + std::string(to_string(layout)) +
             " layout (0.." + std::to_string(max_id) + ")";
    }
    for (size_t j = 0; j < i; ++j) {
      // Two uplinks under one path id would make the fabric's per-path accounting (and any
      // receiver reading the PPCID) unable to tell them apart.
      if (path_ids[j] == path_ids[i]) {
        return "path_ids: path id " + std::to_string(path_ids[i]) + " given to uplinks " +
               std::to_string(j) + " and " + std::to_string(i);
      }
    }
  }
  return {};
}

SprayEngine::SprayEngine(const SprayEngineConfig& config)
    : path_ids_(config.path_ids),
      fabric_paths_(config.fabric_paths),
      layout_(config.layout),
      salt_(static_cast<uint32_t>(config.seed ^ (config.seed >> 32))),
      mode_(config.mode),
      weights_(nullptr),
      all_mask_(0),
      uplink_packets_(config.path_ids.size(), 0) {
  if (const std::string reason = config.check(); !reason.empty()) {
    throw std::invalid_argument("spray engine: " + reason);
  }
  all_mask_ = static_cast<uint32_t>((uint64_t{1} << path_ids_.size()) - 1);
  weights_.store(new SprayWeights{std::vector<uint32_t>(path_ids_.size(), 1), 0},
                 std::memory_order_release);
}

uint64_t SprayEngine::heap_bytes() const {
  uint64_t b = flow_rr_.heap_bytes() + flow_path_.heap_bytes() + wrr_.heap_bytes() +
               capacity_bytes(path_ids_) + capacity_bytes(uplink_packets_);
  if (const SprayWeights* w = weights_.load(std::memory_order_acquire)) {
    b += sizeof(SprayWeights) + capacity_bytes(w->weights);
  }
  return b;
}

SprayEngine::~SprayEngine() {
  delete weights_.load(std::memory_order_acquire);
}

std::unique_ptr<const SprayWeights> SprayEngine::publish_weights(
    std::unique_ptr<const SprayWeights> next) {
  if (next == nullptr) throw std::invalid_argument("spray engine: null weight table");
  if (next->weights.size() != path_ids_.size()) {
    throw std::invalid_argument("spray engine: " + std::to_string(next->weights.size()) +
                                " weights for " + std::to_string(path_ids_.size()) + " uplinks");
  }
  // Release: the lcore's acquire load sees the table fully built. The old table goes back to the
  // caller, not to delete: the lcore may be in the middle of reading it.
  std::unique_ptr<const SprayWeights> old(
      weights_.exchange(next.release(), std::memory_order_acq_rel));
  generation_.fetch_add(1, std::memory_order_release);
  return old;
}

uint32_t SprayEngine::eligible_mask(std::span<const PathLoad> loads) {
  uint32_t mask = 0;
  const size_t n = path_ids_.size();
  if (loads.size() < n) counters_.missing_load += n - loads.size();
  const size_t have = std::min(n, loads.size());
  for (size_t i = 0; i < have; ++i) mask |= uint32_t{loads[i].eligible} << i;
  return mask;
}

uint16_t SprayEngine::by_hash(uint32_t flow_hash, uint32_t mask) const {
  const uint32_t eligible = static_cast<uint32_t>(std::popcount(mask));
  // Not % eligible: a multiply-shift takes the top bits of the product, which depend on every bit
  // of the key, and costs no division. The Fibonacci multiply first spreads keys that differ only
  // in their low bits (sequential QPs, ports), which a bare multiply-shift would lump together.
  const uint32_t k = scale_to_range((flow_hash ^ salt_) * 0x9E3779B1u, eligible);
  return mask == all_mask_ ? static_cast<uint16_t>(k) : nth_set_bit(mask, k);
}

uint16_t SprayEngine::round_robin(uint32_t mask, uint32_t& cursor) {
  // The flow's k-th packet takes the (k mod E)-th of its E eligible uplinks: each flow cycles
  // through the eligible uplinks evenly, and flows that start together start on uplinks spread
  // by their slots' offsets. (Skipping an ineligible uplink to its successor instead would hand
  // the successor twice its share of new flows.)
  const uint32_t eligible = static_cast<uint32_t>(std::popcount(mask));
  uint32_t k = cursor++ % eligible;
  uint32_t m = mask;
  while (k-- > 0) m &= m - 1;  // drop the k lowest set bits
  return static_cast<uint16_t>(std::countr_zero(m));
}

uint16_t SprayEngine::weighted(uint32_t mask, size_t slot) {
  // The generation before the table: a table published in between restarts the state at the
  // next packet rather than never.
  const uint64_t generation = generation_.load(std::memory_order_acquire);
  const SprayWeights* table = weights_.load(std::memory_order_acquire);
  const std::vector<uint32_t>& w = table->weights;
  uint32_t candidates = 0;
  int64_t total = 0;
  for (uint32_t m = mask; m != 0; m &= m - 1) {
    const unsigned i = static_cast<unsigned>(std::countr_zero(m));
    if (w[i] > 0) {
      candidates |= 1u << i;
      total += w[i];
    }
  }
  if (candidates == 0) {
    // Every eligible uplink is weighted 0 (all saturated, say): still forward, evenly.
    ++counters_.weighted_rr_fallback;
    return round_robin(mask, flow_rr_[slot]);  // slot < kWrrSlots <= kRrSlots
  }
  WrrState& st = wrr_[slot];
  if (generation != st.generation || candidates != st.mask) {
    // Smooth WRR keeps each prefix of the sequence close to the exact shares only from a zero
    // state over a fixed set. Carrying the current weights across a change would let an uplink
    // that was away come back owed a burst; restarting costs at most one packet of error per
    // uplink.
    st.current.fill(0);
    st.generation = generation;
    st.mask = candidates;
    ++counters_.weighted_restarts;
  }
  // nginx's smooth weighted round robin: every candidate gains its weight, the largest current
  // weight wins (first in uplink order on a tie) and pays back the total.
  int best = -1;
  for (uint32_t m = candidates; m != 0; m &= m - 1) {
    const int i = std::countr_zero(m);
    st.current[i] += w[i];
    if (best < 0 || st.current[i] > st.current[best]) best = i;
  }
  st.current[best] -= total;
  return static_cast<uint16_t>(best);
}

uint16_t SprayEngine::least_queued(uint32_t mask, std::span<const PathLoad> loads) {
  // Scan from the round-robin position and keep the first strict minimum: among equal loads the
  // winner rotates, so an idle fabric is sprayed evenly instead of all onto uplink 0.
  const uint16_t n = static_cast<uint16_t>(path_ids_.size());
  uint16_t best = kNoUplink;
  uint16_t u = next_rr_;
  for (uint16_t k = 0; k < n; ++k) {
    if (((mask >> u) & 1) &&
        (best == kNoUplink || loads[u].queued_bytes < loads[best].queued_bytes)) {
      best = u;
    }
    u = static_cast<uint16_t>(u + 1 == n ? 0 : u + 1);
  }
  next_rr_ = static_cast<uint16_t>(best + 1 == n ? 0 : best + 1);
  return best;
}

uint16_t SprayEngine::account(uint16_t uplink) {
  if (uplink == kNoUplink) {
    ++counters_.no_eligible;
  } else {
    ++uplink_packets_[uplink];
  }
  return uplink;
}

uint16_t SprayEngine::pick(uint32_t flow_hash, uint64_t /*now_ns*/,
                           std::span<const PathLoad> loads) {
  const uint32_t mask = eligible_mask(loads);
  if (mask == 0) return account(kNoUplink);
  uint16_t uplink = kNoUplink;
  switch (mode()) {
    case SprayMode::kFlow:
      uplink = by_hash(flow_hash, mask);
      break;
    case SprayMode::kRoundRobin:
      uplink = round_robin(mask, flow_rr_[slot_of(flow_hash, kRrBits)]);
      break;
    case SprayMode::kWeighted:
      uplink = weighted(mask, slot_of(flow_hash, kWrrBits));
      break;
    case SprayMode::kAdaptive:
      uplink = least_queued(mask, loads);
      break;
  }
  if (uplink != kNoUplink) ++counters_.picked;
  return account(uplink);
}

uint16_t SprayEngine::pick_flow(uint32_t flow_hash, std::span<const PathLoad> loads) {
  const uint32_t mask = eligible_mask(loads);
  if (mask == 0) return account(kNoUplink);
  ++counters_.flow_picks;
  return account(by_hash(flow_hash, mask));
}

uint16_t SprayEngine::write_ppcid(rte_mbuf* m, const ParsedPacket& p, uint16_t uplink,
                                  uint64_t now_ns) {
  const uint8_t path = uplink < path_ids_.size() ? path_ids_[uplink] : 0;
  return encode(m, p, uplink, path, now_ns);
}

uint16_t SprayEngine::write_ppcid(rte_mbuf* m, const ParsedPacket& p, uint16_t uplink,
                                  uint32_t flow_hash, uint64_t now_ns) {
  if (fabric_paths_ == 0) return write_ppcid(m, p, uplink, now_ns);
  // The flow's k-th packet names path k mod N: each flow cycles through every fabric path, and
  // flows that start together start on paths spread by their slots' offsets.
  const uint32_t k = flow_path_[slot_of(flow_hash, kRrBits)]++ % fabric_paths_;
  return encode(m, p, uplink, static_cast<uint8_t>(k), now_ns);
}

uint16_t SprayEngine::encode(rte_mbuf* m, const ParsedPacket& p, uint16_t uplink, uint8_t path_id,
                             uint64_t now_ns) {
  // The checksum field is bytes 6-7 of the UDP header; it must lie in the first segment.
  const size_t field_end = size_t{p.l4_offset} + 8;
  if (p.kind != PacketKind::kRoce || uplink >= path_ids_.size() || m == nullptr ||
      rte_pktmbuf_data_len(m) < field_end) {
    ++counters_.ppcid_refused;
    return 0;
  }
  const SprayWeights* table = weights_.load(std::memory_order_acquire);
  const uint64_t since = now_ns > table->updated_ns ? now_ns - table->updated_ns : 0;
  const unsigned ts_bits = layout_ == PpcidLayout::kTsHigh ? 8 : 4;
  const uint16_t value =
      ppcid_encode(layout_, path_id, ppcid_timestamp_hash(since, ts_bits), p.dest_qp, p.psn);
  store_be16(rte_pktmbuf_mtod(m, uint8_t*) + p.l4_offset + 6, value);
  ++counters_.ppcid_written;
  return value;
}

}  // namespace spraynet
