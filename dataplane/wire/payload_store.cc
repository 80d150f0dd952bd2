#include "dataplane/wire/payload_store.h"

#include <rte_malloc.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <new>

namespace spraynet {

namespace {
// The store outlives every packet it lends to (unreferenced() is checked by its owners), and
// it frees its own memory: the last mbuf's free has nothing to do.
void no_free(void*, void*) {}
}  // namespace

PayloadStore::~PayloadStore() {
  for (auto& r : regions_) rte_free(r->bytes);
}

std::span<const uint8_t> PayloadStore::add(std::span<const uint8_t> bytes) {
  for (const auto& r : regions_) {
    if (r->len == bytes.size() && std::equal(bytes.begin(), bytes.end(), r->bytes)) {
      return {r->bytes, r->len};
    }
  }
  auto r = std::make_unique<Region>();
  r->len = bytes.size();
  r->bytes = static_cast<uint8_t*>(
      rte_malloc("spraynet_payload", std::max<size_t>(1, r->len), RTE_CACHE_LINE_SIZE));
  if (r->bytes == nullptr) throw std::bad_alloc();
  std::memcpy(r->bytes, bytes.data(), bytes.size());
  r->shinfo.free_cb = no_free;
  r->shinfo.fcb_opaque = nullptr;
  // The store's own reference: attached segments add theirs, so the count never reaches 0.
  rte_mbuf_ext_refcnt_set(&r->shinfo, 1);
  regions_.push_back(std::move(r));
  return {regions_.back()->bytes, regions_.back()->len};
}

const PayloadStore::Region* PayloadStore::region_of(const uint8_t* data, size_t len) const {
  for (const auto& r : regions_) {
    if (data >= r->bytes && data <= r->bytes + r->len &&
        len <= static_cast<size_t>(r->bytes + r->len - data)) {
      return r.get();
    }
  }
  return nullptr;
}

std::optional<PayloadStore::Place> PayloadStore::place_of(const uint8_t* data, size_t len) const {
  const Region* r = region_of(data, len);
  if (r == nullptr) return std::nullopt;
  for (uint32_t i = 0; i < regions_.size(); ++i) {
    if (regions_[i].get() == r) return Place{i, static_cast<uint32_t>(data - r->bytes)};
  }
  return std::nullopt;
}

const uint8_t* PayloadStore::address(Place p) const {
  if (p.region >= regions_.size() || p.offset > regions_[p.region]->len) return nullptr;
  return regions_[p.region]->bytes + p.offset;
}

bool PayloadStore::attach(rte_mbuf* m, const uint8_t* data, uint16_t len) {
  Region* r = const_cast<Region*>(region_of(data, len));
  if (r == nullptr || len == 0) return false;
  rte_mbuf_ext_refcnt_update(&r->shinfo, 1);
  // The whole region is the external buffer; the segment's data is the part asked for. DPDK's
  // extbuf API takes a non-const address: nothing writes through it (see the class comment).
  rte_pktmbuf_attach_extbuf(m, r->bytes, rte_malloc_virt2iova(r->bytes),
                            static_cast<uint16_t>(r->len), &r->shinfo);
  m->data_off = static_cast<uint16_t>(data - r->bytes);
  m->data_len = len;
  m->pkt_len = len;
  return true;
}

namespace {

std::atomic<uint64_t> next_store_id{1};

// The calling thread's last crc() answer, and which store gave it.
struct LastCrc {
  uint64_t store = 0;
  const uint8_t* data = nullptr;
  size_t len = 0;
  PayloadStore::KnownCrc crc{};
};
thread_local LastCrc last_crc;

}  // namespace

PayloadStore::PayloadStore(rte_mempool* segment_pool)
    : segment_pool_(segment_pool), id_(next_store_id.fetch_add(1, std::memory_order_relaxed)) {}

std::optional<PayloadStore::KnownCrc> PayloadStore::crc(const uint8_t* data, size_t len) const {
  LastCrc& last = last_crc;
  if (last.store == id_ && last.data == data && last.len == len) return last.crc;
  const Key key{data, len};
  std::optional<KnownCrc> known;
  {
    const std::shared_lock lock(crcs_mutex_);
    if (auto it = crcs_.find(key); it != crcs_.end()) known = it->second;
  }
  if (!known) {
    if (region_of(data, len) == nullptr) return std::nullopt;
    KnownCrc k;
    k.crc = static_cast<uint32_t>(::crc32(0, data, static_cast<uInt>(len)));
    k.combine_op = static_cast<uint32_t>(crc32_combine_gen(static_cast<z_off_t>(len)));
    const std::unique_lock lock(crcs_mutex_);
    known = crcs_.emplace(key, k).first->second;  // another thread's, if it came first: equal
  }
  last = LastCrc{id_, data, len, *known};
  return known;
}

bool PayloadStore::unreferenced() const {
  for (const auto& r : regions_) {
    if (rte_mbuf_ext_refcnt_read(&r->shinfo) != 1) return false;
  }
  return true;
}

}  // namespace spraynet
