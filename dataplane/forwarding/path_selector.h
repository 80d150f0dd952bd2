// Path selection for one ECMP group: which member port a packet leaves by. The group's mode
// decides per packet:
//   ecmp      hash % N over the eligible members in member order, the classic formula: with
//             all 8 members up it is hash % 8; with one down, hash % 7 over the other seven.
//             With ecmp_multiply_shift, (hash * N) >> 32 instead (Lemire's multiply-shift, as
//             BESS's hash_lb does): no division, the same spread, other members per flow.
//   weighted  the group's power-of-two bucket table (equal weights until set_weights); when
//             the bucket's member is ineligible (or every weight is 0), the hash spread over
//             the eligible members by a Fibonacci multiply.
//   dlb       the flowlet table: a flowlet stays on its member within the gap, a new one goes
//             to the eligible member with the fewest queued bytes.
//   letflow   the flowlet table, a new flowlet on an eligible member drawn at random (seeded).
//   conga     a leaf's uplinks under CONGA: the flowlet table, a new flowlet on the eligible
//             member with the smallest congestion metric the switch gives (select_conga: the
//             max of the uplink's DRE and the destination leaf's feedback), ties at random.
//             select() in this mode (a packet the switch does not tunnel) is letflow's.
//   conweave  a ConWeave leaf's uplinks: the switch's ConweaveTx chooses for the RoCE data it
//             tunnels; select() (acknowledgements, CNPs: untunnelled) is ecmp's.
//   drill     per packet, the least loaded of two random members and the last winner.
// Packets hit by a TCAM `spray` rule go through select_sprayed() whatever the mode: the member
// comes from the packet's PPCID path id through the bucket table, so one QP's path ids spread
// over the uplinks in proportion to the weights.
//
// Threads. select() and select_sprayed() run on the node's lcore(s); the bucket table they read
// is published by the control thread (make_table + publish_table) through an atomic pointer, so
// readers never lock for it. publish_table hands back the previous table: the control side frees
// it only after every reader has quiesced (RCU, control/table_publisher.h). The mode is an atomic
// too. Everything else (counters, flowlets, DRILL's state) belongs to the reading side.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "dataplane/forwarding/bucket_table.h"
#include "dataplane/forwarding/drill_selector.h"
#include "dataplane/forwarding/flowlet_table.h"
#include "dataplane/forwarding/path_load.h"

namespace spraynet {

enum class LbMode : uint8_t { kEcmp, kWeighted, kDlb, kDrill, kLetflow, kConga, kConweave };

std::string_view to_string(LbMode mode);
// ecmp | weighted | dlb | drill | letflow | conga | conweave
std::optional<LbMode> parse_lb_mode(std::string_view name);

struct PathGroupConfig {
  LbMode mode = LbMode::kEcmp;
  // The node's port ids (the index into select()'s port_loads), in member order; distinct.
  std::vector<uint16_t> member_ports;
  uint64_t dlb_gap_ns = FlowletTable::kDefaultGapNs;
  uint32_t dlb_table_entries = 4096;  // power of two
  uint64_t seed = 0;                  // DRILL's random samples and LetFlow's draws
  // ecmp reduces the hash onto the members by multiply-shift instead of hash % N (the
  // articles' formula, the default).
  bool ecmp_multiply_shift = false;
  // Sprayed packets: the group reads path id / spray_path_divisor (1..256), not the path id.
  // A switch one tier above the sprayer's first choice sets it to the number of choices made
  // below it (a three-tier spine's up groups: the leaf's uplink count), so that the two tiers
  // read different digits of the path id instead of the same bits relabelled.
  uint16_t spray_path_divisor = 1;
};

struct PathSelectorCounters {
  uint64_t selected = 0;             // packets given a port by select()
  uint64_t sprayed = 0;              // packets given a port by select_sprayed()
  uint64_t no_eligible_port = 0;     // kNoPort returned: no member eligible (the caller drops)
  uint64_t rehashed_ineligible = 0;  // weighted/sprayed: the bucket's member was ineligible
  uint64_t empty_table = 0;          // weighted/sprayed with every weight 0: hashed instead
  uint64_t missing_load = 0;         // a member's port id was beyond port_loads: ineligible

  // Field by field (a switch sums its lanes' copies).
  PathSelectorCounters& operator+=(const PathSelectorCounters& o) {
    selected += o.selected;
    sprayed += o.sprayed;
    no_eligible_port += o.no_eligible_port;
    rehashed_ineligible += o.rehashed_ineligible;
    empty_table += o.empty_table;
    missing_load += o.missing_load;
    static_assert(sizeof(PathSelectorCounters) == 6 * sizeof(uint64_t),
                  "every PathSelectorCounters field is summed here");
    return *this;
  }
};

class PathSelector {
 public:
  static constexpr uint16_t kNoPort = 0xFFFF;
  static constexpr size_t kMaxMembers = 4096;

  // Throws std::invalid_argument for an empty or oversized member list, a duplicate member, a
  // port id of kNoPort, or a DLB table size that is not a power of two.
  explicit PathSelector(const PathGroupConfig& config);

  // The port for a packet of the flow with this hash. `port_loads` is indexed by port id (one
  // entry per port of the node, shared by every group); a member whose port id is beyond it
  // counts as ineligible. kNoPort when no member is eligible.
  //
  // `all_eligible`: the caller knows every entry of port_loads is eligible (a switch whose links
  // are all up and unpaused, most of the time). Modes that read no queue depth (ecmp, weighted,
  // sprayed packets) then skip copying the members' loads: the same answer, without touching
  // every member's entry per packet.
  uint16_t select(uint32_t flow_hash, uint64_t now_ns, std::span<const PathLoad> port_loads,
                  bool all_eligible = false);

  // The port for a sprayed packet: the bucket table at flow_hash + p * stride, with
  // p = path_id / spray_path_divisor (the path id itself by default), and
  // stride the odd number nearest table size / golden ratio, so that one QP's path ids land on
  // well-spread buckets and take members in proportion to their weights (8 equal members and
  // path ids 0..15: exactly two path ids each). When the bucket's member is ineligible,
  // flow_hash + p spread over the eligible members by a Fibonacci multiply, so the path
  // ids still spread. The same in every mode.
  uint16_t select_sprayed(uint32_t flow_hash, uint8_t path_id, uint64_t now_ns,
                          std::span<const PathLoad> port_loads, bool all_eligible = false);

  // CONGA: the port for a packet of this flow given each member's congestion metric
  // (metrics[i] for member i: max of its local DRE metric and the remote feedback). kNoPort
  // when no member is eligible. The flowlet table keeps a flowlet on its member within the gap.
  uint16_t select_conga(uint32_t flow_hash, uint64_t now_ns, std::span<const PathLoad> port_loads,
                        std::span<const uint8_t> metrics);

  // What select() will read for this hash, started loading now (dlb: its flowlet entry; the
  // other modes read nothing keyed by flow that is not already in cache). See
  // FlowletTable::prefetch.
  void prefetch(uint32_t flow_hash) const {
    const LbMode m = mode();
    if (m == LbMode::kDlb || m == LbMode::kLetflow || m == LbMode::kConga) {
      flowlets_.prefetch(flow_hash);
    }
  }

  // Changes the mode at run time (any thread). Entering dlb, letflow or conga starts from the flowlets
  // the table last knew (the two share it); those older than the gap are new flowlets anyway.
  void set_mode(LbMode mode) { mode_.store(mode, std::memory_order_relaxed); }

  // Makes this selector a replica of `primary` for another lcore (a lane of the same switch):
  // it reads the primary's bucket table and mode from then on, so that the control side
  // publishes to the primary alone, while its counters, flowlets and DRILL state stay its own
  // (each lane writes only its own). `primary` must have the same members and outlive this one.
  // Throws std::invalid_argument for another member list.
  void follow(const PathSelector& primary);

  // Control side (one thread). A table for these weights, one per member (0 = no buckets),
  // laid out from the current one so that as few buckets as possible move. Throws
  // std::invalid_argument when the size differs from the member count.
  std::unique_ptr<const BucketTable> make_table(std::span<const uint32_t> weights) const;
  // Makes `table` current with one atomic store and returns the previous one, which a reader
  // may still be using: free it only after a grace period. Throws std::invalid_argument for a
  // null table or one built for another member count.
  std::unique_ptr<const BucketTable> publish_table(std::unique_ptr<const BucketTable> table);
  // make_table + publish_table + free at once: for a single thread (tests, virtual time,
  // construction), where no reader can be inside select().
  void set_weights(std::span<const uint32_t> weights);

  // Takes a member out of the group (or back) whatever its link says: what a routing protocol
  // does when the path behind the member can no longer reach the group's destinations (a spine
  // that lost its link to the destination leaf). The selecting thread only.
  void set_member_excluded(uint16_t member, bool excluded);
  bool member_excluded(uint16_t member) const { return excluded_.at(member); }

  LbMode mode() const { return mode_src_->load(std::memory_order_relaxed); }
  std::span<const uint16_t> member_ports() const { return members_; }
  // The current table. On a thread other than the publisher's, only while that thread cannot
  // publish (it holds the control lock) or inside a read-side critical section.
  const BucketTable& bucket_table() const { return *table_src_->load(std::memory_order_acquire); }
  const FlowletTable& flowlet_table() const { return flowlets_; }
  const DrillSelector& drill() const { return drill_; }
  const PathSelectorCounters& counters() const { return counters_; }
  // Packets sent to each member (by member index), all modes and sprayed together.
  std::span<const uint64_t> member_packets() const { return member_packets_; }
  // Bytes of this selector: the object (its DRILL state inside), its member vectors, the
  // flowlet pages made, and the bucket table it owns (a replica that follows a primary owns
  // one too, unused: it reads the primary's).
  uint64_t memory_bytes() const;

 private:
  // Copies the members' loads into member order; returns how many are eligible.
  uint32_t gather_loads(std::span<const PathLoad> port_loads);
  // True when every member is eligible without looking at member_loads_: the caller says every
  // port is, no member is excluded and every member has an entry.
  bool all_members_eligible(std::span<const PathLoad> port_loads, bool all_eligible) const {
    return all_eligible && excluded_count_ == 0 && max_member_ < port_loads.size();
  }
  // Member index of the k-th eligible member (k < eligible count) in member order.
  uint16_t nth_eligible(uint32_t k) const;
  uint16_t hash_over_eligible(uint32_t hash, uint32_t eligible) const;
  // `all`: every member eligible (member_loads_ may not have been gathered).
  uint16_t from_bucket(const BucketTable& table, uint32_t index, uint32_t fallback_key,
                       uint32_t eligible, bool all = false);
  uint16_t to_port(uint16_t member);

  std::atomic<LbMode> mode_;
  std::vector<uint16_t> members_;
  std::unique_ptr<const BucketTable> owned_;  // the current table, owned by the control side
  std::atomic<const BucketTable*> table_;     // what readers load: owned_.get()
  // Where mode() and bucket_table() read: this selector's own, or its primary's (follow()).
  const std::atomic<LbMode>* mode_src_ = &mode_;
  const std::atomic<const BucketTable*>* table_src_ = &table_;
  FlowletTable flowlets_;
  DrillSelector drill_;
  std::vector<PathLoad> member_loads_;  // scratch, sized once: no allocation per packet
  std::vector<uint64_t> member_packets_;
  std::vector<bool> excluded_;  // by member index
  size_t excluded_count_ = 0;
  uint16_t max_member_ = 0;  // the largest member port id
  bool multiply_shift_ = false;  // PathGroupConfig::ecmp_multiply_shift
  uint16_t path_divisor_ = 1;    // PathGroupConfig::spray_path_divisor
  PathSelectorCounters counters_;
};

}  // namespace spraynet
