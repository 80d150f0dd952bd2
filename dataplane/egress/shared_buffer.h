// A switch's lossless ingress buffer, as shared-buffer switches keep it (SONiC's
// ingress_lossless_pool with its pg_lossless profiles): one shared pool per switch, accounted per
// (ingress port, priority group), plus a private headroom per priority group.
//
//  - Threshold. A PG may hold up to T bytes of the shared pool. Dynamic (the default): T = alpha
//    x (pool - shared bytes held by all PGs), SONiC's dynamic_th = log2(alpha); n congested PGs
//    settle at alpha x pool / (1 + alpha x n) each, so one PG alone takes a large share and many
//    share fairly without any of them being configured for it. Static: T is a byte count.
//  - XOFF when the PG's shared occupancy reaches T - xoff_offset, or when a packet no longer
//    fits below T or in the pool. From then on its arrivals go to its headroom: the bytes still
//    in flight on the cable and in the upstream MAC when the pause reaches it.
//  - XON when the PG's headroom is empty and its shared occupancy has fallen to T - xon_offset
//    (or to 0). Bytes leave the headroom first: they are the ones above the XOFF point. T moves
//    as other PGs fill and drain, so an asserted PG can become due for XON without releasing a
//    byte itself: release_due_xoffs() finds those (cheaply: it knows the lowest T at which one
//    could be due).
//  - A packet for a PG whose headroom cannot hold it is refused (admit() false) and counted as
//    headroom_overflow. A correct headroom never shows one: the pool never goes over its size,
//    and each PG's peak headroom occupancy stays below its headroom.
//
// Which priorities are lossless is the caller's business (PfcState asks only for those). Nothing
// here depends on time.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace spraynet {

struct SharedBufferConfig {
  // Half of the 64 MB of a 32 x 400G shared-buffer switch (Broadcom Tomahawk 3 class): the rest
  // is left to the headroom, the lossy pool and egress.
  static constexpr uint64_t kDefaultPoolBytes = 32ull << 20;
  static constexpr double kMinAlpha = 1.0 / 128;  // SONiC's dynamic_th -7..7
  static constexpr double kMaxAlpha = 128.0;

  uint64_t pool_bytes = kDefaultPoolBytes;
  // Dynamic threshold: alpha x the free shared pool. 1 is SONiC's default_dynamic_th 0.
  double alpha = 1.0;
  // > 0: a static threshold of this many bytes per PG instead of the dynamic one.
  uint64_t static_threshold_bytes = 0;
  uint64_t xoff_offset_bytes = 0;
  // The hysteresis between XOFF and XON: a PG held at its threshold exchanges an XOFF/XON pair
  // per this many bytes drained, not per packet (a few 4 KiB-MTU frames).
  uint64_t xon_offset_bytes = 16384;
  // One entry per ingress port: the headroom each of its PGs has (see auto_headroom_bytes).
  std::vector<uint64_t> port_headroom_bytes;

  // Empty when valid, else "key: reason".
  std::string check() const;
};

class SharedBuffer {
 public:
  static constexpr int kPriorityGroups = 8;
  // Time a peer's MAC may take to act on a received pause: 802.3 (Annex 31D) allows a 100G MAC
  // 201,728 bit times (2.02 us), a 400G MAC 463,360 (1.16 us).
  static constexpr uint64_t kResponseAllowanceNs = 2100;
  // A PFC frame on the wire: 60 B padded + FCS, preamble, SFD and inter-frame gap.
  static constexpr uint64_t kPfcFrameWireBytes = 84;

  // What can still arrive on one PG after it asserts XOFF, on a link of rate R (bytes/ns) and
  // one-way delay d with frames up to `mtu_bytes`:
  //     MTU        the frame our end has just started on that link: the XOFF waits behind it
  //   + 84         the XOFF itself
  //   + R x d      the XOFF crossing the cable while the peer keeps sending
  //   + R x 2.1 us the peer's MAC acting on it (kResponseAllowanceNs)
  //   + MTU        the frame the peer had started when it acted
  //   + R x d      what was already on the cable
  // = 2 x R x d + 2 x MTU + 84 + R x 2.1 us, rounded up. 100G, 1 us, 4352 B: 60,038 B.
  static uint64_t auto_headroom_bytes(double rate_gbps, uint64_t delay_ns, uint32_t mtu_bytes);

  // Throws std::invalid_argument with config.check()'s reason when the config is invalid.
  explicit SharedBuffer(SharedBufferConfig config);

  size_t ports() const { return pgs_.size(); }
  // Heap bytes: the per-port priority groups.
  uint64_t heap_bytes() const { return pgs_.capacity() * sizeof(pgs_[0]); }
  bool dynamic() const { return config_.static_threshold_bytes == 0; }
  // T as the pool stands now.
  uint64_t threshold_bytes() const;

  // Whether `bytes` arriving for (port, pg) can be held (in the shared pool, or in the headroom
  // once past the threshold). A refusal is counted as a headroom overflow: the packet must be
  // dropped. An unknown (port, pg) is always admitted (and ignored by add/release).
  bool admit(uint16_t port, uint8_t pg, uint32_t bytes);
  // Accounts bytes that entered the buffer (after admit() said yes). True when this asserted
  // XOFF for the PG. Bytes add() takes beyond the headroom (admit skipped) still count in the
  // headroom peak, so that the "never over" checks see them.
  bool add(uint16_t port, uint8_t pg, uint32_t bytes);
  // Frees bytes (headroom first). True when this ended the PG's XOFF (XON due). Releasing more
  // than is held is counted in accounting_underflows() and clamps to 0.
  bool release(uint16_t port, uint8_t pg, uint32_t bytes);
  // Ends XOFF for every asserted PG that the current threshold lets go (a dynamic threshold
  // rises as other PGs drain), calling on_xon(port, pg) for each.
  template <typename OnXon>
  void release_due_xoffs(OnXon&& on_xon);

  bool xoff(uint16_t port, uint8_t pg) const;
  uint32_t xoff_asserted() const { return xoff_asserted_; }
  uint64_t shared_bytes(uint16_t port, uint8_t pg) const;
  uint64_t headroom_used_bytes(uint16_t port, uint8_t pg) const;
  uint64_t occupancy_bytes(uint16_t port, uint8_t pg) const;  // shared + headroom
  uint64_t headroom_bytes(uint16_t port) const;               // each of the port's PGs has this
  uint64_t peak_headroom_used_bytes(uint16_t port, uint8_t pg) const;
  uint64_t headroom_overflows(uint16_t port, uint8_t pg) const;
  uint64_t headroom_overflows() const { return headroom_overflows_; }

  uint64_t pool_bytes() const { return config_.pool_bytes; }
  uint64_t pool_used_bytes() const { return shared_used_; }
  uint64_t pool_peak_bytes() const { return shared_peak_; }
  uint64_t headroom_used_bytes() const { return headroom_used_; }  // all PGs
  uint64_t accounting_underflows() const { return accounting_underflows_; }
  const SharedBufferConfig& config() const { return config_; }

 private:
  struct PriorityGroup {
    uint64_t shared = 0;
    uint64_t headroom = 0;
    uint64_t peak_headroom = 0;
    uint64_t overflows = 0;
    bool xoff = false;
  };

  PriorityGroup* pg_of(uint16_t port, uint8_t pg);
  const PriorityGroup* pg_of(uint16_t port, uint8_t pg) const;
  bool fits_shared(const PriorityGroup& g, uint32_t bytes) const;
  // XON condition for an asserted PG, against threshold t.
  bool xon_due(const PriorityGroup& g, uint64_t t) const;
  // The lowest threshold at which an asserted PG could be due for XON: below it no scan.
  uint64_t xon_trigger(const PriorityGroup& g) const;

  SharedBufferConfig config_;
  std::vector<std::array<PriorityGroup, kPriorityGroups>> pgs_;
  uint64_t shared_used_ = 0;
  uint64_t shared_peak_ = 0;
  uint64_t headroom_used_ = 0;
  uint32_t xoff_asserted_ = 0;
  // A lower bound of xon_trigger() over the asserted PGs (UINT64_MAX: none).
  uint64_t rescan_at_ = UINT64_MAX;
  uint64_t headroom_overflows_ = 0;
  uint64_t accounting_underflows_ = 0;
};

template <typename OnXon>
void SharedBuffer::release_due_xoffs(OnXon&& on_xon) {
  if (xoff_asserted_ == 0) return;
  const uint64_t t = threshold_bytes();
  if (t < rescan_at_) return;
  uint64_t next = UINT64_MAX;
  for (uint16_t port = 0; port < pgs_.size(); ++port) {
    for (uint8_t pg = 0; pg < kPriorityGroups; ++pg) {
      PriorityGroup& g = pgs_[port][pg];
      if (!g.xoff) continue;
      if (xon_due(g, t)) {
        g.xoff = false;
        --xoff_asserted_;
        on_xon(port, pg);
      } else {
        next = std::min(next, xon_trigger(g));
      }
    }
  }
  rescan_at_ = next;
}

}  // namespace spraynet
