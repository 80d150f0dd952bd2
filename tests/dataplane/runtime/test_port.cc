#include "dataplane/runtime/port.h"

#include <rte_dev.h>
#include <rte_ethdev.h>
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "dataplane/runtime/packet_pool.h"

using spraynet::runtime::PacketPool;
using spraynet::runtime::Port;
using spraynet::runtime::PortConfig;

namespace {

// A burst through a port: net_ring with no arguments loops each tx queue back to its rx queue.
unsigned loop_back(Port& port, PacketPool& pool, unsigned count) {
  std::vector<rte_mbuf*> out(count);
  for (auto& m : out) {
    m = rte_pktmbuf_alloc(pool.get());
    REQUIRE(m != nullptr);
    REQUIRE(rte_pktmbuf_append(m, 64) != nullptr);
  }
  const uint16_t sent = port.tx_burst(0, out.data(), static_cast<uint16_t>(count));
  rte_pktmbuf_free_bulk(out.data() + sent, count - sent);
  std::vector<rte_mbuf*> in(count);
  const uint16_t got = port.rx_burst(0, in.data(), static_cast<uint16_t>(count));
  rte_pktmbuf_free_bulk(in.data(), got);
  return got;
}

bool port_exists(const char* name) {
  uint16_t id;
  return rte_eth_dev_get_port_by_name(name, &id) == 0;
}

}  // namespace

TEST_CASE("a port opened from a vdev spec is probed, runs, and is removed again", "[port]") {
  PacketPool pool({.name = "port_spec"});
  {
    Port port({.device = "net_ring_spec0"}, pool.get());
    CHECK(port.name() == "net_ring_spec0");
    CHECK(rte_eth_dev_is_valid_port(port.id()));
    CHECK(port.rx_descriptors() > 0);
    CHECK(port.tx_descriptors() > 0);
    CHECK(loop_back(port, pool, 10) == 10);
    const auto s = port.stats();
    CHECK(s.opackets == 10);
    CHECK(s.ipackets == 10);
    CHECK(s.obytes == 0);  // net_ring counts packets only
    const rte_ether_addr mac = port.mac();
    rte_ether_addr direct{};
    REQUIRE(rte_eth_macaddr_get(port.id(), &direct) == 0);
    CHECK(rte_is_same_ether_addr(&mac, &direct));
  }
  CHECK_FALSE(port_exists("net_ring_spec0"));
  // Removal really let go (net_ring's rings too): the same spec can be opened again.
  {
    Port again({.device = "net_ring_spec0"}, pool.get());
    CHECK(loop_back(again, pool, 4) == 4);
  }
  CHECK(pool.whole());
}

TEST_CASE("a port opened by name or by id uses an existing ethdev and leaves it", "[port]") {
  PacketPool pool({.name = "port_named"});
  // As if made by --vdev on the EAL command line.
  REQUIRE(rte_dev_probe("net_ring_named0") == 0);
  uint16_t id;
  REQUIRE(rte_eth_dev_get_port_by_name("net_ring_named0", &id) == 0);
  {
    Port by_name({.device = "net_ring_named0"}, pool.get());
    CHECK(by_name.id() == id);
    CHECK(loop_back(by_name, pool, 5) == 5);
  }
  REQUIRE(port_exists("net_ring_named0"));
  {
    Port by_id({.device = std::to_string(id), .rx_queues = 2, .tx_queues = 2}, pool.get());
    CHECK(by_id.name() == "net_ring_named0");
    CHECK(loop_back(by_id, pool, 7) == 7);
  }
  REQUIRE(port_exists("net_ring_named0"));
  REQUIRE(rte_eth_dev_close(id) == 0);
  REQUIRE(rte_eal_hotplug_remove("vdev", "net_ring_named0") == 0);
  CHECK(pool.whole());
}

TEST_CASE("a spec no driver knows names the device, the call and the error", "[port]") {
  PacketPool pool({.name = "port_bogus"});
  CHECK_THROWS_WITH(Port({.device = "net_bogus0"}, pool.get()),
                    "port \"net_bogus0\": rte_dev_probe failed: No such device");
  CHECK(pool.whole());
}

TEST_CASE("a driver that refuses its arguments is reported without a bogus errno", "[port]") {
  PacketPool pool({.name = "port_refuses"});
  // PMD probes return -1, which is not an errno: no "Operation not permitted" here.
  CHECK_THROWS_WITH(
      Port({.device = "net_pcap_missing0,rx_pcap=/nonexistent/in.pcap"}, pool.get()),
      "port \"net_pcap_missing0,rx_pcap=/nonexistent/in.pcap\": rte_dev_probe failed: the "
      "driver refused the device (its reason is in the dpdk log above)");
  CHECK_THROWS_WITH(Port({.device = "net_null_bad0,no_such_arg=1"}, pool.get()),
                    "port \"net_null_bad0,no_such_arg=1\": rte_dev_probe failed: the driver "
                    "refused the device (its reason is in the dpdk log above)");
  CHECK(pool.whole());
}

TEST_CASE("a spec with arguments for a device that already exists is refused", "[port]") {
  PacketPool pool({.name = "port_twice"});
  Port first({.device = "net_null_twice0"}, pool.get());
  CHECK_THROWS_WITH(Port({.device = "net_null_twice0,size=256"}, pool.get()),
                    "port \"net_null_twice0,size=256\": device \"net_null_twice0\" already "
                    "exists; open it by name or id");
  CHECK(pool.whole());
}

TEST_CASE("an unknown port id is an error naming the ports that exist", "[port]") {
  PacketPool pool({.name = "port_unknown"});
  Port null_port({.device = "net_null_known0"}, pool.get());
  const std::string expected = "port \"31\": no such port id; ports are " +
                               std::to_string(null_port.id()) + " (net_null_known0)";
  CHECK_THROWS_WITH(Port({.device = "31"}, pool.get()), Catch::Contains(expected));
  CHECK_THROWS_WITH(Port({.device = "999999"}, pool.get()), Catch::Contains("no such port id"));
  CHECK(pool.whole());
}

TEST_CASE("more queues than the device has is a config error naming both counts, no device left",
          "[port]") {
  PacketPool pool({.name = "port_refused"});
  // net_ring has 16 ring pairs: 17 rx queues are more than it has.
  CHECK_THROWS_AS(Port({.device = "net_ring_refused0", .rx_queues = 17}, pool.get()),
                  spraynet::runtime::PortConfigError);
  CHECK_THROWS_WITH(Port({.device = "net_ring_refused0", .rx_queues = 17}, pool.get()),
                    Catch::StartsWith("port \"net_ring_refused0\": 17 rx / 1 tx queues asked, "
                                      "the device has at most 16 rx / 16 tx"));
  CHECK_FALSE(port_exists("net_ring_refused0"));
  CHECK(pool.whole());
}

TEST_CASE("net_null fills rx bursts from the port's pool and frees what it transmits", "[port]") {
  PacketPool pool({.name = "port_null", .mbufs = 2047, .cache = 0});
  Port port({.device = "net_null_rx0,size=128"}, pool.get());
  rte_mbuf* pkts[32];
  const uint16_t n = port.rx_burst(0, pkts, 32);
  REQUIRE(n == 32);
  CHECK(pkts[0]->pool == pool.get());
  CHECK(rte_pktmbuf_pkt_len(pkts[0]) == 128);
  CHECK(pool.in_use() == 32);
  CHECK(port.tx_burst(0, pkts, n) == n);
  CHECK(port.stats().ipackets == 32);
  CHECK(port.stats().opackets == 32);
  CHECK(pool.whole());
}

TEST_CASE("a moved port is released once, by its new owner", "[port]") {
  PacketPool pool({.name = "port_moved"});
  std::vector<Port> ports;
  ports.emplace_back(PortConfig{.device = "net_ring_moved0"}, pool.get());
  ports.emplace_back(PortConfig{.device = "net_ring_moved1"}, pool.get());
  Port moved = std::move(ports[0]);
  CHECK(moved.name() == "net_ring_moved0");
  CHECK(loop_back(moved, pool, 3) == 3);
  ports.clear();
  CHECK(port_exists("net_ring_moved0"));
  CHECK_FALSE(port_exists("net_ring_moved1"));
  moved = Port({.device = "net_ring_moved2"}, pool.get());
  CHECK_FALSE(port_exists("net_ring_moved0"));
  CHECK(pool.whole());
}

TEST_CASE("a port with several queues on a PMD without RSS: each queue its own traffic", "[port]") {
  // net_ring hashes nothing (no flow_type_rss_offloads): the port is configured without RSS
  // (and says so in the log) rather than refused, and tx queue q loops back to rx queue q.
  PacketPool pool({.name = "port_mq"});
  {
    PortConfig c{.device = "net_ring_mq0"};
    c.rx_queues = c.tx_queues = 2;
    Port port(c, pool.get());
    std::vector<rte_mbuf*> out(8);
    for (auto& m : out) {
      m = rte_pktmbuf_alloc(pool.get());
      REQUIRE(m != nullptr);
      REQUIRE(rte_pktmbuf_append(m, 64) != nullptr);
    }
    const uint16_t sent = port.tx_burst(1, out.data(), 8);
    rte_pktmbuf_free_bulk(out.data() + sent, 8 - sent);
    CHECK(sent == 8);
    std::vector<rte_mbuf*> in(8);
    CHECK(port.rx_burst(0, in.data(), 8) == 0);
    const uint16_t got = port.rx_burst(1, in.data(), 8);
    rte_pktmbuf_free_bulk(in.data(), got);
    CHECK(got == 8);
  }
  CHECK(rte_mempool_in_use_count(pool.get()) == 0);
}
