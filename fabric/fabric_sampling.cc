// Measurement during the run: the per-link sampler, congestion control's queue and rate series,
// the NICs' uplink split, the weighted buckets, the window and fairness snapshots, and the
// gathering of figures from the ranks that ran them.
#include "fabric/fabric.h"

#include <algorithm>

#include <cmath>
#include <memory>
#include <stdexcept>

#include "dataplane/egress/link_emulator.h"
#include "dataplane/rc_endpoint/rc_traffic_engine.h"
#include "fabric/fabric_detail.h"

#include "fabric/kernel/rank_bytes.h"

namespace spraynet::fabric {

using detail::percentile;

void Fabric::sample() {
  // Every reading is taken where its node runs (gather): on one rank or several, the same.
  const double dt_s = static_cast<double>(config_.sample_ns) * 1e-9;
  struct LinkReading {
    uint64_t tx = 0, queue = 0;
    bool paused = false;
  };
  const std::vector<LinkReading> links = gather<LinkReading>(
      watched_.size(), [&](size_t i) { return watched_[i].node; },
      [&](size_t i) {
        const switch_emu::SwitchNode& sw = *nodes_[watched_[i].node].sw;
        const uint16_t p = watched_[i].port;
        return LinkReading{sw.port_counters(p).tx_bytes, sw.egress(p).queued_bytes(),
                           sw.egress(p).any_paused(now_)};
      });
  for (uint32_t i = 0; i < watched_.size(); ++i) {
    Watched& w = watched_[i];
    const uint64_t tx = links[i].tx;
    const double rate = w.gbps * 1e9;
    if (record_timeseries_) {
      LinkSample s;
      s.t_ns = now_;
      s.link = i;
      s.util = static_cast<float>(static_cast<double>(tx - w.last_tx_bytes) * 8.0 / (rate * dt_s));
      s.queue_bytes = links[i].queue;
      s.paused = links[i].paused;
      samples_.push_back(s);
    }
    w.last_tx_bytes = tx;
  }
  struct NodeReading {
    uint64_t paused_ports = 0, acked = 0;
  };
  const std::vector<NodeReading> per_node = gather<NodeReading>(
      nodes_.size(), [](size_t id) { return static_cast<uint32_t>(id); },
      [&](size_t id) {
        const Node& n = nodes_[id];
        NodeReading k;
        if (n.sw) {
          for (uint16_t p = 0; p < n.sw->port_count(); ++p) {
            k.paused_ports += n.sw->egress(p).any_paused(now_);
          }
        } else {
          for (uint16_t p = 0; p < n.nic->uplink_count(); ++p) {
            k.paused_ports += n.nic->egress(p).any_paused(now_);
          }
          k.acked = n.nic->rc_engine()->requester_totals().bytes_acked;
        }
        return k;
      });
  uint64_t paused = 0;
  for (const NodeReading& k : per_node) paused += k.paused_ports;
  pfc_timeline_.emplace_back(static_cast<double>(now_) / 1000.0, paused);
  sample_nic_split(static_cast<double>(config_.sample_ns));
  uint64_t acked = 0;
  for (const NodeReading& k : per_node) acked += k.acked;
  const double capacity =
      static_cast<double>(config_.hosts()) * config_.planes * config_.link_gbps * 1e9 * dt_s;
  goodput_timeline_.emplace_back(
      static_cast<double>(now_) / 1000.0,
      static_cast<double>(acked - last_sample_acked_bytes_) * 8.0 / capacity);
  last_sample_acked_bytes_ = acked;
}

void Fabric::sample_cc() {
  cc_sample_t_ns_.push_back(now_);
  const std::vector<uint32_t> queues = gather<uint32_t>(
      queue_series_.size(), [&](size_t i) { return queue_series_[i].node; },
      [&](size_t i) {
        const QueueSeries& q = queue_series_[i];
        const uint64_t b = nodes_[q.node].sw->egress(q.port).queued_bytes(3);
        return static_cast<uint32_t>(std::min<uint64_t>(b, UINT32_MAX));
      });
  for (size_t i = 0; i < queue_series_.size(); ++i) queue_series_[i].bytes.push_back(queues[i]);
  const std::vector<float> rates = gather<float>(
      rate_series_.size(), [&](size_t i) { return rate_series_[i].host; },
      [&](size_t i) {
        const RateControl* rc =
            nodes_[rate_series_[i].host].nic->rc_engine()->rate_control(rate_series_[i].qp_index);
        return rc != nullptr ? static_cast<float>(rc->rate_gbps()) : 0.0f;
      });
  for (size_t i = 0; i < rate_series_.size(); ++i) rate_series_[i].gbps.push_back(rates[i]);
}

namespace {

// The names of RcCcSummary::figure_sum's entries for an ACK-clocked control (any instance gives
// them: a rank need not hold a host to know them).
std::vector<std::string> cc_figure_names(control::CcMode mode) {
  std::unique_ptr<RateControl> r;
  if (mode == control::CcMode::kDctcp) r = std::make_unique<DctcpRateControl>(DctcpConfig{});
  if (mode == control::CcMode::kTimely) r = std::make_unique<TimelyRateControl>(TimelyConfig{});
  if (mode == control::CcMode::kHpcc) r = std::make_unique<HpccRateControl>(HpccConfig{});
  std::vector<std::string> names;
  if (r) {
    for (const RateControlFigure& f : r->figures()) {
      if (names.size() < RcCcSummary::kMaxFigures) names.push_back(f.first);
    }
  }
  return names;
}

}  // namespace

void Fabric::collect_cc(RunResult& r) {
  r.cc_mode = std::string(control::to_string(config_.cc.mode));
  for (const std::string& name : cc_figure_names(config_.cc.mode)) r.cc_figure_sums.emplace_back(name, 0.0);
  double rate_sum = 0;
  for (const NodeFigures& f : figures_) {
    if (f.is_switch) {
      for (const NodeFigures::Port& port : f.ports) {
        for (const EgressClassCounters& c : port.classes) r.ecn_marked += c.ecn_marked;
        r.int_switch += port.int_records;
      }
      continue;
    }
    const nic_emu::NicCounters& k = f.nic_counters;
    r.ce_received += k.ce_received;
    r.cnps_sent += k.cnps_sent;
    r.cnps_suppressed += k.cnps_suppressed;
    r.cnps_received += k.cnps_received;
    r.int_inserted += k.int_inserted;
    r.int_no_room += k.int_no_room;
    r.int_stripped += k.int_stripped;
    r.int_echoed += k.int_echoed;
    r.int_acks_received += k.int_acks_received;
    r.int_malformed += f.nic_drops.int_malformed;
    const RcCcSummary& s = f.cc;
    r.cc_figure_qps += s.figure_qps;
    for (size_t k = 0; k < r.cc_figure_sums.size(); ++k) r.cc_figure_sums[k].second += s.figure_sum[k];
    r.rate_cuts += s.rate_cuts;
    r.cc_qps += s.qps;
    r.qps_at_min_rate += s.qps_at_min_rate;
    r.qps_limited_at_end += s.qps_limited;
    rate_sum += s.rate_fraction_sum;
  }
  r.mean_rate_fraction = r.cc_qps > 0 ? rate_sum / static_cast<double>(r.cc_qps) : 0.0;
  // The busiest lossless queue over the window: the port with the highest mean depth.
  size_t first = 0;
  while (first < cc_sample_t_ns_.size() && cc_sample_t_ns_[first] < fair_start_ns_) ++first;
  const size_t n = cc_sample_t_ns_.size() - first;
  const QueueSeries* busiest = nullptr;
  double busiest_mean = -1;
  for (const QueueSeries& q : queue_series_) {
    double sum = 0;
    for (size_t i = first; i < q.bytes.size(); ++i) sum += q.bytes[i];
    const double mean = n > 0 ? sum / static_cast<double>(n) : 0.0;
    if (mean > busiest_mean) {
      busiest_mean = mean;
      busiest = &q;
    }
  }
  if (busiest != nullptr && n > 0) {
    std::vector<double> v(busiest->bytes.begin() + static_cast<std::ptrdiff_t>(first),
                          busiest->bytes.end());
    const switch_emu::SwitchNode& sw = *nodes_[busiest->node].sw;
    r.queue.port = sw.config().name + "." + sw.config().ports[busiest->port].name;
    r.queue.mean = busiest_mean;
    r.queue.max = static_cast<uint64_t>(*std::max_element(v.begin(), v.end()));
    r.queue.p50 = static_cast<uint64_t>(percentile(v, 0.5));
    r.queue.p99 = static_cast<uint64_t>(percentile(v, 0.99));
    r.queue.samples = n;
    r.queue.interval_ns = cc_sample_ns_;
    if (const EcnMarker* m = sw.egress(busiest->port).ecn_marker()) {
      r.queue.kmin = m->config().classes[3].kmin_bytes;
      r.queue.kmax = m->config().classes[3].kmax_bytes;
    }
    if (record_timeseries_) {
      for (size_t i = 0; i < cc_sample_t_ns_.size(); ++i) {
        r.cc_timeline_t_us.push_back(static_cast<double>(cc_sample_t_ns_[i]) / 1000.0);
        r.cc_timeline_queue.push_back(busiest->bytes[i]);
      }
      for (const RateSeries& rs : rate_series_) r.cc_timeline_rates.emplace_back(rs.name, rs.gbps);
    }
  }
}

void Fabric::sample_nic_split(double dt_ns) {
  // Per host with two or more uplinks, per sample interval: the share of its bytes each uplink
  // carried against the ideal split, each uplink's share of the capacity the background left
  // (the average over the interval). The tracking error is half the summed |share - ideal|
  // (for two uplinks, |share0 - ideal0|), averaged over the window's intervals in which the
  // host sent a frame's worth.
  if (config_.planes < 2) return;
  const uint32_t hosts = static_cast<uint32_t>(topology_.hosts().size());
  nic_tx_last_.resize(hosts);
  nic_bg_last_.resize(hosts);
  const double line_bytes = config_.link_gbps / 8.0 * dt_ns;
  struct UplinkReading {
    uint64_t tx = 0;
    bool up = false;
  };
  const std::vector<UplinkReading> uplinks = gather<UplinkReading>(
      host_uplinks_.size(), [&](size_t i) { return host_uplinks_[i].first; },
      [&](size_t i) {
        const auto [h, u] = host_uplinks_[i];
        return UplinkReading{nodes_[h].nic->port_counters(u).tx_bytes,
                             nodes_[h].nic->egress(u).link_up()};
      });
  size_t at = 0;
  for (uint32_t h = 0; h < hosts; ++h) {
    const nic_emu::NicNode& nic = *nodes_[h].nic;
    const size_t U = nic.uplink_count();
    nic_tx_last_[h].resize(U, 0);
    nic_bg_last_[h].resize(U, 0.0);
    std::vector<double> sent(U), avail(U);
    double sent_sum = 0, avail_sum = 0;
    for (uint16_t u = 0; u < U; ++u, ++at) {
      const uint64_t tx = uplinks[at].tx;
      const double bg = background_wire_bytes(h, u, now_);
      sent[u] = static_cast<double>(tx - nic_tx_last_[h][u]);
      avail[u] = std::max(0.0, 1.0 - (bg - nic_bg_last_[h][u]) / line_bytes);
      if (!uplinks[at].up) avail[u] = 0;
      nic_tx_last_[h][u] = tx;
      nic_bg_last_[h][u] = bg;
      sent_sum += sent[u];
      avail_sum += avail[u];
    }
    if (!window_started_ || sent_sum < config_.mtu || avail_sum <= 0) continue;
    double err = 0;
    for (size_t u = 0; u < U; ++u) err += std::abs(sent[u] / sent_sum - avail[u] / avail_sum);
    split_error_sum_ += err / 2;
    ++split_error_n_;
  }
}

nlohmann::json Fabric::nic_split_report() const {
  // From figures_ (collect()).
  // Over the window, per host: each uplink's share of the bytes the host sent; its deviation
  // from the even split, max over uplinks of |share - 1/U| / (1/U) (7:3 reads 0.4, 5:5 0).
  // Hosts that sent nothing are left out.
  if (config_.planes < 2) return nullptr;
  nlohmann::json hosts = nlohmann::json::object();
  double dev_sum = 0, dev_max = 0, share_sum = 0;
  uint32_t n = 0;
  for (uint32_t h = 0; h < topology_.hosts().size(); ++h) {
    const NodeFigures& nic = figures_[h];
    const size_t U = nic.ports.size();
    std::vector<double> bytes(U);
    double total = 0;
    for (uint16_t u = 0; u < U; ++u) {
      const uint64_t start = h < nic_tx_window_.size() ? nic_tx_window_[h][u] : 0;
      bytes[u] = static_cast<double>(nic.ports[u].tx_bytes - start);
      total += bytes[u];
    }
    if (total <= 0) continue;
    nlohmann::json shares = nlohmann::json::array();
    double dev = 0, top = 0;
    for (size_t u = 0; u < U; ++u) {
      const double share = bytes[u] / total;
      shares.push_back(share);
      dev = std::max(dev, std::abs(share - 1.0 / static_cast<double>(U)) * static_cast<double>(U));
      top = std::max(top, share);
    }
    hosts[topology_.hosts()[h].name] = shares;
    dev_sum += dev;
    dev_max = std::max(dev_max, dev);
    share_sum += top;
    ++n;
  }
  if (n == 0) return nullptr;
  return {{"hosts_measured", n},
          {"deviation", dev_sum / n},
          {"deviation_max", dev_max},
          {"top_share", share_sum / n},
          {"tracking_error",
           split_error_n_ > 0 ? split_error_sum_ / static_cast<double>(split_error_n_) : 0.0},
          {"intervals", split_error_n_},
          {"shares", hosts}};
}

nlohmann::json Fabric::bucket_report() {
  // Each leaf's entry was made where it ran (bucket_entry), in switch order here.
  if (mode_ != FabricMode::kWeighted) return nullptr;
  nlohmann::json out = nlohmann::json::object();
  for (uint32_t si = 0; si < topology_.switches().size(); ++si) {
    const auto it = bucket_entries_.find(topology_.switch_node(si));
    if (it != bucket_entries_.end()) out[topology_.switches()[si].name] = std::move(it->second);
  }
  return out;
}

nlohmann::json Fabric::bucket_entry(uint32_t si) const {
  // Weighted mode, per leaf: the buckets its first uplink group (towards the next leaf; every
  // uplink group of a leaf reads the same link state) gives each uplink, as the control loop
  // computed them (B = idle_buckets per idle path, the DESIGN.md formula) averaged over the
  // ticks in the window, and at the last tick; the slots each holds in the power-of-two table
  // the dataplane laid out from them, and the link-state utilisation the formula read (at the
  // last tick, and its mean over the same ticks).
  if (mode_ != FabricMode::kWeighted) return nullptr;
  {
    const SwitchSpec& spec = topology_.switches()[si];
    if (!spec.leaf) return nullptr;
    const Node& n = nodes_[topology_.switch_node(si)];
    int32_t g = -1;
    for (const int32_t lg : spec.leaf_group) {
      if (lg >= 0) {
        g = lg;
        break;
      }
    }
    if (g < 0 || !n.control || !n.control->current()) return nullptr;
    const auto gi = static_cast<size_t>(g);
    const PathSelector& sel = n.sw->group(gi);
    const auto members = sel.member_ports();
    const std::vector<uint32_t>& last = n.control->current()->group_weights.at(gi);
    nlohmann::json paths = nlohmann::json::object();
    double total = 0;
    for (size_t m = 0; m < members.size(); ++m) {
      const bool ticked = n.weight_ticks > 0 && gi < n.weight_sums.size();
      const double ticks = static_cast<double>(n.weight_ticks);
      const double mean = ticked ? n.weight_sums[gi][m] / ticks : last[m];
      const double util = n.control->table().at(members[m]).utilisation;
      total += mean;
      paths[spec.config.ports[members[m]].name] = {
          {"buckets", mean},
          {"last", last[m]},
          {"table_slots", sel.bucket_table().buckets_of(static_cast<uint16_t>(m))},
          {"utilisation", util},
          {"utilisation_mean", ticked ? n.util_sums[gi][m] / ticks : util}};
    }
    return {{"group", spec.config.groups[gi].name},
            {"idle_buckets", n.control->config().reweight.idle_buckets},
            {"table_size", sel.bucket_table().size()},
            {"ticks", n.weight_ticks},
            {"total", total},
            {"paths", paths}};
  }
}

void Fabric::snapshot_flows() {
  fair_start_ns_ = now_;
  flow_window_acked_ = gather<uint64_t>(
      plan_.flows().size(), [&](size_t i) { return plan_.flows()[i].src; },
      [&](size_t i) -> uint64_t {
        const QpFlow& f = plan_.flows()[i];
        return nodes_[f.src].nic->rc_engine()->flow_counters(f.src_qp_index).bytes_acked;
      });
}

void Fabric::snapshot_window_start() {
  window_started_ = true;
  window_start_ns_ = now_;
  window_acked_bytes_ = 0;
  const uint32_t hosts = static_cast<uint32_t>(topology_.hosts().size());
  for (const uint64_t acked : gather<uint64_t>(
           hosts, [](size_t h) { return static_cast<uint32_t>(h); },
           [&](size_t h) { return nodes_[h].nic->rc_engine()->requester_totals().bytes_acked; })) {
    window_acked_bytes_ += acked;
  }
  const std::vector<uint64_t> watched_tx = gather<uint64_t>(
      watched_.size(), [&](size_t i) { return watched_[i].node; },
      [&](size_t i) {
        return nodes_[watched_[i].node].sw->port_counters(watched_[i].port).tx_bytes;
      });
  for (size_t i = 0; i < watched_.size(); ++i) watched_[i].window_tx_bytes = watched_tx[i];
  const std::vector<uint64_t> uplink_tx = gather<uint64_t>(
      host_uplinks_.size(), [&](size_t i) { return host_uplinks_[i].first; },
      [&](size_t i) {
        return nodes_[host_uplinks_[i].first].nic->port_counters(host_uplinks_[i].second).tx_bytes;
      });
  nic_tx_window_.assign(hosts, {});
  for (size_t i = 0; i < host_uplinks_.size(); ++i) {
    nic_tx_window_[host_uplinks_[i].first].push_back(uplink_tx[i]);
  }
}

template <class T, class NodeOf, class Read, class Put, class Get>
std::vector<T> Fabric::gather_with(size_t n, NodeOf node_of, Read read, Put put, Get get) {
  std::vector<T> v(n);
  if (!distributed()) {
    for (size_t i = 0; i < n; ++i) v[i] = read(i);
    return v;
  }
  ByteWriter w;
  for (size_t i = 0; i < n; ++i) {
    if (!node_mine(node_of(i))) continue;
    w.put<uint64_t>(i);
    put(w, read(i));
  }
  for (const std::string& bytes : ranks_->all_gather(w.str())) {
    ByteReader r(bytes);
    while (!r.done()) {
      const auto i = r.get<uint64_t>();
      v.at(i) = get(r);
    }
  }
  return v;
}

template <class T, class NodeOf, class Read>
std::vector<T> Fabric::gather(size_t n, NodeOf node_of, Read read) {
  return gather_with<T>(
      n, node_of, read, [](ByteWriter& w, const T& x) { w.put<T>(x); },
      [](ByteReader& r) { return r.get<T>(); });
}

std::vector<NodeFigures> Fabric::gather_node_figures(uint64_t cc_at_ns) {
  return gather_with<NodeFigures>(
      nodes_.size(), [](size_t id) { return static_cast<uint32_t>(id); },
      [&](size_t id) {
        Node& n = nodes_[id];
        return n.sw ? NodeFigures::of(*n.sw, n.control.get(), now_)
                    : NodeFigures::of(*n.nic, now_, cc_at_ns, distributed());
      },
      [](ByteWriter& w, const NodeFigures& f) { f.write(w); },
      [](ByteReader& r) { return NodeFigures::read(r); });
}

void Fabric::gather_lp_figures() {
  // What each LP counted, and what only the rank that ran a node holds: its flows' completions,
  // its NICs' log lines, its leaves' bucket reports (weighted mode). Every rank takes the others'.
  if (!distributed()) return;
  ByteWriter w;
  for (auto& lp : lps_) {
    if (!mine(lp->index)) continue;
    w.put<uint8_t>(0);
    w.put(lp->index);
    w.put(lp->completed);
    w.put(lp->last_completion_ns);
    w.put(lp->hops);
    w.put(lp->serves);
    w.put(lp->dead_link_frames);
    w.put(lp->dead_link_frames_late);
    w.put(lp->checksum_filter_drops);
    w.put_vector(lp->fct_ns);
    w.put_vector(lp->sized_fct);
    w.put(lp->excluded_warmup);
    w.put_vector(lp->dynamic_posts);
  }
  for (uint32_t i = 0; i < plan_.flows().size(); ++i) {
    if (!node_mine(plan_.flows()[i].src)) continue;
    w.put<uint8_t>(1);
    w.put(i);
    w.put(flow_fct_[i]);
  }
  for (uint32_t h = 0; h < nic_log_.size(); ++h) {
    if (!node_mine(h)) continue;
    w.put<uint8_t>(2);
    w.put(h);
    const std::vector<std::string> lines = nic_log_[h]->last_formatted();
    w.put<uint64_t>(lines.size());
    for (const std::string& line : lines) w.put_string(line);
  }
  for (auto& [node, entry] : bucket_entries_) {
    w.put<uint8_t>(3);
    w.put(node);
    w.put_string(entry.dump());
  }
  for (uint32_t i = 0; i < plan_.flows().size(); ++i) {
    // The flow's path delays as its sender saw them (path_delays_): for the ideal FCT of its
    // unfinished messages and its flows.csv row, wherever those are computed.
    if (!node_mine(plan_.flows()[i].src)) continue;
    w.put<uint8_t>(5);
    w.put(i);
    w.put(path_delays_->forward_ns(i));
    w.put(path_delays_->forward_tail_ns(i));
    w.put(path_delays_->reverse_ns(i));
  }
  w.put<uint8_t>(4);
  w.put(link_down_in_flight_);
  uint64_t link_down_in_flight = 0;
  for (const std::string& bytes : ranks_->all_gather(w.str())) {
    ByteReader r(bytes);
    while (!r.done()) {
      const auto kind = r.get<uint8_t>();
      if (kind == 0) {
        Lp& lp = *lps_.at(r.get<uint32_t>());
        lp.completed = r.get<uint64_t>();
        lp.last_completion_ns = r.get<uint64_t>();
        lp.hops = r.get<uint64_t>();
        lp.serves = r.get<uint64_t>();
        lp.dead_link_frames = r.get<uint64_t>();
        lp.dead_link_frames_late = r.get<uint64_t>();
        lp.checksum_filter_drops = r.get<uint64_t>();
        lp.fct_ns = r.get_vector<uint64_t>();
        lp.sized_fct = r.get_vector<SizedFct>();
        lp.excluded_warmup = r.get<uint64_t>();
        lp.dynamic_posts = r.get_vector<DynamicPost>();
      } else if (kind == 1) {
        const auto i = r.get<uint32_t>();
        flow_fct_.at(i) = r.get<FlowFct>();
      } else if (kind == 2) {
        const auto h = r.get<uint32_t>();
        std::vector<std::string> lines(r.get<uint64_t>());
        for (std::string& line : lines) line = r.get_string();
        remote_nic_log_[h] = std::move(lines);
      } else if (kind == 3) {
        const auto node = r.get<uint32_t>();
        bucket_entries_[node] = nlohmann::json::parse(r.get_string());
      } else if (kind == 4) {
        link_down_in_flight += r.get<uint64_t>();
      } else if (kind == 5) {
        const auto i = r.get<uint32_t>();
        const auto forward = r.get<uint32_t>();
        const auto tail = r.get<uint32_t>();
        const auto reverse = r.get<uint32_t>();
        if (i >= path_delays_->flows()) {
          throw std::runtime_error("fabric_emu --mpi: figures from another rank do not read");
        }
        path_delays_->set_seen(i, forward, tail, reverse);
      } else {
        throw std::runtime_error("fabric_emu --mpi: figures from another rank do not read");
      }
    }
  }
  link_down_in_flight_ = link_down_in_flight;
}

}  // namespace spraynet::fabric
