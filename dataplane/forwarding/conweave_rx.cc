#include "dataplane/forwarding/conweave_rx.h"

#include <algorithm>
#include <stdexcept>

namespace spraynet {

ConweaveRxCounters& ConweaveRxCounters::operator+=(const ConweaveRxCounters& o) {
  packets += o.packets;
  held += o.held;
  voq_full += o.voq_full;
  previous_epoch += o.previous_epoch;
  flushes_by_tail += o.flushes_by_tail;
  flushes_by_timeout += o.flushes_by_timeout;
  max_queue_depth = std::max(max_queue_depth, o.max_queue_depth);
  rtt_replies += o.rtt_replies;
  clears += o.clears;
  notifies += o.notifies;
  aged += o.aged;
  late_after_timeout += o.late_after_timeout;
  static_assert(sizeof(ConweaveRxCounters) == 12 * sizeof(uint64_t),
                "every ConweaveRxCounters field is summed here");
  return *this;
}

ConweaveRx::ConweaveRx(const ConweaveSettings& settings) : settings_(settings) {
  if (const std::string why = check_conweave_settings(settings); !why.empty()) {
    throw std::invalid_argument("conweave: " + why);
  }
}

ConweaveRx::~ConweaveRx() = default;

ConweaveRx::Result ConweaveRx::on_data(uint64_t flow_key, const ConweaveTag& tag, bool ce,
                                       uint64_t now_ns, rte_mbuf* m) {
  ++counters_.packets;
  Result r;
  Flow& f = flows_[flow_key];
  f.active_ns = now_ns;
  // (1) The epoch, as a serial number: the source's counter wraps at 256.
  const auto ahead = static_cast<int8_t>(static_cast<uint8_t>(tag.epoch - f.epoch));
  const bool first = !f.seen;
  f.seen = true;
  if (!first && ahead < 0) {
    ++counters_.previous_epoch;
    return r;  // an epoch left behind: straight on
  }
  const bool is_new = first || ahead > 0;
  if (is_new) f.epoch = tag.epoch;
  // (2) The old path's latest timing.
  if (tag.phase == 0) {
    f.phase0_tx = tag.ts_tx;
    f.phase0_rx_ns = now_ns;
  }
  // (3) Out of order: phase 1 before this epoch's TAIL.
  bool ooo = false;
  const bool is_tail = tag.flag == ConweaveFlag::kTail;
  if (is_new) {
    f.released_by_timeout = false;
    f.phase = is_tail ? 1 : 0;
    ooo = tag.phase > f.phase;
    f.phase0_cache = tag.phase == 0;
  } else {
    if (tag.phase == 0 && f.phase == 1 && !f.reordering && f.released_by_timeout) {
      ++counters_.late_after_timeout;
    }
    if (is_tail) {
      if (!f.reordering) f.phase = 1;  // else the flush sets it
    } else if (f.phase < tag.phase) {
      ooo = true;
    }
    if (tag.phase == 0) f.phase0_cache = true;
  }
  // (4) The TAIL's send time, carried by the TAIL and every phase-1 packet.
  if (is_tail || tag.phase == 1) f.tail_ts = tag.ts_tail;
  // (5) How long after the old path's latest packet the TAIL was sent.
  uint64_t gap = settings_.voq_default_wait_ns;
  if (f.phase0_cache) {
    const auto d = static_cast<int32_t>(f.tail_ts - f.phase0_tx);
    gap = d > 0 ? static_cast<uint64_t>(d) : 0;
  }
  // (6) When the queue is due: the TAIL releases it at once (after itself); otherwise the old
  // path's last packet's arrival plus the gap plus the margin.
  uint64_t deadline = now_ns;
  if (tag.phase == 1) {
    deadline = (f.phase0_cache ? f.phase0_rx_ns : now_ns) + gap + settings_.voq_flush_extra_ns;
  } else if (!is_tail) {
    deadline = now_ns + gap + settings_.voq_flush_extra_ns;
  }
  // (7) The queue.
  if (tag.phase == 0) {
    if (f.reordering) {
      set_due(flow_key, f, std::max(deadline, now_ns));
      f.flush_by_tail = is_tail;
    }
  } else if (ooo) {
    if (f.queue.size() >= settings_.voq_limit_packets) {
      ++counters_.voq_full;
    } else {
      if (!f.reordering) {
        f.reordering = true;
        set_due(flow_key, f, std::max(deadline, now_ns));
        f.flush_by_tail = false;
      }
      f.queue.push_back(m);
      ++held_now_;
      ++counters_.held;
      counters_.max_queue_depth = std::max<uint64_t>(counters_.max_queue_depth, f.queue.size());
      r.held = true;
    }
  }
  // (8), (9) What the source is told.
  if (ce) {
    r.notify = true;
    ++counters_.notifies;
  }
  if (tag.flag == ConweaveFlag::kInit) {
    r.rtt_reply = true;
    ++counters_.rtt_replies;
  } else if (is_tail) {
    r.clear = true;
    ++counters_.clears;
  }
  return r;
}

void ConweaveRx::set_due(uint64_t key, Flow& f, uint64_t at_ns) {
  if (f.flush_at_ns != kNever) due_.erase({f.flush_at_ns, key});
  f.flush_at_ns = at_ns;
  due_.insert({at_ns, key});
}

void ConweaveRx::flush(Flow& f, std::vector<rte_mbuf*>& out) {
  ++(f.flush_by_tail ? counters_.flushes_by_tail : counters_.flushes_by_timeout);
  f.released_by_timeout = !f.flush_by_tail;
  out.insert(out.end(), f.queue.begin(), f.queue.end());
  held_now_ -= f.queue.size();
  f.queue.clear();
  f.reordering = false;
  f.phase = 1;
  f.flush_at_ns = kNever;
  f.flush_by_tail = false;
}

void ConweaveRx::take_due(uint64_t now_ns, std::vector<rte_mbuf*>& out) {
  // In order of the deadlines (then keys): the output does not depend on the map's order.
  while (!due_.empty() && due_.begin()->first <= now_ns) {
    const uint64_t key = due_.begin()->second;
    due_.erase(due_.begin());
    Flow& f = flows_.at(key);
    f.flush_at_ns = kNever;
    flush(f, out);
  }
}

uint64_t ConweaveRx::next_due_ns() const {
  return due_.empty() ? kNever : due_.begin()->first;
}

void ConweaveRx::take_all(std::vector<rte_mbuf*>& out) {
  std::vector<uint64_t> keys;
  for (const auto& [key, f] : flows_) {
    if (!f.queue.empty()) keys.push_back(key);
  }
  std::sort(keys.begin(), keys.end());
  for (const uint64_t k : keys) {
    Flow& f = flows_.at(k);
    out.insert(out.end(), f.queue.begin(), f.queue.end());
    held_now_ -= f.queue.size();
    f.queue.clear();
    f.reordering = false;
    f.flush_at_ns = kNever;
  }
  due_.clear();
}

void ConweaveRx::age(uint64_t now_ns) {
  for (auto it = flows_.begin(); it != flows_.end();) {
    const Flow& f = it->second;
    if (!f.reordering && now_ns > f.active_ns && now_ns - f.active_ns > settings_.aging_ns) {
      it = flows_.erase(it);
      ++counters_.aged;
    } else {
      ++it;
    }
  }
}

uint64_t ConweaveRx::heap_bytes() const {
  // A set node: the key pair and three pointers and a colour.
  uint64_t b = flows_.bucket_count() * sizeof(void*) +
               due_.size() * (sizeof(std::pair<uint64_t, uint64_t>) + 4 * sizeof(void*));
  for (const auto& [key, f] : flows_) {
    b += sizeof(std::pair<const uint64_t, Flow>) + 2 * sizeof(void*) +
         f.queue.size() * sizeof(rte_mbuf*);
  }
  return b;
}

}  // namespace spraynet
