// The run: the kernel's rounds between the fabric-wide events (link events, samplers, the
// throughput window), until the duration or the last message, then the result and every mbuf
// back.
#include "fabric/fabric.h"

#include <rte_mempool.h>

#include <algorithm>
#include <chrono>

#include "fabric/fabric_detail.h"

namespace spraynet::fabric {

using detail::kNever;

RunResult Fabric::run(const std::function<void(uint64_t, uint64_t)>& progress) {
  const auto wall0 = std::chrono::steady_clock::now();
  auto last_progress = wall0;
  const bool finite = plan_.finite();
  // cdf: messages arrive over the duration; the run goes on until they are all done, within
  // a limit of five durations plus 1 ms. Other finite workloads: the duration is the limit.
  const uint64_t end = config_.workload == Workload::kCdf ? config_.duration_ns * 5 + 1'000'000
                                                          : config_.duration_ns;
  const uint64_t window_at = finite ? 0 : config_.warmup();
  // The flows' fairness leaves the warm-up out: permutation's, or a finite workload's when one
  // is given (its other figures still count from 0).
  const uint64_t fair_at = finite ? config_.warmup_ns : window_at;
  bool fair_started = false;
  if (fair_at == 0) {
    snapshot_flows();
    fair_started = true;
  }
  host_uplinks_.clear();
  for (uint32_t h = 0; h < topology_.hosts().size(); ++h) {
    for (uint16_t u = 0; u < nodes_[h].nic->uplink_count(); ++u) host_uplinks_.emplace_back(h, u);
  }
  next_sample_ns_ = config_.sample_ns;
  // About 500 queue samples over the run, at most one a microsecond, at least one per sample_ns.
  cc_sample_ns_ = std::clamp<uint64_t>(config_.duration_ns / 500, 1'000,
                                       std::max<uint64_t>(config_.sample_ns, 1'000));
  next_cc_sample_ns_ = cc_sample_ns_;
  for (uint32_t id = 0; id < nodes_.size(); ++id) {
    if (!nodes_[id].sw) continue;
    for (uint16_t p = 0; p < nodes_[id].sw->port_count(); ++p) {
      queue_series_.push_back(QueueSeries{id, p, {}});
    }
  }
  if (config_.cc.enabled()) {
    for (size_t i = 0; i < plan_.flows().size() && rate_series_.size() < 8; ++i) {
      const QpFlow& f = plan_.flows()[i];
      rate_series_.push_back(RateSeries{f.src,
                                        f.src_qp_index,
                                        topology_.hosts()[f.src].name + ">" +
                                            topology_.hosts()[f.dst].name + "/" +
                                            std::to_string(f.src_qp_index),
                                        {}});
    }
  }
  // LPs dealt round-robin over the ranks: racks (the heavy ones) first, then spines.
  kernel_->set_ranks(ranks_);
  if (window_at == 0) snapshot_window_start();
  kernel_->set_threads(threads_);
  uint64_t round_end = 0;
  kernel_->between_rounds();
  for (;;) {
    // The earliest thing due anywhere, and the messages done so far (on every rank).
    uint64_t t_node = kernel_->earliest_here();
    std::array<uint64_t, 2> mins{};  // the earliest, and the latest completion (as UINT64_MAX - t)
    std::array<uint64_t, 2> sums{};  // completed, hops
    uint64_t last = 0;
    for (auto& lp : lps_) {
      if (!mine(lp->index)) continue;
      sums[0] += lp->completed;
      sums[1] += lp->hops;
      last = std::max(last, lp->last_completion_ns);
    }
    mins = {t_node, UINT64_MAX - last};
    if (distributed()) kernel_->ranks()->reduce(mins, sums);
    t_node = mins[0];
    if (finite && done_ns_ == 0 && sums[0] >= plan_.messages_total()) {
      done_ns_ = UINT64_MAX - mins[1];
    }
    if (finite && done_ns_ != 0) break;
    if (progress && kernel_->rounds() > 0) {
      const auto now = std::chrono::steady_clock::now();
      if (now - last_progress > std::chrono::milliseconds(200)) {
        last_progress = now;
        progress(round_end - 1, sums[1]);
      }
    }
    const uint64_t t_event = next_event_ < events_.size() ? events_[next_event_].at_ns : kNever;
    const uint64_t t_window = window_started_ ? kNever : window_at;
    const uint64_t t_fair = fair_started ? kNever : fair_at;
    const uint64_t t_global =
        std::min({t_event, t_window, t_fair, next_sample_ns_, next_cc_sample_ns_});
    const uint64_t t = std::min(t_node, t_global);
    if (t > end) break;
    if (t == t_global) {
      // Fabric-wide work at t, before any node's events of t.
      now_ = t;
      if (t == next_cc_sample_ns_) {
        sample_cc();
        next_cc_sample_ns_ += cc_sample_ns_;
      } else if (t == t_event) {
        apply_event(events_[next_event_++]);
        // A rate change starts frames due under the old rate: those on cut cables go out now.
        kernel_->flush_at(now_);
      } else if (t == t_window) {
        snapshot_window_start();
      } else if (t == t_fair) {
        snapshot_flows();
        fair_started = true;
      } else {
        sample();
        next_sample_ns_ += config_.sample_ns;
      }
      continue;
    }
    // A round: every LP runs its events before round_end. Nothing it sends can arrive before
    // round_end (the lookahead), and nothing fabric-wide happens before it.
    round_end = std::min({t_global, end + 1, lookahead_ns_ == kNever ? kNever : t + lookahead_ns_});
    kernel_->run_round(round_end);
  }
  // Where the run stopped: the last event anywhere.
  now_ = std::max(now_, kernel_->latest_here());
  if (distributed()) {
    std::array<uint64_t, 1> latest{UINT64_MAX - now_};
    kernel_->ranks()->reduce(latest, {});
    now_ = UINT64_MAX - latest[0];
  }
  for (uint32_t si = 0; si < topology_.switches().size(); ++si) {
    const uint32_t node = topology_.switch_node(si);
    if (!node_mine(node)) continue;
    nlohmann::json entry = bucket_entry(si);
    if (!entry.is_null()) bucket_entries_[node] = std::move(entry);
  }
  gather_lp_figures();
  // The LPs' figures, in LP order.
  completed_ = 0;
  for (auto& lp : lps_) {
    completed_ += lp->completed;
    hops_ += lp->hops;
    serves_ += lp->serves;
    dead_link_frames_ += lp->dead_link_frames;
    dead_link_frames_late_ += lp->dead_link_frames_late;
    checksum_filter_drops_ += lp->checksum_filter_drops;
    fct_ns_.insert(fct_ns_.end(), lp->fct_ns.begin(), lp->fct_ns.end());
    sized_fct_.insert(sized_fct_.end(), lp->sized_fct.begin(), lp->sized_fct.end());
    excluded_warmup_ += lp->excluded_warmup;
    dynamic_posts_.insert(dynamic_posts_.end(), lp->dynamic_posts.begin(), lp->dynamic_posts.end());
  }
  const double wall_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  RunResult r = collect(wall_s);
  free_mail();
  for (Node& n : nodes_) {
    if (n.sw) n.sw->free_all();
    if (n.nic) n.nic->free_all();
  }
  r.mbufs_in_use_at_end = rte_mempool_in_use_count(pool_);
  if (segment_pool_ != nullptr) r.mbufs_in_use_at_end += rte_mempool_in_use_count(segment_pool_);
  // A payload segment still referenced is an mbuf that was not freed (and the store must not
  // go before it).
  if (!payload_store_.unreferenced()) ++r.mbufs_in_use_at_end;
  return r;
}

}  // namespace spraynet::fabric
