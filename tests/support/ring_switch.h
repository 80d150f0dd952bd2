// A switch on net_ring ports in-process, for tests that run SwitchLcore under real PollLoops:
// port 0 ("<prefix>_in") and n outputs in one ECMP group routed 0.0.0.0/0, each port a net_ring
// ethdev over two rte_rings the test reads and writes.
#pragma once

#include <rte_eth_ring.h>
#include <rte_ring.h>
#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

#include "control/switch_config.h"
#include "dataplane/runtime/port.h"
#include "dataplane/runtime/stop_signal.h"
#include "switch_emu/switch_lcore.h"
#include "switch_emu/switch_node.h"

namespace spraynet::test {

struct RingPort {
  rte_ring* rx = nullptr;  // queue 0's
  rte_ring* tx = nullptr;
  std::vector<rte_ring*> rxq, txq;  // every queue's ([0] is rx, tx)
  std::string name;
};

// `tx_ring`: the tx ring's size (a power of two; it holds one less), e.g. small enough for a
// test to fill. `queues`: rx and tx queues, a ring each.
inline RingPort make_ring_port(const std::string& name, unsigned tx_ring = 16384,
                               unsigned queues = 1) {
  RingPort p;
  p.name = name;
  for (unsigned q = 0; q < queues; ++q) {
    const std::string suffix = q == 0 ? "" : std::to_string(q);
    p.rxq.push_back(rte_ring_create((name + "_rx" + suffix).c_str(), 16384, SOCKET_ID_ANY,
                                    RING_F_SP_ENQ | RING_F_SC_DEQ));
    p.txq.push_back(rte_ring_create((name + "_tx" + suffix).c_str(), tx_ring, SOCKET_ID_ANY,
                                    RING_F_SP_ENQ | RING_F_SC_DEQ));
    REQUIRE(p.rxq.back() != nullptr);
    REQUIRE(p.txq.back() != nullptr);
  }
  p.rx = p.rxq[0];
  p.tx = p.txq[0];
  REQUIRE(rte_eth_from_rings(name.c_str(), p.rxq.data(), queues, p.txq.data(), queues,
                             SOCKET_ID_ANY) >= 0);
  return p;
}

// A switch whose ports are net_ring ethdevs over rte_rings the test reads and writes: port 0
// ("<prefix>_in") and n outputs in one ECMP group routed 0.0.0.0/0.
struct RingSwitch {
  // `extra_yaml`: more top-level config keys (e.g. "pfc: {priorities: [3]}\n"); `link`: each
  // port's link: key ("" none: a wire port); `output_tx_ring`: the outputs' tx ring size;
  // `queues`: every port's rx and tx queues.
  RingSwitch(const std::string& prefix, int outputs, rte_mempool* pool, uint64_t idle_exit_ns,
             const std::string& group_mode = "ecmp", const std::string& extra_yaml = "",
             const std::string& link = "", unsigned output_tx_ring = 16384, unsigned queues = 1) {
    rings.push_back(make_ring_port(prefix + "_in", 16384, queues));
    for (int i = 0; i < outputs; ++i)
      rings.push_back(make_ring_port(prefix + "_out" + std::to_string(i), output_tx_ring, queues));
    // rte_eth_from_rings names the ethdev "net_ring_<name>".
    std::string yaml = "ports:\n";
    for (const auto& r : rings)
      yaml += "  - {name: " + r.name + ", device: net_ring_" + r.name +
              (link.empty() ? "" : ", link: " + link) +
              (queues == 1 ? ""
                           : ", rx_queues: " + std::to_string(queues) +
                                 ", tx_queues: " + std::to_string(queues)) +
              "}\n";
    yaml += "groups:\n  - {name: g, mode: " + group_mode + ", ports: [";
    for (int i = 1; i <= outputs; ++i) yaml += (i > 1 ? ", " : "") + rings[i].name;
    yaml += "]}\nroutes:\n  - {prefix: 0.0.0.0/0, group: g}\n" + extra_yaml;
    config = control::parse_switch_config(control::ConfigNode::load_string(yaml, "t.yaml"));
    shared.node_port_of.assign(RTE_MAX_ETHPORTS, -1);
    for (uint16_t i = 0; i < rings.size(); ++i) {
      runtime::PortConfig pc{config.ports[i].device};
      pc.rx_queues = pc.tx_queues = static_cast<uint16_t>(queues);
      ports.emplace_back(pc, pool);
      shared.dpdk_port.push_back(ports.back().id());
      shared.node_port_of[ports.back().id()] = i;
    }
    node = std::make_unique<switch_emu::SwitchNode>(config, pool);
    shared.node = node.get();
    shared.publish_counters(0);
    shared.stop = &stop;
    // A termination condition only: the results do not depend on it.
    shared.idle_exit_ns = idle_exit_ns;
  }
  ~RingSwitch() {
    node->free_all();
    node.reset();
    std::vector<uint16_t> ids;
    for (const auto& p : ports) ids.push_back(p.id());
    ports.clear();
    // The ethdevs go too: a test program makes many switches, and ethdevs are few
    // (RTE_MAX_ETHPORTS).
    for (const uint16_t id : ids) {
      rte_eth_dev_info info{};
      if (rte_eth_dev_info_get(id, &info) != 0) continue;
      rte_eth_dev_close(id);
      if (info.device != nullptr) rte_dev_remove(info.device);
    }
    for (auto& r : rings) {
      for (rte_ring* q : r.rxq) rte_ring_free(q);
      for (rte_ring* q : r.txq) rte_ring_free(q);
    }
  }

  std::vector<RingPort> rings;
  control::SwitchConfig config;
  std::vector<runtime::Port> ports;
  switch_emu::SwitchShared shared;
  runtime::StopSignal stop;
  std::unique_ptr<switch_emu::SwitchNode> node;
};

}  // namespace spraynet::test
