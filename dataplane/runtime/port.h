// One DPDK ethdev port, configured, started and owned by one object.
#pragma once

#include <rte_ethdev.h>
#include <rte_ether.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include <cstdint>
#include <stdexcept>
#include <string>

namespace spraynet::runtime {

struct PortConfig {
  // A port id in digits ("0"); the name of an existing ethdev ("net_ring0", e.g. made by
  // --vdev on the EAL command line); or a vdev spec that the Port probes itself and removes
  // again on close ("net_pcap0,rx_pcap=in.pcap,tx_pcap=out.pcap", "net_null0",
  // "net_af_packet0,iface=veth0,qdisc_bypass=1"). net_ring refuses names longer than 17
  // characters without saying why: its rings are named "ETH_RXTX<queue>_<name>".
  std::string device;
  uint16_t rx_queues = 1, tx_queues = 1, rx_descriptors = 1024, tx_descriptors = 1024;
  bool promiscuous = true;
};

struct PortStats {
  uint64_t ipackets = 0, opackets = 0, ibytes = 0, obytes = 0;
  uint64_t imissed = 0, ierrors = 0, oerrors = 0, rx_nombuf = 0;
};

// A mistake in the device spec itself (a driver no bus knows, arguments for a device that
// already exists, a port id that does not exist, an mbuf too large for the PMD): what the
// programs report as a config error (exit 2). Every other failure (an interface that is not
// there, a driver or kernel that refuses the device or a queue) is a plain std::runtime_error:
// a device error (exit 1).
class PortConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The largest mbuf data room whose mempool object still fits one AF_XDP umem chunk: net_af_xdp
// (zero-copy between umem and mbuf) registers every mempool object as a chunk, and the kernel
// takes chunks of at most a page.
uint16_t af_xdp_max_data_room();
// Whether `device` (a vdev spec, or the name or id of an existing ethdev) is a net_af_xdp port.
bool is_af_xdp_device(const std::string& device);

// Opens the device, configures its queues (descriptor counts as the PMD adjusts them), puts
// every rx queue on `rx_pool`, starts it. Every failure throws std::runtime_error naming the
// device, the DPDK call and rte_strerror, e.g.
//   port "net_bogus0": rte_dev_probe failed: No such device
// The destructor stops the port; a device the Port probed is also closed and removed (which
// is when net_pcap closes its output file). net_af_xdp keeps the mbufs of its fill ring even
// after close (DPDK 22.11's eth_dev_close and xdp_umem_destroy free the socket and the umem,
// never the mbufs the kernel still had for receiving): pmd_held_after_close() says how many. Ports opened by id or name stay configured for
// whoever opens them next.
class Port {
 public:
  Port(const PortConfig& config, rte_mempool* rx_pool);
  ~Port();

  Port(Port&& other) noexcept;
  Port& operator=(Port&& other) noexcept;
  Port(const Port&) = delete;
  Port& operator=(const Port&) = delete;

  uint16_t id() const { return id_; }
  const std::string& name() const { return name_; }
  const PortConfig& config() const { return config_; }
  // The descriptor counts in use after rte_eth_dev_adjust_nb_rx_tx_desc.
  uint16_t rx_descriptors() const { return rx_desc_; }
  uint16_t tx_descriptors() const { return tx_desc_; }

  uint16_t rx_burst(uint16_t queue, rte_mbuf** pkts, uint16_t n) {
    return rte_eth_rx_burst(id_, queue, pkts, n);
  }
  // Returns how many the PMD accepted; pkts[accepted..n) still belong to the caller.
  uint16_t tx_burst(uint16_t queue, rte_mbuf** pkts, uint16_t n) {
    return rte_eth_tx_burst(id_, queue, pkts, n);
  }

  PortStats stats() const;
  rte_ether_addr mac() const;
  bool af_xdp() const { return af_xdp_; }
  // Mbufs of the rx pool that the PMD took at rx queue set-up and does not give back on close:
  // net_af_xdp's fill rings (one per queue, 2048 mbufs each); 0 for every other PMD.
  unsigned pmd_held_after_close() const { return pmd_held_; }

 private:
  void open_device();
  void probe(const std::string& name);
  void configure(rte_mempool* rx_pool);
  void check_af_xdp_pool(rte_mempool* rx_pool) const;
  [[noreturn]] void fail_af_xdp_rx_setup(uint16_t queue, int errnum) const;
  void drain_tx_completions() noexcept;
  void release() noexcept;
  [[noreturn]] void fail(const std::string& call, int errnum) const;

  PortConfig config_;
  std::string name_;
  uint16_t id_ = 0;
  uint16_t rx_desc_ = 0, tx_desc_ = 0;
  rte_mempool* rx_pool_ = nullptr;
  unsigned pmd_held_ = 0;
  bool af_xdp_ = false;
  bool open_ = false;    // false once moved from
  bool probed_ = false;  // we added the device, so we remove it
  bool started_ = false;
};

}  // namespace spraynet::runtime
