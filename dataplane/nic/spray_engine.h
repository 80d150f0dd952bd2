// The NIC's spray engine: which uplink each packet from the host leaves by, and the PPCID that
// tells the fabric which path it took (DESIGN.md "How a packet flows", NIC part). RoCEv2 packets
// go through pick() and the mode of the engine:
//   flow       the flow hash over the eligible uplinks (multiply-shift, no division): a flow
//              stays on its uplink while the eligible set is unchanged — the per-flow ECMP
//              baseline;
//   rr         per packet, the flow's next eligible uplink in turn: exactly even per flow;
//   weighted   per packet, smooth weighted round robin (nginx's algorithm) over the eligible
//              uplinks with weight > 0, weights published by the control thread from the link
//              state; if every eligible weight is 0, round robin over the eligible uplinks;
// rr and weighted keep their turn per flow (flows share one of kRrSlots / kWrrSlots states by
// hash): with one turn for the whole NIC, N QPs whose packets interleave one by one over N
// uplinks would each land on a single uplink — every uplink busy, no QP sprayed at all. Two
// flows that share a slot share a turn (and may fall back into that pattern between them):
// rare with 4096 rr slots.
//   adaptive   per packet, the eligible uplink with the fewest queued bytes, ties broken in
//              round-robin order so that equal loads still spread evenly.
// Everything else (ARP, TCP, non-RoCE UDP) goes through pick_flow(): always by flow hash, since
// only RoCE has a receiver that puts sprayed packets back in order.
//
// An ineligible uplink (down, or paused under PFC fast feedback) is excluded from the very next
// pick and rejoins as soon as it is eligible again. One lcore calls pick/pick_flow/write_ppcid;
// the control thread may call publish_weights and set_mode at any time.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "dataplane/forwarding/path_load.h"
#include "dataplane/nic/lazy_slots.h"
#include "dataplane/wire/ppcid.h"

struct rte_mbuf;

namespace spraynet {

struct ParsedPacket;

enum class SprayMode : uint8_t { kFlow, kRoundRobin, kWeighted, kAdaptive };

std::string_view to_string(SprayMode mode);
std::optional<SprayMode> parse_spray_mode(
    std::string_view name);  // flow | rr | weighted | adaptive

struct SprayEngineConfig {
  SprayMode mode = SprayMode::kRoundRobin;
  // The PPCID path id of each uplink (uplink i is loads[i] in pick()): 1..16 uplinks, distinct,
  // each <= max_path_id(layout). 0 is a valid path id (the PPCID value is never 0x0000 anyway).
  std::vector<uint8_t> path_ids;
  PpcidLayout layout = PpcidLayout::kTsHigh;
  // Salts the flow hash, so that two NICs given the same hashes need not pick alike (set equal
  // seeds to reproduce polarization on purpose).
  uint64_t seed = 1;
  // 0: the PPCID names the uplink the packet leaves by (path_ids[uplink]). N > 0: the PPCID
  // names one of N fabric paths 0..N-1, taken per packet in turn by each flow, whatever the
  // uplink: the way a NIC with one link to its leaf sprays (DESIGN.md "Where spraying happens";
  // the leaf's TCAM spray rule maps the path id to an uplink through its bucket table).
  // At most max_path_id(layout) + 1.
  uint16_t fabric_paths = 0;

  // Empty when valid, else the reason ("path_ids: ...").
  std::string check() const;
};

// One weight per uplink for `weighted` mode (0: none of the traffic), and when the link state
// they come from was taken: the PPCID timestamp counts from it. Immutable once published.
struct SprayWeights {
  std::vector<uint32_t> weights;
  uint64_t updated_ns = 0;
};

struct SprayEngineCounters {
  uint64_t picked = 0;        // pick() gave an uplink (RoCE, any mode)
  uint64_t flow_picks = 0;    // pick_flow() gave an uplink (non-RoCE)
  uint64_t no_eligible = 0;   // kNoUplink returned by pick or pick_flow: the caller drops
  uint64_t missing_load = 0;  // an uplink beyond `loads` (too short a span): taken as ineligible
  uint64_t weighted_rr_fallback = 0;  // weighted mode, every eligible weight 0: round robin
  uint64_t weighted_restarts = 0;     // smooth-WRR state restarted: new table or eligible set
  uint64_t ppcid_written = 0;
  uint64_t ppcid_refused = 0;  // write_ppcid on a non-RoCE packet, bad uplink or short mbuf
};

class SprayEngine {
 public:
  static constexpr uint16_t kNoUplink = 0xFFFF;
  static constexpr size_t kMaxUplinks = 16;

  // Throws std::invalid_argument with config.check()'s reason. Starts with equal weights (1 per
  // uplink, updated_ns 0) until the first publish_weights().
  explicit SprayEngine(const SprayEngineConfig& config);
  ~SprayEngine();
  SprayEngine(const SprayEngine&) = delete;
  SprayEngine& operator=(const SprayEngine&) = delete;

  // The uplink for one RoCEv2 packet of the flow with this hash, by the current mode. `loads`
  // has one entry per uplink (index = uplink); an uplink beyond its end counts as ineligible.
  // kNoUplink when no uplink is eligible.
  uint16_t pick(uint32_t flow_hash, uint64_t now_ns, std::span<const PathLoad> loads);

  // The uplink for non-RoCE traffic: by flow hash over the eligible uplinks, whatever the mode.
  uint16_t pick_flow(uint32_t flow_hash, std::span<const PathLoad> loads);
  // The uplink pick_flow() (and pick() in flow mode) would give flow_hash over the uplinks
  // marked eligible in `eligible` (bit u: uplink u), counting nothing: how a driver knows
  // where a per-flow QP's next packet goes before it builds it. kNoUplink when none is.
  uint16_t flow_uplink(uint32_t flow_hash, uint32_t eligible) const {
    eligible &= all_mask_;
    return eligible == 0 ? kNoUplink : by_hash(flow_hash, eligible);
  }

  // Writes the PPCID of a packet leaving by `uplink` into the UDP checksum field of the RoCEv2
  // packet `p` describes (p is m's parse): path id of the uplink; timestamp hash of the time
  // since the current weights' updated_ns (10 ns units, folded to the layout's width); check
  // nibble from DestQP ^ PSN. The ICRC masks the UDP checksum, so it stays valid. Returns the
  // value written (never 0), or 0 with nothing written when p is not RoCE, the uplink is not one
  // of ours, or m is too short / chained where the field would be.
  uint16_t write_ppcid(rte_mbuf* m, const ParsedPacket& p, uint16_t uplink, uint64_t now_ns);
  // The same with the flow hash, which fabric_paths needs to take the flow's next path id; with
  // fabric_paths 0 it is write_ppcid above.
  uint16_t write_ppcid(rte_mbuf* m, const ParsedPacket& p, uint16_t uplink, uint32_t flow_hash,
                       uint64_t now_ns);
  uint16_t fabric_paths() const { return fabric_paths_; }

  // Control thread: swaps in a new weight table (one weight per uplink, else
  // std::invalid_argument; so is nullptr) and returns the previous one. The lcore may still be
  // reading it: free it only after the lcore has quiesced (rte_rcu_qsbr), never at once.
  std::unique_ptr<const SprayWeights> publish_weights(std::unique_ptr<const SprayWeights> next);
  // The table in force. Valid until the caller's next publish_weights() and grace period.
  const SprayWeights& weights() const { return *weights_.load(std::memory_order_acquire); }

  // The mode may be changed by the control thread while the lcore picks.
  void set_mode(SprayMode mode) { mode_.store(mode, std::memory_order_relaxed); }
  SprayMode mode() const { return mode_.load(std::memory_order_relaxed); }

  size_t uplinks() const { return path_ids_.size(); }
  std::span<const uint8_t> path_ids() const { return path_ids_; }
  PpcidLayout layout() const { return layout_; }
  const SprayEngineCounters& counters() const { return counters_; }
  // Packets given each uplink, by pick() and pick_flow() together.
  std::span<const uint64_t> uplink_packets() const { return uplink_packets_; }
  // Heap bytes besides the object: the per-flow-slot pages made so far, the per-uplink vectors
  // and the weight table in force (lcore, or with the lcore stopped).
  uint64_t heap_bytes() const;

 private:
  // Bit i set when uplink i is eligible; counts missing loads.
  uint32_t eligible_mask(std::span<const PathLoad> loads);
  uint16_t by_hash(uint32_t flow_hash, uint32_t mask) const;
  static constexpr unsigned kRrBits = 12;
  static constexpr unsigned kWrrBits = 8;  // each WRR slot holds 16 current weights
  static constexpr size_t kRrSlots = size_t{1} << kRrBits;
  static constexpr size_t kWrrSlots = size_t{1} << kWrrBits;
  // The top bits of a Fibonacci product: they depend on every bit of the hash.
  static size_t slot_of(uint32_t flow_hash, unsigned bits) {
    return static_cast<uint32_t>((flow_hash ^ (flow_hash >> 16)) * 0x9E3779B1u) >> (32 - bits);
  }
  uint16_t round_robin(uint32_t mask, uint32_t& cursor);
  uint16_t weighted(uint32_t mask, size_t slot);
  uint16_t least_queued(uint32_t mask, std::span<const PathLoad> loads);
  uint16_t account(uint16_t uplink);

  uint16_t encode(rte_mbuf* m, const ParsedPacket& p, uint16_t uplink, uint8_t path_id,
                  uint64_t now_ns);

  std::vector<uint8_t> path_ids_;
  uint16_t fabric_paths_;
  PpcidLayout layout_;
  uint32_t salt_;
  std::atomic<SprayMode> mode_;
  std::atomic<const SprayWeights*> weights_;  // owned: deleted by the destructor
  // Counts publications: a new table is told from the old by this, not by its address, which
  // the allocator may well reuse (results would then depend on the heap's history).
  std::atomic<uint64_t> generation_{1};

  // Lcore state.
  uint32_t all_mask_;     // every uplink
  uint16_t next_rr_ = 0;  // the uplink round robin (and adaptive ties) consider first
  // Per flow slot, made for the slots in use only (lazy_slots.h): a NIC sprays a few QPs, and
  // 4096 slots of each kind up front were 70 KB a NIC, 70 MB for a 1024-host fabric.
  // Flow slots start on different uplinks (and paths), so that flows starting together do not
  // move in step.
  struct RrStart {
    uint32_t operator()(size_t slot) const { return static_cast<uint32_t>(slot); }
  };
  struct PathStart {
    uint32_t operator()(size_t slot) const { return static_cast<uint32_t>(slot * 7); }
  };
  // Smooth WRR per flow slot: each candidate's current weight, and what it was computed for.
  struct WrrState {
    std::array<int64_t, kMaxUplinks> current{};
    uint64_t generation = 0;  // of the table the state was built for
    uint32_t mask = 0;
  };
  struct WrrStart {
    WrrState operator()(size_t) const { return WrrState{}; }
  };
  LazySlots<uint32_t, kRrSlots, 64, RrStart> flow_rr_;      // rr: packets each flow slot has sent
  LazySlots<uint32_t, kRrSlots, 64, PathStart> flow_path_;  // fabric_paths: path ids each took
  LazySlots<WrrState, kWrrSlots, 4, WrrStart> wrr_;

  std::vector<uint64_t> uplink_packets_;
  SprayEngineCounters counters_;
};

}  // namespace spraynet
