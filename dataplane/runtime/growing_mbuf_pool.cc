#include "dataplane/runtime/growing_mbuf_pool.h"

#include <rte_errno.h>
#include <rte_mbuf.h>
#include <rte_mbuf_pool_ops.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
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


// The counting ops: the best mempool ops' functions, with dequeue wrapped. Registered once per
// process (DPDK holds at most RTE_MEMPOOL_MAX_OPS_IDX ops).
const rte_mempool_ops* inner_ops = nullptr;

int counted_dequeue(rte_mempool* mp, void** objs, unsigned n) {
  auto* c = static_cast<GrowingMbufPool::Counters*>(mp->pool_config);
  const unsigned run_populated = c->run_populated.load(std::memory_order_relaxed);
  // The mbufs the pool holds beyond what the run's own pool would: all of them free (the run's
  // in use and cached are the same in both), so its ring would hold that many fewer.
  const unsigned extra = mp->populated_size > run_populated ? mp->populated_size - run_populated : 0;
  const unsigned ring_before = extra > 0 ? inner_ops->get_count(mp) : 0;
  const int rc = inner_ops->dequeue(mp, objs, n);
  if (rc < 0) {
    c->shortfalls.fetch_add(1, std::memory_order_relaxed);
    if (mp->populated_size < mp->size) c->below_max.fetch_add(1, std::memory_order_relaxed);
  } else if (extra > 0 && ring_before < n + extra && run_populated < mp->size) {
    c->below_max.fetch_add(1, std::memory_order_relaxed);  // the run's own pool came short
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
    first_populated_ = populated();
    begin_run();
  } catch (...) {
    rte_mempool_free(pool_);
    throw;
  }
}

GrowingMbufPool::~GrowingMbufPool() {
  rte_mempool_free(pool_);
}

void GrowingMbufPool::begin_run() {
  peak_in_use_ = in_use();
  // The constructor's first chunk, as it populated it.
  counters_.run_populated.store(first_populated_, std::memory_order_relaxed);
  run_bytes_ = chunk_bytes(std::min(chunk_, max_));
}

void GrowingMbufPool::reserve_free(uint32_t free_mbufs) {
  const uint32_t used = in_use();
  peak_in_use_ = std::max(peak_in_use_, used);
  // The run's pool grows chunk by chunk as a new one would; the real one follows it.
  uint32_t run = counters_.run_populated.load(std::memory_order_relaxed);
  while ((run < used || run - used < free_mbufs) && run < max_) {
    // What add_chunk() maps for it, and how many objects DPDK packs into that (the page
    // rounding leaves room for a few more than asked).
    const uint64_t len = chunk_bytes(std::min(chunk_, max_ - run));
    run += static_cast<uint32_t>(std::min<uint64_t>(len / object_bytes(), max_ - run));
    run_bytes_ += len;
  }
  while (populated() < run) add_chunk(std::min(chunk_, max_ - populated()));
  counters_.run_populated.store(run, std::memory_order_relaxed);
}

uint64_t GrowingMbufPool::chunk_bytes(uint32_t mbufs) const {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return (size_t{mbufs} * object_bytes() + page - 1) / page * page;
}

void GrowingMbufPool::add_chunk(uint32_t mbufs) {
  const std::string what = "growing mbuf pool \"" + name_ + "\": ";
  const size_t len = chunk_bytes(mbufs);
  // The pool lists its objects in the order they were added: the new chunk's follow what is
  // last now. (rte_mempool_obj_iter would walk every object of the pool, in use ones too, to
  // find them: a cache miss per mbuf, for every chunk added.)
  // (glibc's sys/queue.h has no STAILQ_LAST: stqh_last points into the last one's link.)
  rte_mempool_objhdr* const last_before =
      STAILQ_EMPTY(&pool_->elt_list)
          ? nullptr
          : reinterpret_cast<rte_mempool_objhdr*>(reinterpret_cast<char*>(pool_->elt_list.stqh_last) -
                                                  offsetof(rte_mempool_objhdr, next));
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
  unsigned index = pool_->populated_size - static_cast<unsigned>(added);
  for (rte_mempool_objhdr* h = last_before != nullptr ? STAILQ_NEXT(last_before, next)
                                                      : STAILQ_FIRST(&pool_->elt_list);
       h != nullptr; h = STAILQ_NEXT(h, next)) {
    rte_pktmbuf_init(pool_, nullptr, reinterpret_cast<char*>(h) + sizeof(*h), index++);
  }
}

}  // namespace spraynet::runtime
