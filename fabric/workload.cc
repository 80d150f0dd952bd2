#include "fabric/workload.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>

#include "fabric/flow_size_cdf.h"

namespace spraynet::fabric {

namespace {

// Deterministic helpers over mt19937_64 (whose output the standard fixes), not the
// implementation-defined std distributions: the same seed gives the same plan everywhere.
uint64_t below(std::mt19937_64& rng, uint64_t n) { return n == 0 ? 0 : rng() % n; }
double uniform(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }
template <class T>
void shuffle(std::vector<T>& v, std::mt19937_64& rng) {
  for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[below(rng, i)]);
}

}  // namespace

WorkloadPlan::WorkloadPlan(const FabricConfig& config, const Topology& topology, uint64_t seed,
                           const FlowSizeCdf* cdf)
    : config_(config), topology_(topology) {
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + 12345);
  const uint32_t n = static_cast<uint32_t>(topology.hosts().size());
  first_psn_ = static_cast<uint32_t>(below(rng, 1u << 24));
  engines_.resize(n);
  ring_of_.resize(n);
  for (uint32_t h = 0; h < n; ++h) {
    const HostSpec& host = topology.hosts()[h];
    RcTrafficEngineConfig& e = engines_[h];
    e.qps = 0;
    e.mtu = config.mtu;
    e.max_in_flight = config.max_in_flight;
    e.retransmit_timeout_ns = config.retransmit_timeout_ns;
    e.first_psn = first_psn_;
    e.max_burst = 8;
    // Random QP numbers per seed: with rxe's formula the UDP source ports are random too.
    e.first_local_qp = static_cast<uint32_t>(0x100 + below(rng, 0xF0000));
    e.local_ip = host.ip;
    e.local_mac = host.mac;
    e.dscp = 26;
    e.record_completions = true;
  }

  switch (config.workload) {
    case Workload::kPermutation: {
      finite_ = false;
      // A derangement of the leaves (a random cyclic shift of a random order), then a random
      // bijection between the hosts of each leaf and of its image.
      const uint32_t L = config.total_leaves();  // every pod's
      const uint32_t H = config.hosts_per_leaf;
      std::vector<uint32_t> order(L);
      for (uint32_t i = 0; i < L; ++i) order[i] = i;
      shuffle(order, rng);
      const uint32_t shift = 1 + static_cast<uint32_t>(below(rng, L - 1));
      std::vector<uint32_t> target_leaf(L);
      for (uint32_t i = 0; i < L; ++i) target_leaf[order[i]] = order[(i + shift) % L];
      for (uint32_t l = 0; l < L; ++l) {
        std::vector<uint32_t> dst(H);
        for (uint32_t i = 0; i < H; ++i) dst[i] = target_leaf[l] * H + i;
        shuffle(dst, rng);
        for (uint32_t i = 0; i < H; ++i) {
          for (uint32_t q = 0; q < config.qps_per_host; ++q) {
            add_flow(l * H + i, dst[i], false, 0, static_cast<uint32_t>(config.msg_bytes),
                     config.message_gap_ns);
          }
        }
      }
      break;
    }
    case Workload::kAllreduce: {
      if (n < 2) throw std::invalid_argument("workload allreduce: at least 2 hosts");
      ranks_ = n;
      allreduce_bytes_ = config.bytes;
      ring_host_.resize(n);
      for (uint32_t r = 0; r < n; ++r) ring_host_[r] = r;
      shuffle(ring_host_, rng);
      steps_ = 2 * (n - 1);
      const uint64_t chunk = (config.bytes + uint64_t{n} * config.channels - 1) /
                             (uint64_t{n} * config.channels);
      if (chunk > (uint64_t{1} << 31)) throw std::invalid_argument("bytes: a ring chunk above 2^31");
      chunk_bytes_ = static_cast<uint32_t>(std::max<uint64_t>(1, chunk));
      ring_qp_.assign(config.channels, std::vector<uint32_t>(n));
      for (uint32_t c = 0; c < config.channels; ++c) {
        for (uint32_t r = 0; r < n; ++r) {
          const uint32_t src = ring_host_[r];
          const uint32_t dst = ring_host_[(r + 1) % n];
          const uint32_t qi = add_flow(src, dst, true, 0, 0, 0);
          if (ring_of_[src].size() <= qi) ring_of_[src].resize(qi + 1, -1);
          ring_of_[src][qi] = static_cast<int32_t>(ring_.size());
          ring_qp_[c][r] = static_cast<uint32_t>(ring_.size());
          ring_.push_back(RingQp{r, c, src, qi, 0});
          posts_.push_back(Post{src, qi, chunk_bytes_, 0});
        }
      }
      messages_total_ = uint64_t{steps_} * n * config.channels;
      bytes_total_ = messages_total_ * chunk_bytes_;
      break;
    }
    case Workload::kAlltoall: {
      const uint32_t bytes = static_cast<uint32_t>(std::min<uint64_t>(config.bytes, 1ull << 31));
      for (uint32_t s = 0; s < n; ++s) {
        for (uint32_t d = 0; d < n; ++d) {
          if (d != s) add_flow(s, d, false, 1, bytes, 0);
        }
      }
      messages_total_ = uint64_t{n} * (n - 1);
      bytes_total_ = messages_total_ * bytes;
      break;
    }
    case Workload::kIncast: {
      const uint32_t bytes = static_cast<uint32_t>(std::min<uint64_t>(config.bytes, 1ull << 31));
      std::vector<uint32_t> hosts(n);
      for (uint32_t h = 0; h < n; ++h) hosts[h] = h;
      shuffle(hosts, rng);
      const uint32_t receiver = hosts[0];
      for (uint32_t i = 1; i <= config.incast_senders; ++i) add_flow(hosts[i], receiver, false, 1, bytes, 0);
      messages_total_ = config.incast_senders;
      bytes_total_ = messages_total_ * bytes;
      break;
    }
    case Workload::kCdf: {
      if (cdf == nullptr) throw std::invalid_argument("workload cdf: no flow-size CDF");
      if (n < 2) throw std::invalid_argument("workload cdf: at least 2 hosts");
      // Arrivals per second so that the offered bytes are the host load (`load`, or
      // `network_load` converted: FabricConfig::host_load) of the host's line rate.
      const double rate_bps = config.link_gbps * 1e9 * config.planes;
      const double per_ns = config.host_load() * rate_bps / (8.0 * cdf->mean_bytes()) / 1e9;
      // Every flow its own QP (and so, by rxe's formula, its own UDP source port): ECMP hashes
      // flows, not host pairs, as with the per-flow connections of ns-3's and ConWeave's
      // traces.
      for (uint32_t s = 0; s < n; ++s) {
        double t = 0;
        for (;;) {
          t += -std::log(1.0 - uniform(rng)) / per_ns;
          if (t >= static_cast<double>(config.duration_ns)) break;
          uint32_t d = static_cast<uint32_t>(below(rng, n - 1));
          if (d >= s) ++d;
          const uint64_t size = std::min<uint64_t>(cdf->sample(uniform(rng)), 1ull << 31);
          const uint32_t qp = add_flow(s, d, true, 0, 0, 0, true);
          posts_.push_back(Post{s, qp,
                                static_cast<uint32_t>(size), static_cast<uint64_t>(t)});
          ++messages_total_;
          bytes_total_ += size;
        }
      }
      break;
    }
  }
  for (uint32_t h = 0; h < n; ++h) {
    if (engines_[h].qps == 0) {
      // A host the workload leaves out still runs an RC engine (the NIC's host): one idle
      // responder QP that nothing addresses.
      RcQpSpec idle;
      idle.role = RcQpRole::kResponder;
      idle.peer_ip = topology.hosts()[h].ip;
      idle.peer_mac = topology.hosts()[h].mac;
      idle.peer_qp = engines_[h].first_local_qp;
      engines_[h].qp_specs.push_back(idle);
      engines_[h].qps = 1;
    }
    const auto& specs = engines_[h].qp_specs;
    if (std::any_of(specs.begin(), specs.end(),
                    [](const RcQpSpec& q) { return q.role == RcQpRole::kRequester; })) {
      ++senders_;
    }
  }
}

uint32_t WorkloadPlan::add_flow(uint32_t src, uint32_t dst, bool posted, uint64_t messages,
                                uint32_t message_bytes, uint64_t gap_ns, bool one_shot) {
  const HostSpec& s = topology_.hosts()[src];
  const HostSpec& d = topology_.hosts()[dst];
  RcTrafficEngineConfig& se = engines_[src];
  RcTrafficEngineConfig& de = engines_[dst];
  QpFlow f;
  f.src = src;
  f.dst = dst;
  f.src_qp_index = se.qps;
  f.dst_qp_index = de.qps;
  f.src_qpn = se.first_local_qp + f.src_qp_index;
  f.dst_qpn = de.first_local_qp + f.dst_qp_index;
  if (f.src_qpn > 0xFFFFFF || f.dst_qpn > 0xFFFFFF) throw std::invalid_argument("too many QPs");

  RcQpSpec req;
  req.role = RcQpRole::kRequester;
  req.peer_ip = d.ip;
  req.peer_mac = d.mac;
  req.peer_qp = f.dst_qpn;
  // fixed: every QP of a NIC on the port of its first QP, as NICs that do not vary it.
  req.udp_src_port = config_.udp_sport_fixed ? rxe_udp_source_port(se.first_local_qp) : 0;
  req.posted = posted;
  req.messages = messages;
  req.message_bytes = message_bytes;
  req.message_gap_ns = gap_ns;
  req.op = config_.op == "read" ? RcOp::kRead : RcOp::kWrite;
  req.one_shot = one_shot;
  se.qp_specs.push_back(req);
  ++se.qps;

  RcQpSpec resp;
  resp.role = RcQpRole::kResponder;
  resp.peer_ip = s.ip;
  resp.peer_mac = s.mac;
  resp.peer_qp = f.src_qpn;
  resp.udp_src_port = config_.udp_sport_fixed ? rxe_udp_source_port(de.first_local_qp) : 0;
  resp.one_shot = one_shot;
  de.qp_specs.push_back(resp);
  ++de.qps;

  flows_.push_back(f);
  return f.src_qp_index;
}

void WorkloadPlan::on_completion(uint32_t host, uint32_t qp_index, uint64_t now_ns,
                                 std::vector<Post>& out) {
  if (config_.workload != Workload::kAllreduce) return;
  if (host >= ring_of_.size() || qp_index >= ring_of_[host].size()) return;
  const int32_t ri = ring_of_[host][qp_index];
  if (ri < 0) return;
  RingQp& q = ring_[static_cast<size_t>(ri)];
  const uint32_t step = q.steps_done++;
  // Rank r's step k reached rank r+1, which can now send its step k+1 (its step 0 was posted
  // at the start).
  if (step + 1 >= steps_) return;
  const RingQp& next = ring_[ring_qp_[q.channel][(q.rank + 1) % ranks_]];
  out.push_back(Post{next.host, next.qp_index, chunk_bytes_, now_ns});
}

}  // namespace spraynet::fabric
