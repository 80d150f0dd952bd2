#include "dataplane/forwarding/conweave_tx.h"

#include <stdexcept>

#include "dataplane/forwarding/flowlet_table.h"
#include "dataplane/memory_usage.h"
#include "dataplane/splitmix64.h"

namespace spraynet {

std::string check_conweave_settings(const ConweaveSettings& s) {
  const auto us = [](const char* key, uint64_t ns, uint64_t lo_ns, uint64_t hi_ns) -> std::string {
    if (ns >= lo_ns && ns <= hi_ns) return "";
    return std::string(key) + ": must be microseconds in [" + std::to_string(lo_ns / 1000) + ", " +
           std::to_string(hi_ns / 1000) + "], got " + std::to_string(ns / 1000.0);
  };
  for (const std::string& why :
       {us("reply_extra_us", s.reply_extra_ns, 0, 1'000'000'000),
        us("path_pause_us", s.path_pause_ns, 0, 1'000'000'000),
        us("tx_expiry_us", s.tx_expiry_ns, 1'000, 1'000'000'000),
        us("voq_flush_extra_us", s.voq_flush_extra_ns, 0, 1'000'000'000),
        us("voq_default_wait_us", s.voq_default_wait_ns, 1'000, 1'000'000'000),
        us("aging_us", s.aging_ns, 1'000, 10'000'000'000)}) {
    if (!why.empty()) return why;
  }
  if (s.voq_limit_packets < 1 || s.voq_limit_packets > (1u << 20)) {
    return "voq_limit_packets: must be a whole number in [1, 1048576], got " +
           std::to_string(s.voq_limit_packets);
  }
  return "";
}

ConweaveTxCounters& ConweaveTxCounters::operator+=(const ConweaveTxCounters& o) {
  packets += o.packets;
  epochs += o.epochs;
  timeouts += o.timeouts;
  expiries += o.expiries;
  reroutes += o.reroutes;
  no_good_path += o.no_good_path;
  timely_replies += o.timely_replies;
  late_replies += o.late_replies;
  clears += o.clears;
  notifies += o.notifies;
  aged += o.aged;
  no_eligible_member += o.no_eligible_member;
  static_assert(sizeof(ConweaveTxCounters) == 12 * sizeof(uint64_t),
                "every ConweaveTxCounters field is summed here");
  return *this;
}

ConweaveTx::ConweaveTx(const ConweaveSettings& settings, uint64_t seed)
    : settings_(settings), random_state_(seed) {
  if (const std::string why = check_conweave_settings(settings); !why.empty()) {
    throw std::invalid_argument("conweave: " + why);
  }
}

uint32_t ConweaveTx::next_random() {
  return static_cast<uint32_t>(splitmix64_next(random_state_) >> 32);
}

bool ConweaveTx::busy(uint8_t dst_leaf, uint8_t member, uint64_t now_ns) const {
  const auto it = busy_until_.find(uint32_t{dst_leaf} << 8 | member);
  return it != busy_until_.end() && it->second > now_ns;
}

uint16_t ConweaveTx::sample(uint8_t dst_leaf, std::span<const PathLoad> members, uint64_t now_ns,
                            bool& found) {
  // Two uniform draws over the eligible members (with replacement, the current one included),
  // the first not busy wins; both busy: the first, found = false.
  const uint16_t first = random_eligible(members, next_random());
  const uint16_t second = random_eligible(members, next_random());
  found = true;
  if (first == kNoMember) {
    found = false;
    return kNoMember;
  }
  if (!busy(dst_leaf, static_cast<uint8_t>(first), now_ns)) return first;
  if (!busy(dst_leaf, static_cast<uint8_t>(second), now_ns)) return second;
  found = false;
  ++counters_.no_good_path;
  return first;
}

ConweaveTx::Decision ConweaveTx::on_data(uint64_t flow_key, uint8_t dst_leaf, uint64_t now_ns,
                                         std::span<const PathLoad> members, uint64_t base_rtt_ns) {
  ++counters_.packets;
  const auto [it, fresh] = flows_.try_emplace(flow_key);
  Flow& f = it->second;
  // (1) A new flow, or one idle longer than tx_expiry, starts an epoch on a new path; a stable
  // one (its last epoch answered) starts the next epoch where it is.
  const bool expired = fresh || f.active_ns + settings_.tx_expiry_ns < now_ns;
  bool stab = false;
  if (expired) {
    f.stable = false;
  } else if (f.stable) {
    stab = true;
    f.stable = false;
  }
  f.active_ns = now_ns;
  // (2) The deadline: armed by an epoch's first packet; a later packet that finds it passed is
  // the TAIL, and disarms it (one reroute per epoch).
  bool timeout = false;
  if (expired || stab) {
    f.deadline_ns = now_ns + base_rtt_ns + settings_.reply_extra_ns;
  } else if (f.deadline_ns < now_ns) {
    f.deadline_ns = kDisarmed;
    timeout = true;
  }
  // (3), (4) Epoch and phase. The TAIL itself is the last of phase 0.
  Decision d;
  if (expired || stab) {
    ++f.epoch;
    f.phase = 0;
    d.tag.phase = 0;
  } else if (timeout) {
    f.phase = 1;
    d.tag.phase = 0;
  } else {
    d.tag.phase = f.phase;
  }
  d.tag.epoch = f.epoch;
  // (5), (6) The path: sampled when the flow may move (expiry, timeout) or must (its member
  // became ineligible, or it has none).
  const bool lost =
      f.member == kNoMember || f.member >= members.size() || !members[f.member].eligible;
  uint16_t out = f.member;
  if (expired || timeout || lost) {
    bool found = false;
    const uint16_t good = sample(dst_leaf, members, now_ns, found);
    if (good == kNoMember) {
      ++counters_.no_eligible_member;
      d.member = kNoMember;
      return d;
    }
    const uint16_t before = f.member;
    if (lost || found) f.member = good;
    if (!fresh && f.member != before) ++counters_.reroutes;
    // Expiry (and a lost member) move at once; on a timeout the TAIL goes on the old path.
    out = timeout && !lost ? before : f.member;
  }
  d.member = out;
  d.tag.member = static_cast<uint8_t>(out);
  // (7) The TAIL's send time, which every later packet of the epoch repeats.
  const auto ts = static_cast<uint32_t>(now_ns);
  if (expired || stab) {
    f.tail_ts = 0;
  } else if (timeout) {
    f.tail_ts = ts;
  }
  d.tag.ts_tx = ts;
  d.tag.ts_tail = f.tail_ts;
  if (expired || stab) {
    d.tag.flag = ConweaveFlag::kInit;
    ++counters_.epochs;
    if (expired) ++counters_.expiries;
  } else if (timeout) {
    d.tag.flag = ConweaveFlag::kTail;
    ++counters_.timeouts;
  } else {
    d.tag.flag = ConweaveFlag::kData;
  }
  return d;
}

void ConweaveTx::on_reply(uint64_t flow_key, bool clear, uint8_t epoch, uint8_t phase,
                          uint64_t now_ns) {
  const auto it = flows_.find(flow_key);
  if (it == flows_.end() || it->second.epoch != epoch || it->second.phase != phase) {
    ++counters_.late_replies;  // an epoch this flow has left (or a flow it forgot)
    return;
  }
  Flow& f = it->second;
  if (clear) {
    f.stable = true;
    f.deadline_ns = kDisarmed;
    ++counters_.clears;
  } else if (f.deadline_ns != kDisarmed && now_ns < f.deadline_ns) {
    f.stable = true;
    f.deadline_ns = kDisarmed;
    ++counters_.timely_replies;
  } else {
    ++counters_.late_replies;
  }
}

void ConweaveTx::on_notify(uint8_t dst_leaf, uint8_t member, uint64_t now_ns) {
  busy_until_[uint32_t{dst_leaf} << 8 | member] = now_ns + settings_.path_pause_ns;
  ++counters_.notifies;
}

void ConweaveTx::age(uint64_t now_ns) {
  for (auto it = flows_.begin(); it != flows_.end();) {
    if (now_ns > it->second.active_ns && now_ns - it->second.active_ns > settings_.aging_ns) {
      it = flows_.erase(it);
      ++counters_.aged;
    } else {
      ++it;
    }
  }
  for (auto it = busy_until_.begin(); it != busy_until_.end();) {
    it = it->second <= now_ns ? busy_until_.erase(it) : std::next(it);
  }
}

uint64_t ConweaveTx::heap_bytes() const {
  // An unordered_map node: the value, a next pointer and the cached hash; plus the buckets.
  return flows_.size() * (sizeof(std::pair<const uint64_t, Flow>) + 2 * sizeof(void*)) +
         flows_.bucket_count() * sizeof(void*) +
         busy_until_.size() * (sizeof(std::pair<const uint32_t, uint64_t>) + 2 * sizeof(void*)) +
         busy_until_.bucket_count() * sizeof(void*);
}

}  // namespace spraynet
