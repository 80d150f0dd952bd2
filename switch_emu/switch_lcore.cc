#include "switch_emu/switch_lcore.h"

namespace spraynet::switch_emu {

SwitchLcore::SwitchLcore(SwitchShared& shared, std::vector<uint16_t> ports)
    : s_(shared), ports_(std::move(ports)) {}

void SwitchLcore::on_rx(uint16_t port_id, uint16_t, rte_mbuf** pkts, uint16_t n,
                        uint64_t now_ns, runtime::TxSink&) {
  s_.last_rx_ns.store(now_ns, std::memory_order_relaxed);
  const int node_port = port_id < s_.node_port_of.size() ? s_.node_port_of[port_id] : -1;
  std::lock_guard<std::mutex> g(s_.lock);
  // An unknown port id reaches receive() as an out-of-range port: counted there and freed.
  s_.node->receive(node_port < 0 ? UINT16_MAX : static_cast<uint16_t>(node_port), pkts, n,
                   now_ns);
}

void SwitchLcore::on_poll(uint64_t now_ns, runtime::TxSink& tx) {
  bool idle;
  {
    std::lock_guard<std::mutex> g(s_.lock);
    s_.node->poll(now_ns);
    release(now_ns, tx);
    idle = s_.node->idle();
  }
  if (s_.stop_at_ns != 0 && now_ns >= s_.stop_at_ns) s_.stop->request();
  // Another lcore may have stored a later time than this lcore's now_ns: not idle then.
  const uint64_t last_rx = s_.last_rx_ns.load(std::memory_order_relaxed);
  if (s_.idle_exit_ns != 0 && idle && now_ns > last_rx && now_ns - last_rx >= s_.idle_exit_ns) {
    s_.stop->request();
  }
}

void SwitchLcore::on_stop(uint64_t now_ns, runtime::TxSink& tx) {
  std::lock_guard<std::mutex> g(s_.lock);
  release(now_ns, tx);  // what is due goes out; the rest is freed by SwitchNode::free_all()
}

void SwitchLcore::release(uint64_t now_ns, runtime::TxSink& tx) {
  rte_mbuf* out[32];
  for (uint16_t p : ports_) {
    uint16_t n;
    do {
      n = s_.node->transmit(p, now_ns, out, 32);
      for (uint16_t i = 0; i < n; ++i) tx.send(s_.dpdk_port[p], 0, out[i]);
    } while (n == 32);
  }
}

}  // namespace spraynet::switch_emu
