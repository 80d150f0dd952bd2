#include "nic_emu/nic_lcore.h"

#include <algorithm>

namespace spraynet::nic_emu {

void NicLcore::on_rx(uint16_t port_id, uint16_t, rte_mbuf** pkts, uint16_t n, uint64_t now_ns,
                     runtime::TxSink& tx) {
  s_.last_rx_ns.store(now_ns, std::memory_order_relaxed);
  const int node_port = port_id < s_.node_port_of.size() ? s_.node_port_of[port_id] : -1;
  std::lock_guard<std::mutex> g(s_.lock);
  // An unknown port id reaches receive() out of range: counted there and freed.
  s_.node->receive(node_port < 0 ? UINT16_MAX : static_cast<uint16_t>(node_port), pkts, n, now_ns);
  release(now_ns, tx);
}

void NicLcore::on_poll(uint64_t now_ns, runtime::TxSink& tx) {
  bool idle, done;
  {
    std::lock_guard<std::mutex> g(s_.lock);
    s_.node->poll(now_ns);
    release(now_ns, tx);
    idle = s_.node->idle();
    done = s_.node->rc_engine() != nullptr && s_.node->rc_engine()->done();
    if (s_.node->rc_engine() != nullptr && s_.rc_started_ns == 0) s_.rc_started_ns = now_ns;
    if (done && s_.rc_done_ns == 0) s_.rc_done_ns = now_ns;
  }
  const bool stop =
      (s_.stop_at_ns != 0 && now_ns >= s_.stop_at_ns) || (s_.stop_when_done && done && idle);
  if (stop && !probes_in_flight(now_ns)) s_.stop->request();
  const uint64_t last_rx = s_.last_rx_ns.load(std::memory_order_relaxed);
  if (s_.idle_exit_ns != 0 && idle && now_ns > last_rx && now_ns - last_rx >= s_.idle_exit_ns) {
    s_.stop->request();
  }
}

bool NicLcore::probes_in_flight(uint64_t now_ns) {
  std::lock_guard<std::mutex> g(s_.lock);
  if (s_.node->probe() == nullptr) return false;
  if (s_.node->probes_sending()) {
    s_.node->stop_probes();
    probe_stop_ns_ = now_ns;
    return true;
  }
  const auto& c = s_.node->counters();
  return c.probes_received < c.probes_sent && now_ns - probe_stop_ns_ < kProbeDrainNs;
}

void NicLcore::on_stop(uint64_t now_ns, runtime::TxSink& tx) {
  std::lock_guard<std::mutex> g(s_.lock);
  // What the reorder engine still holds goes to the host, in order, gaps skipped; then what
  // egress has due. The rest is freed by NicNode::free_all().
  // Egress is drained on the emulated links' own time (serialisation, delay), not the wall
  // clock: a stopped node owes the ports what it already accepted.
  s_.node->flush(now_ns);
  uint64_t t = now_ns;
  for (unsigned round = 0; round < 1'000'000; ++round) {
    release(t, tx);
    if (s_.node->idle()) break;
    const uint64_t next = s_.node->next_event_ns(t);
    if (next == EgressPort::kNever) break;
    t = std::max(next, t + 1);
  }
}

void NicLcore::release(uint64_t now_ns, runtime::TxSink& tx) {
  rte_mbuf* out[32];
  for (uint16_t p = 0; p < s_.node->port_count(); ++p) {
    uint16_t n;
    do {
      n = s_.node->transmit(p, now_ns, out, 32);
      for (uint16_t i = 0; i < n; ++i) tx.send(s_.dpdk_port[p], 0, out[i]);
    } while (n == 32);
  }
}

}  // namespace spraynet::nic_emu
