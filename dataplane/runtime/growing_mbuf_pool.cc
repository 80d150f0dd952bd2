#include "dataplane/runtime/growing_mbuf_pool.h"

#include <rte_errno.h>
#include <rte_mbuf.h>
#include <rte_mbuf_pool_ops.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <utility>

namespace spraynet::runtime {

namespace {

// rte_mempool_free calls this for each chunk: the length mapped travels in `opaque`.
void unmap_chunk(rte_mempool_memhdr* memhdr, void* opaque) {
  munmap(memhdr->addr, reinterpret_cast<size_t>(opaque));
}

struct NewObjects {
  const char* begin;
  const char* end;
};

// rte_mempool_obj_iter walks every object of the pool: only those in the new chunk are
// initialised (the others may be in use).
void init_if_new(rte_mempool* mp, void* arg, void* obj, unsigned index) {
  const auto* range = static_cast<const NewObjects*>(arg);
  const char* p = static_cast<const char*>(obj);
  if (p >= range->begin && p < range->end) rte_pktmbuf_init(mp, nullptr, obj, index);
}

// The counting ops: the best mempool ops' functions, with dequeue wrapped. Registered once per
// process (DPDK holds at most RTE_MEMPOOL_MAX_OPS_IDX ops).
const rte_mempool_ops* inner_ops = nullptr;

int counted_dequeue(rte_mempool* mp, void** objs, unsigned n) {
  const int rc = inner_ops->dequeue(mp, objs, n);
  if (rc < 0) {
    auto* c = static_cast<GrowingMbufPool::Counters*>(mp->pool_config);
    c->shortfalls.fetch_add(1, std::memory_order_relaxed);
    if (mp->populated_size < mp->size) c->below_max.fetch_add(1, std::memory_order_relaxed);
  }
  return rc;
}

// The name of the counting ops, registered on first use; throws when DPDK refuses.
const char* counting_ops_name() {
  static std::once_flag once;
  static std::string name;
  static std::string error;
  std::call_once(once, [] {
    const char* best = rte_mbuf_best_mempool_ops();
    for (unsigned i = 0; i < rte_mempool_ops_table.num_ops; ++i) {
      if (std::strcmp(rte_mempool_ops_table.ops[i].name, best) == 0) {
        inner_ops = &rte_mempool_ops_table.ops[i];
      }
    }
    if (inner_ops == nullptr) {
      error = std::string("no mempool ops named ") + best;
      return;
    }
    rte_mempool_ops ops = *inner_ops;
    std::snprintf(ops.name, sizeof ops.name, "counted_%s", best);
    ops.dequeue = counted_dequeue;
    if (const int rc = rte_mempool_register_ops(&ops); rc < 0) {
      error = std::string("rte_mempool_register_ops(") + ops.name + "): " + rte_strerror(-rc);
      return;
    }
    name = ops.name;
  });
  if (!error.empty()) throw std::runtime_error(error);
  return name.c_str();
}

}  // namespace

GrowingMbufPool::GrowingMbufPool(std::string name, uint32_t max_mbufs, uint16_t data_room,
                                 uint32_t chunk_mbufs)
    : name_(std::move(name)), max_(max_mbufs), chunk_(chunk_mbufs) {
  const std::string what = "growing mbuf pool \"" + name_ + "\": ";
  if (name_.empty() || name_.size() >= RTE_MEMPOOL_NAMESIZE) {
    throw std::invalid_argument(what + "the name must have 1 to " +
                                std::to_string(RTE_MEMPOOL_NAMESIZE - 1) + " characters");
  }
  if (max_mbufs == 0) throw std::invalid_argument(what + "max_mbufs is 0");
  if (chunk_mbufs == 0) throw std::invalid_argument(what + "chunk_mbufs is 0");
  if (chunk_mbufs > max_mbufs) {
    throw std::invalid_argument(what + "chunk_mbufs " + std::to_string(chunk_mbufs) +
                                " is above max_mbufs " + std::to_string(max_mbufs));
  }
  if (data_room < RTE_PKTMBUF_HEADROOM) {
    throw std::invalid_argument(what + "data_room " + std::to_string(data_room) +
                                " is below the headroom " + std::to_string(RTE_PKTMBUF_HEADROOM));
  }
  // DPDK wants the cache's flush threshold (1.5 x its size) within the pool.
  const unsigned cache = std::min<unsigned>(256, max_mbufs * 2 / 3);
  // No IOVA contiguity (objects packed across page boundaries, no padding to a page) and no
  // spreading over DRAM channels (no padding between objects): nothing here does DMA, and the
  // segments' pool is 14% smaller for it.
  pool_ = rte_mempool_create_empty(name_.c_str(), max_mbufs,
                                   sizeof(rte_mbuf) + static_cast<unsigned>(data_room), cache,
                                   sizeof(rte_pktmbuf_pool_private), SOCKET_ID_ANY,
                                   RTE_MEMPOOL_F_NO_IOVA_CONTIG | RTE_MEMPOOL_F_NO_SPREAD);
  if (pool_ == nullptr) {
    throw std::runtime_error(what + "rte_mempool_create_empty failed: " + rte_strerror(rte_errno));
  }
  try {
    const char* ops = counting_ops_name();
    if (const int rc = rte_mempool_set_ops_byname(pool_, ops, &counters_); rc != 0) {
      throw std::runtime_error(what + "rte_mempool_set_ops_byname(" + ops + ") failed: " +
                               rte_strerror(-rc));
    }
    rte_pktmbuf_pool_private priv{};
    priv.mbuf_data_room_size = data_room;
    priv.mbuf_priv_size = 0;
    rte_pktmbuf_pool_init(pool_, &priv);
    add_chunk(chunk_);
  } catch (...) {
    rte_mempool_free(pool_);
    throw;
  }
}

GrowingMbufPool::~GrowingMbufPool() {
  rte_mempool_free(pool_);
}

void GrowingMbufPool::reserve_free(uint32_t free_mbufs) {
  peak_in_use_ = std::max(peak_in_use_, in_use());
  while (rte_mempool_avail_count(pool_) < free_mbufs && populated() < max_) {
    add_chunk(std::min(chunk_, max_ - populated()));
  }
}

void GrowingMbufPool::add_chunk(uint32_t mbufs) {
  const std::string what = "growing mbuf pool \"" + name_ + "\": ";
  const size_t elt = size_t{pool_->header_size} + pool_->elt_size + pool_->trailer_size;
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t len = (size_t{mbufs} * elt + page - 1) / page * page;
  void* addr = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (addr == MAP_FAILED) {
    throw std::runtime_error(what + "mmap of " + std::to_string(len) + " bytes failed: " +
                             std::strerror(errno));
  }
  // The heap is on transparent huge pages for the same reason (fewer TLB misses per hop);
  // where the kernel offers none this fails and changes nothing.
  madvise(addr, len, MADV_HUGEPAGE);
  const int added = rte_mempool_populate_iova(pool_, static_cast<char*>(addr), RTE_BAD_IOVA, len,
                                              unmap_chunk, reinterpret_cast<void*>(len));
  if (added <= 0) {
    // Not in the pool's memory list: rte_mempool_free would not unmap it.
    munmap(addr, len);
    throw std::runtime_error(what + "rte_mempool_populate_iova of " + std::to_string(mbufs) +
                             " mbufs failed: " +
                             (added == 0 ? std::string("no room for one object")
                                         : std::string(rte_strerror(-added))));
  }
  bytes_ += len;
  NewObjects range{static_cast<const char*>(addr), static_cast<const char*>(addr) + len};
  rte_mempool_obj_iter(pool_, init_if_new, &range);
}

}  // namespace spraynet::runtime
