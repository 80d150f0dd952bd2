#include "dataplane/runtime/port.h"

#include <rte_dev.h>
#include <rte_errno.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <stdexcept>
#include <utility>

#include "dataplane/runtime/logging.h"

namespace spraynet::runtime {
namespace {

bool all_digits(const std::string& s) {
  return !s.empty() &&
         std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
}

std::string existing_ports() {
  std::string list;
  uint16_t pid;
  RTE_ETH_FOREACH_DEV(pid) {
    char name[RTE_ETH_NAME_MAX_LEN];
    if (rte_eth_dev_get_name_by_port(pid, name) != 0) name[0] = '\0';
    list += (list.empty() ? "" : ", ") + std::to_string(pid) + " (" + name + ")";
  }
  return list.empty() ? "there are no ports" : "ports are " + list;
}

}  // namespace

Port::Port(const PortConfig& config, rte_mempool* rx_pool) : config_(config) {
  open_device();
  try {
    configure(rx_pool);
  } catch (...) {
    release();
    throw;
  }
}

Port::~Port() {
  release();
}

Port::Port(Port&& other) noexcept
    : config_(std::move(other.config_)),
      name_(std::move(other.name_)),
      id_(other.id_),
      rx_desc_(other.rx_desc_),
      tx_desc_(other.tx_desc_),
      open_(std::exchange(other.open_, false)),
      probed_(other.probed_),
      started_(other.started_) {}

Port& Port::operator=(Port&& other) noexcept {
  if (this != &other) {
    release();
    config_ = std::move(other.config_);
    name_ = std::move(other.name_);
    id_ = other.id_;
    rx_desc_ = other.rx_desc_;
    tx_desc_ = other.tx_desc_;
    open_ = std::exchange(other.open_, false);
    probed_ = other.probed_;
    started_ = other.started_;
  }
  return *this;
}

void Port::fail(const std::string& call, int errnum) const {
  throw std::runtime_error("port \"" + config_.device + "\": " + call +
                           " failed: " + rte_strerror(errnum));
}

void Port::open_device() {
  const std::string& dev = config_.device;
  if (all_digits(dev)) {
    const unsigned long pid = dev.size() > 5 ? RTE_MAX_ETHPORTS : std::stoul(dev);
    if (pid >= RTE_MAX_ETHPORTS || !rte_eth_dev_is_valid_port(static_cast<uint16_t>(pid))) {
      throw std::runtime_error("port \"" + dev + "\": no such port id; " + existing_ports());
    }
    id_ = static_cast<uint16_t>(pid);
  } else {
    // A vdev spec names its device before the first comma; without arguments it may also be
    // an ethdev that already exists (--vdev on the EAL command line, or probed by another).
    const std::string name = dev.substr(0, dev.find(','));
    const bool exists = rte_eth_dev_get_port_by_name(name.c_str(), &id_) == 0;
    if (exists && name.size() != dev.size()) {
      // rte_dev_probe would return 0 for it and ignore the arguments.
      throw std::runtime_error("port \"" + dev + "\": device \"" + name +
                               "\" already exists; open it by name or id");
    }
    if (!exists) probe(name);
  }
  char name[RTE_ETH_NAME_MAX_LEN];
  if (rte_eth_dev_get_name_by_port(id_, name) == 0) name_ = name;
  open_ = true;
}

void Port::probe(const std::string& name) {
  const int ret = rte_dev_probe(config_.device.c_str());
  // DPDK 22.11 answers a name no bus or driver knows with -EFAULT, and passes on the -1 that
  // PMDs return when their probe fails: not an errno (rte_strerror would say EPERM), and what
  // rte_errno holds then is stale, so the PMD's own log line is the only reason there is.
  if (ret == -EFAULT) fail("rte_dev_probe", ENODEV);
  if (ret == -1) {
    throw std::runtime_error("port \"" + config_.device +
                             "\": rte_dev_probe failed: the driver refused the device (its "
                             "reason is in the dpdk log above)");
  }
  if (ret < 0) fail("rte_dev_probe", -ret);
  if (rte_eth_dev_get_port_by_name(name.c_str(), &id_) != 0) {
    rte_eal_hotplug_remove("vdev", name.c_str());
    throw std::runtime_error("port \"" + config_.device + "\": device \"" + name +
                             "\" was probed but is not an ethdev");
  }
  probed_ = true;
}

void Port::configure(rte_mempool* rx_pool) {
  rte_eth_conf conf{};
  int ret = rte_eth_dev_configure(id_, config_.rx_queues, config_.tx_queues, &conf);
  if (ret < 0) fail("rte_eth_dev_configure", -ret);

  rx_desc_ = config_.rx_descriptors;
  tx_desc_ = config_.tx_descriptors;
  ret = rte_eth_dev_adjust_nb_rx_tx_desc(id_, &rx_desc_, &tx_desc_);
  if (ret < 0) fail("rte_eth_dev_adjust_nb_rx_tx_desc", -ret);

  const int socket = rte_eth_dev_socket_id(id_);
  const unsigned queue_socket = socket < 0 ? SOCKET_ID_ANY : static_cast<unsigned>(socket);
  for (uint16_t q = 0; q < config_.rx_queues; ++q) {
    ret = rte_eth_rx_queue_setup(id_, q, rx_desc_, queue_socket, nullptr, rx_pool);
    if (ret < 0) fail("rte_eth_rx_queue_setup(queue " + std::to_string(q) + ")", -ret);
  }
  for (uint16_t q = 0; q < config_.tx_queues; ++q) {
    ret = rte_eth_tx_queue_setup(id_, q, tx_desc_, queue_socket, nullptr);
    if (ret < 0) fail("rte_eth_tx_queue_setup(queue " + std::to_string(q) + ")", -ret);
  }

  ret = rte_eth_dev_start(id_);
  if (ret < 0) fail("rte_eth_dev_start", -ret);
  started_ = true;

  if (config_.promiscuous) {
    // Several virtual PMDs (net_ring, net_pcap on files) have no such mode; they see every
    // packet anyway, so refusing is not an error.
    ret = rte_eth_promiscuous_enable(id_);
    if (ret != 0) {
      logger("port")->debug("port \"{}\": promiscuous mode not enabled: {}", config_.device,
                            rte_strerror(-ret));
    }
  }
  logger("port")->debug("port {} \"{}\" up: {} rx x {} desc, {} tx x {} desc", id_, name_,
                       config_.rx_queues, rx_desc_, config_.tx_queues, tx_desc_);
}

void Port::release() noexcept {
  if (!open_) return;
  open_ = false;
  auto log = logger("port");
  if (started_) {
    // What arrived after the last poll goes back to its pool: a loopback vdev (net_ring) holds
    // the frames last sent on it in its ring, and neither stop nor close frees them. Bounded,
    // since a source such as net_null never runs dry.
    rte_mbuf* burst[32];
    for (uint16_t q = 0; q < config_.rx_queues; ++q) {
      for (unsigned round = 0; round < 1024; ++round) {
        const uint16_t n = rte_eth_rx_burst(id_, q, burst, 32);
        rte_pktmbuf_free_bulk(burst, n);
        if (n == 0) break;
      }
    }
    const int ret = rte_eth_dev_stop(id_);
    if (ret != 0) log->warn("port \"{}\": rte_eth_dev_stop failed: {}", name_, rte_strerror(-ret));
    started_ = false;
  }
  if (!probed_) return;
  // The device must be looked up before close: close releases the port and its device link.
  rte_eth_dev_info info{};
  rte_device* device = rte_eth_dev_info_get(id_, &info) == 0 ? info.device : nullptr;
  int ret = rte_eth_dev_close(id_);
  if (ret != 0) log->warn("port \"{}\": rte_eth_dev_close failed: {}", name_, rte_strerror(-ret));
  if (device != nullptr) {
    ret = rte_dev_remove(device);
    if (ret != 0) log->warn("port \"{}\": rte_dev_remove failed: {}", name_, rte_strerror(-ret));
  }
}

PortStats Port::stats() const {
  rte_eth_stats s{};
  const int ret = rte_eth_stats_get(id_, &s);
  if (ret != 0) fail("rte_eth_stats_get", -ret);
  return PortStats{s.ipackets, s.opackets, s.ibytes,  s.obytes,
                   s.imissed,  s.ierrors,  s.oerrors, s.rx_nombuf};
}

rte_ether_addr Port::mac() const {
  rte_ether_addr addr{};
  const int ret = rte_eth_macaddr_get(id_, &addr);
  if (ret != 0) fail("rte_eth_macaddr_get", -ret);
  return addr;
}

}  // namespace spraynet::runtime
