#include "dataplane/runtime/port.h"

#include <net/if.h>
#include <rte_cycles.h>
#include <rte_dev.h>
#include <rte_errno.h>
#include <sys/socket.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
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

// The value of `key=` in a vdev spec's arguments ("net_af_xdp0,iface=veth0,start_queue=0"),
// or "" when the spec has none.
std::string spec_arg(const std::string& spec, const std::string& key) {
  size_t pos = spec.find(',');
  while (pos != std::string::npos) {
    const size_t start = pos + 1;
    pos = spec.find(',', start);
    const std::string kv = spec.substr(start, pos == std::string::npos ? pos : pos - start);
    if (kv.rfind(key + "=", 0) == 0) return kv.substr(key.size() + 1);
  }
  return "";
}

std::string driver_of(uint16_t port_id) {
  rte_eth_dev_info info{};
  if (rte_eth_dev_info_get(port_id, &info) != 0 || info.driver_name == nullptr) return "";
  return info.driver_name;
}

unsigned page_size() {
  const long page = ::sysconf(_SC_PAGESIZE);
  return page > 0 ? static_cast<unsigned>(page) : 4096;
}

}  // namespace

uint16_t af_xdp_max_data_room() {
  // An mbuf pool object is the mempool header, the rte_mbuf, and the data room (what
  // rte_pktmbuf_pool_create asks for), padded by rte_mempool_calc_obj_size (cache lines, and
  // spread over memory channels): that whole object is one umem chunk.
  const unsigned page = page_size();
  for (unsigned room = page; room > RTE_PKTMBUF_HEADROOM; room -= RTE_CACHE_LINE_SIZE) {
    const uint32_t elt = static_cast<uint32_t>(sizeof(rte_mbuf)) + room;
    if (rte_mempool_calc_obj_size(elt, 0, nullptr) <= page) return static_cast<uint16_t>(room);
  }
  return RTE_PKTMBUF_HEADROOM;
}

bool is_af_xdp_device(const std::string& device) {
  if (device.rfind("net_af_xdp", 0) == 0) return true;
  uint16_t pid = 0;
  if (all_digits(device)) {
    if (device.size() > 5) return false;
    const unsigned long id = std::stoul(device);
    if (id >= RTE_MAX_ETHPORTS || !rte_eth_dev_is_valid_port(static_cast<uint16_t>(id))) {
      return false;
    }
    pid = static_cast<uint16_t>(id);
  } else if (rte_eth_dev_get_port_by_name(device.c_str(), &pid) != 0) {
    return false;
  }
  return driver_of(pid) == "net_af_xdp";
}

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
      rx_pool_(other.rx_pool_),
      pmd_held_(other.pmd_held_),
      af_xdp_(other.af_xdp_),
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
    rx_pool_ = other.rx_pool_;
    pmd_held_ = other.pmd_held_;
    af_xdp_ = other.af_xdp_;
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
      throw PortConfigError("port \"" + dev + "\": no such port id; " + existing_ports());
    }
    id_ = static_cast<uint16_t>(pid);
  } else {
    // A vdev spec names its device before the first comma; without arguments it may also be
    // an ethdev that already exists (--vdev on the EAL command line, or probed by another).
    const std::string name = dev.substr(0, dev.find(','));
    const bool exists = rte_eth_dev_get_port_by_name(name.c_str(), &id_) == 0;
    if (exists && name.size() != dev.size()) {
      // rte_dev_probe would return 0 for it and ignore the arguments.
      throw PortConfigError("port \"" + dev + "\": device \"" + name +
                            "\" already exists; open it by name or id");
    }
    if (!exists) probe(name);
  }
  char name[RTE_ETH_NAME_MAX_LEN];
  if (rte_eth_dev_get_name_by_port(id_, name) == 0) name_ = name;
  open_ = true;
}

void Port::probe(const std::string& name) {
  // net_af_packet and net_af_xdp say only "Failed to init internals" (and the probe -1) for an
  // interface that is not there; this one is named.
  const std::string iface = spec_arg(config_.device, "iface");
  if (!iface.empty() && ::if_nametoindex(iface.c_str()) == 0) {
    throw std::runtime_error("port \"" + config_.device + "\": interface \"" + iface +
                             "\" does not exist in this network namespace");
  }
  const int ret = rte_dev_probe(config_.device.c_str());
  // DPDK 22.11 answers a name no bus or driver knows with -EFAULT, and passes on the -1 that
  // PMDs return when their probe fails: not an errno (rte_strerror would say EPERM), and what
  // rte_errno holds then is stale, so the PMD's own log line is the only reason there is.
  // A name no driver knows is a typo in the spec: a config error, unlike what a driver refuses.
  if (ret == -EFAULT) {
    throw PortConfigError("port \"" + config_.device +
                          "\": rte_dev_probe failed: " + rte_strerror(ENODEV));
  }
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

void Port::check_af_xdp_pool(rte_mempool* rx_pool) const {
  const unsigned page = page_size();
  const unsigned object = rx_pool->header_size + rx_pool->elt_size + rx_pool->trailer_size;
  if (object > page) {
    // Else the PMD's only words are "Failed to create umem", then EINVAL from the queue set-up.
    throw std::runtime_error(
        "port \"" + config_.device + "\": net_af_xdp needs each mbuf to fit one umem chunk, at "
        "most a page (" + std::to_string(page) + " bytes), but the pool's mbufs are " +
        std::to_string(object) + " bytes (data room " +
        std::to_string(rte_pktmbuf_data_room_size(rx_pool)) + "): set mbuf_data_room to at most " +
        std::to_string(af_xdp_max_data_room()));
  }
  if (rx_pool->nb_mem_chunks != 1) {
    // DPDK 22.11 registers the memory from the pool's first chunk on as the umem.
    throw std::runtime_error("port \"" + config_.device + "\": net_af_xdp needs the mempool in "
                             "one piece of memory, but it is in " +
                             std::to_string(rx_pool->nb_mem_chunks) +
                             " chunks: give EAL more (or larger) hugepages, or -m with --no-huge");
  }
}

void Port::fail_af_xdp_rx_setup(uint16_t queue, int errnum) const {
  // The PMD answers EINVAL whatever the kernel said; its log and a socket of our own say why.
  std::string why;
#ifndef AF_XDP
#define AF_XDP 44
#endif
  const int fd = ::socket(AF_XDP, SOCK_RAW, 0);
  if (fd < 0) {
    why = errno == EAFNOSUPPORT
              ? "this kernel has no AF_XDP sockets (CONFIG_XDP_SOCKETS)"
              : std::string("the kernel refuses AF_XDP sockets here (") + std::strerror(errno) +
                    "; they need CAP_NET_RAW, the XDP program CAP_NET_ADMIN and CAP_BPF: root)";
  } else {
    ::close(fd);
  }
  std::string pmd;
  for (const std::string& line : recent_dpdk_errors()) {
    if (line.find("umem") != std::string::npos && why.empty()) {
      why = "the kernel refused the umem (locked memory: ulimit -l; or an mbuf larger than a page)";
    } else if (line.find("xsk socket") != std::string::npos && why.empty()) {
      why = "the kernel refused the AF_XDP socket or its XDP program on interface \"" +
            spec_arg(config_.device, "iface") + "\" queue " +
            std::to_string(std::stoi("0" + spec_arg(config_.device, "start_queue")) + queue) +
            " (no XDP on this interface or kernel, no such queue: ethtool -l, another XDP "
            "program attached, or no CAP_NET_ADMIN/CAP_BPF)";
    } else if (line.find("buffers for fq") != std::string::npos && why.empty()) {
      why = "the mempool has too few free mbufs for the fill ring (2048 per queue)";
    }
    pmd += (pmd.empty() ? "" : "; ") + line;
  }
  if (why.empty()) why = rte_strerror(errnum);
  throw std::runtime_error("port \"" + config_.device + "\": rte_eth_rx_queue_setup(queue " +
                           std::to_string(queue) + ") failed: " + why +
                           (pmd.empty() ? "" : " (net_af_xdp: " + pmd + ")"));
}

void Port::configure(rte_mempool* rx_pool) {
  rx_pool_ = rx_pool;
  af_xdp_ = driver_of(id_) == "net_af_xdp";
  if (af_xdp_) {
    check_af_xdp_pool(rx_pool);
    // libxdp prints only "No bpffs found" and its fallback: what that means for the port.
    struct statfs fs {};
    constexpr long kBpfFsMagic = 0xcafe4a11;  // BPF_FS_MAGIC, <linux/magic.h>
    if (::statfs("/sys/fs/bpf", &fs) != 0 || static_cast<long>(fs.f_type) != kBpfFsMagic) {
      logger("port")->info("port \"{}\": no BPF filesystem at /sys/fs/bpf: libxdp attaches a "
                           "single XDP program (no dispatcher), so no other XDP program may be "
                           "on the interface",
                           config_.device);
    }
  }
  rte_eth_conf conf{};
  rte_eth_dev_info info{};
  if (const int r = rte_eth_dev_info_get(id_, &info); r != 0) fail("rte_eth_dev_info_get", -r);
  // More queues than the device has is the config's mistake: said as such, not as EINVAL from
  // rte_eth_dev_configure.
  if (config_.rx_queues > info.max_rx_queues || config_.tx_queues > info.max_tx_queues) {
    throw PortConfigError(
        "port \"" + config_.device + "\": " + std::to_string(config_.rx_queues) + " rx / " +
        std::to_string(config_.tx_queues) + " tx queues asked, the device has at most " +
        std::to_string(info.max_rx_queues) + " rx / " + std::to_string(info.max_tx_queues) +
        " tx (net_pcap: one rx queue per rx_pcap=, net_af_packet: qpairs=N, "
        "net_af_xdp: queue_count=N)");
  }
  if (config_.rx_queues > 1) {
    // Several rx queues share the traffic by RSS over the 5-tuple (the PMD's own key and RETA),
    // as far as the PMD hashes those fields; without RSS each queue gets what the device puts
    // there (net_ring: its own ring).
    const uint64_t hf =
        (RTE_ETH_RSS_IP | RTE_ETH_RSS_UDP | RTE_ETH_RSS_TCP) & info.flow_type_rss_offloads;
    if (hf != 0) {
      conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
      conf.rx_adv_conf.rss_conf.rss_hf = hf;
    } else {
      logger("port")->info(
          "port \"{}\": its PMD has no RSS over the 5-tuple: each of its {} rx "
          "queues gets what the device puts there",
          config_.device, config_.rx_queues);
    }
  }
  int ret = rte_eth_dev_configure(id_, config_.rx_queues, config_.tx_queues, &conf);
  if (ret < 0) fail("rte_eth_dev_configure", -ret);

  rx_desc_ = config_.rx_descriptors;
  tx_desc_ = config_.tx_descriptors;
  ret = rte_eth_dev_adjust_nb_rx_tx_desc(id_, &rx_desc_, &tx_desc_);
  if (ret < 0) fail("rte_eth_dev_adjust_nb_rx_tx_desc", -ret);

  const int socket = rte_eth_dev_socket_id(id_);
  const unsigned queue_socket = socket < 0 ? SOCKET_ID_ANY : static_cast<unsigned>(socket);
  // net_af_xdp fills its fill ring from the pool here and keeps those mbufs past close.
  const unsigned in_use_before = rte_mempool_in_use_count(rx_pool);
  for (uint16_t q = 0; q < config_.rx_queues; ++q) {
    ret = rte_eth_rx_queue_setup(id_, q, rx_desc_, queue_socket, nullptr, rx_pool);
    if (ret < 0 && af_xdp_) fail_af_xdp_rx_setup(q, -ret);
    if (ret < 0) fail("rte_eth_rx_queue_setup(queue " + std::to_string(q) + ")", -ret);
  }
  if (af_xdp_) {
    const unsigned in_use_after = rte_mempool_in_use_count(rx_pool);
    pmd_held_ = in_use_after > in_use_before ? in_use_after - in_use_before : 0;
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

void Port::drain_tx_completions() noexcept {
  // net_af_xdp frees a sent mbuf only when a later tx call reaps the kernel's completion ring;
  // after the last burst, empty tx calls do it. The kernel completes asynchronously (veth
  // frees the frame on the peer's side), so until the count has held still for a few ms.
  rte_mbuf* none[1];
  unsigned last = rte_mempool_in_use_count(rx_pool_), still = 0;
  for (unsigned round = 0; round < 200 && still < 5; ++round) {
    for (uint16_t q = 0; q < config_.tx_queues; ++q) rte_eth_tx_burst(id_, q, none, 0);
    rte_delay_us_sleep(1000);
    const unsigned now = rte_mempool_in_use_count(rx_pool_);
    still = now == last ? still + 1 : 0;
    last = now;
  }
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
    if (af_xdp_) drain_tx_completions();
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
