#include "dataplane/egress/shared_buffer.h"

#include <cmath>
#include <stdexcept>

namespace spraynet {

std::string SharedBufferConfig::check() const {
  if (pool_bytes < 65536) return "pool_bytes: must be at least 65536";
  if (static_threshold_bytes == 0 && !(alpha >= kMinAlpha && alpha <= kMaxAlpha)) {
    return "alpha: must be in [1/128, 128] (SONiC dynamic_th -7..7)";
  }
  if (static_threshold_bytes > pool_bytes) {
    return "static_threshold_bytes: must not exceed pool_bytes (" + std::to_string(pool_bytes) +
           ")";
  }
  if (xoff_offset_bytes >= pool_bytes) return "xoff_offset_bytes: must be below pool_bytes";
  if (xon_offset_bytes >= pool_bytes) return "xon_offset_bytes: must be below pool_bytes";
  if (port_headroom_bytes.size() >= 0xFFFF) return "port_headroom_bytes: too many ports";
  for (size_t p = 0; p < port_headroom_bytes.size(); ++p) {
    if (port_headroom_bytes[p] == 0) {
      return "port_headroom_bytes[" + std::to_string(p) + "]: must be > 0";
    }
  }
  return {};
}

namespace {

const SharedBufferConfig& checked(const SharedBufferConfig& config) {
  if (auto r = config.check(); !r.empty()) throw std::invalid_argument("shared buffer: " + r);
  return config;
}

}  // namespace

uint64_t SharedBuffer::auto_headroom_bytes(double rate_gbps, uint64_t delay_ns,
                                           uint32_t mtu_bytes) {
  const double bytes_per_ns = rate_gbps / 8.0;
  const double in_flight = bytes_per_ns * (2.0 * static_cast<double>(delay_ns) +
                                           static_cast<double>(kResponseAllowanceNs));
  return static_cast<uint64_t>(std::ceil(in_flight)) + 2ull * mtu_bytes + kPfcFrameWireBytes;
}

SharedBuffer::SharedBuffer(SharedBufferConfig config)
    : config_(checked(config)), pgs_(config_.port_headroom_bytes.size()) {}

uint64_t SharedBuffer::threshold_bytes() const {
  if (!dynamic()) return config_.static_threshold_bytes;
  const double free_bytes = static_cast<double>(config_.pool_bytes - shared_used_);
  return static_cast<uint64_t>(config_.alpha * free_bytes);
}

SharedBuffer::PriorityGroup* SharedBuffer::pg_of(uint16_t port, uint8_t pg) {
  if (port >= pgs_.size() || pg >= kPriorityGroups) return nullptr;
  return &pgs_[port][pg];
}

const SharedBuffer::PriorityGroup* SharedBuffer::pg_of(uint16_t port, uint8_t pg) const {
  if (port >= pgs_.size() || pg >= kPriorityGroups) return nullptr;
  return &pgs_[port][pg];
}

bool SharedBuffer::fits_shared(const PriorityGroup& g, uint32_t bytes) const {
  return !g.xoff && g.shared + bytes <= threshold_bytes() &&
         shared_used_ + bytes <= config_.pool_bytes;
}

bool SharedBuffer::xon_due(const PriorityGroup& g, uint64_t t) const {
  if (g.headroom != 0) return false;
  return g.shared == 0 || g.shared + config_.xon_offset_bytes <= t;
}

uint64_t SharedBuffer::xon_trigger(const PriorityGroup& g) const {
  return g.shared + config_.xon_offset_bytes;
}

bool SharedBuffer::admit(uint16_t port, uint8_t pg, uint32_t bytes) {
  PriorityGroup* g = pg_of(port, pg);
  if (g == nullptr || fits_shared(*g, bytes)) return true;
  if (g->headroom + bytes <= config_.port_headroom_bytes[port]) return true;
  ++g->overflows;
  ++headroom_overflows_;
  return false;
}

bool SharedBuffer::add(uint16_t port, uint8_t pg, uint32_t bytes) {
  PriorityGroup* g = pg_of(port, pg);
  if (g == nullptr) return false;
  bool assert_xoff = false;
  if (fits_shared(*g, bytes)) {
    g->shared += bytes;
    shared_used_ += bytes;
    shared_peak_ = std::max(shared_peak_, shared_used_);
    // Against the threshold as it stands with these bytes in: a dynamic one has just fallen.
    assert_xoff = g->shared + config_.xoff_offset_bytes >= threshold_bytes();
  } else {
    // Past the threshold, or the pool is full: the headroom takes it, and the sender must stop.
    g->headroom += bytes;
    headroom_used_ += bytes;
    g->peak_headroom = std::max(g->peak_headroom, g->headroom);
    assert_xoff = !g->xoff;
  }
  if (!assert_xoff || g->xoff) return false;
  g->xoff = true;
  ++xoff_asserted_;
  rescan_at_ = std::min(rescan_at_, xon_trigger(*g));
  return true;
}

bool SharedBuffer::release(uint16_t port, uint8_t pg, uint32_t bytes) {
  PriorityGroup* g = pg_of(port, pg);
  if (g == nullptr) return false;
  uint64_t rest = bytes;
  const uint64_t from_headroom = std::min<uint64_t>(rest, g->headroom);
  g->headroom -= from_headroom;
  headroom_used_ -= from_headroom;
  rest -= from_headroom;
  if (rest > g->shared) {
    ++accounting_underflows_;
    rest = g->shared;
  }
  g->shared -= rest;
  shared_used_ -= rest;
  if (!g->xoff) return false;
  if (xon_due(*g, threshold_bytes())) {
    g->xoff = false;
    --xoff_asserted_;
    return true;
  }
  // Its own release lowered the threshold it waits for.
  rescan_at_ = std::min(rescan_at_, xon_trigger(*g));
  return false;
}

bool SharedBuffer::xoff(uint16_t port, uint8_t pg) const {
  const PriorityGroup* g = pg_of(port, pg);
  return g != nullptr && g->xoff;
}

uint64_t SharedBuffer::shared_bytes(uint16_t port, uint8_t pg) const {
  const PriorityGroup* g = pg_of(port, pg);
  return g != nullptr ? g->shared : 0;
}

uint64_t SharedBuffer::headroom_used_bytes(uint16_t port, uint8_t pg) const {
  const PriorityGroup* g = pg_of(port, pg);
  return g != nullptr ? g->headroom : 0;
}

uint64_t SharedBuffer::occupancy_bytes(uint16_t port, uint8_t pg) const {
  const PriorityGroup* g = pg_of(port, pg);
  return g != nullptr ? g->shared + g->headroom : 0;
}

uint64_t SharedBuffer::headroom_bytes(uint16_t port) const {
  return port < config_.port_headroom_bytes.size() ? config_.port_headroom_bytes[port] : 0;
}

uint64_t SharedBuffer::peak_headroom_used_bytes(uint16_t port, uint8_t pg) const {
  const PriorityGroup* g = pg_of(port, pg);
  return g != nullptr ? g->peak_headroom : 0;
}

uint64_t SharedBuffer::headroom_overflows(uint16_t port, uint8_t pg) const {
  const PriorityGroup* g = pg_of(port, pg);
  return g != nullptr ? g->overflows : 0;
}

}  // namespace spraynet
