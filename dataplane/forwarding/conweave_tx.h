// ConWeave's source leaf (Song et al., "Network Load Balancing with In-network Reordering
// Support for RDMA", SIGCOMM 2023), as conweave-ns3's ConWeaveRouting::RouteInput does it
// (src/point-to-point/model/conweave-routing.cc, the TxToR branch). Per flow:
//  - an epoch: the first packet of an epoch carries an RTT request (INIT) and arms a deadline,
//    now + the base RTT to the destination leaf + reply_extra; a timely RTT reply (or a CLEAR)
//    makes the flow stable, and its next packet starts the next epoch on the same path;
//  - a packet that finds the deadline passed (no reply in time: the path is slow) is the TAIL:
//    it goes on the old path, and every later packet of the epoch on a new one (phase 1),
//    carrying the TAIL's send time. At most one reroute per epoch: the deadline is disarmed
//    until a CLEAR (the destination saw the TAIL) or an idle gap starts the next epoch;
//  - a flow idle longer than tx_expiry starts a new epoch on a new path at once (no TAIL);
//  - the new path: two members drawn at random (with replacement, the current one included),
//    the first not notified busy (a NOTIFY marks a member busy for path_pause); neither: the
//    first, and the flow may stay where it is.
// Timeouts are found by packets, not timers, as in conweave-ns3: a flow that sends nothing
// changes nothing. Flows idle for `aging` are forgotten (age()).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "dataplane/forwarding/path_load.h"
#include "dataplane/wire/conweave_overlay.h"

namespace spraynet {

// conweave-ns3's run.py values for its leaf-spine experiments (CONWEAVE_* keys), which override
// network-load-balance.cc's globals and the class's own defaults.
struct ConweaveSettings {
  uint64_t reply_extra_ns = 4'000;         // CONWEAVE_REPLY_TIMEOUT_EXTRA 4 us
  uint64_t path_pause_ns = 16'000;         // CONWEAVE_PATH_PAUSE_TIME 16 us
  uint64_t tx_expiry_ns = 300'000;         // CONWEAVE_TX_EXPIRY_TIME 300 us
  uint64_t voq_flush_extra_ns = 16'000;    // CONWEAVE_EXTRA_VOQ_FLUSH_TIME 16 us
  uint64_t voq_default_wait_ns = 200'000;  // CONWEAVE_DEFAULT_VOQ_WAITING_TIME 200 us
  uint64_t aging_ns = 2'000'000;           // ConWeaveRouting's agingTime, 2 ms
  uint32_t voq_limit_packets = 4096;       // per flow: conweave-ns3's queue is unbounded
};

// Empty when usable, else the key and its range.
std::string check_conweave_settings(const ConweaveSettings& s);

struct ConweaveTxCounters {
  uint64_t packets = 0;
  uint64_t epochs = 0;          // INIT packets: RTT requests
  uint64_t timeouts = 0;        // TAILs: a deadline passed
  uint64_t expiries = 0;        // epochs started by an idle gap (new flows included)
  uint64_t reroutes = 0;        // path changes on timeout or expiry (a new flow's first excluded)
  uint64_t no_good_path = 0;    // both samples busy: the first taken
  uint64_t timely_replies = 0;  // RTT replies before the deadline
  uint64_t late_replies = 0;    // RTT replies after it (or for another epoch): ignored
  uint64_t clears = 0;          // CLEARs (the destination saw the TAIL)
  uint64_t notifies = 0;        // NOTIFYs: a member marked busy
  uint64_t aged = 0;            // flows forgotten
  uint64_t no_eligible_member = 0;

  ConweaveTxCounters& operator+=(const ConweaveTxCounters& o);
};

class ConweaveTx {
 public:
  static constexpr uint16_t kNoMember = 0xFFFF;

  // `seed`: the path samples. Throws std::invalid_argument for settings
  // check_conweave_settings refuses.
  ConweaveTx(const ConweaveSettings& settings, uint64_t seed);

  struct Decision {
    uint16_t member = kNoMember;  // kNoMember: no eligible member (the caller drops)
    ConweaveTag tag;
  };
  // A data packet of flow `flow_key` to leaf `dst_leaf` at now_ns, over `members` (their
  // eligibility; at most 16), whose base RTT (leaf to leaf and back, propagation) is base_rtt_ns.
  Decision on_data(uint64_t flow_key, uint8_t dst_leaf, uint64_t now_ns,
                   std::span<const PathLoad> members, uint64_t base_rtt_ns);
  // An RTT reply (clear = false) or a CLEAR (true) for the flow, echoing epoch and phase.
  void on_reply(uint64_t flow_key, bool clear, uint8_t epoch, uint8_t phase, uint64_t now_ns);
  // A NOTIFY: `member` towards dst_leaf is busy for path_pause.
  void on_notify(uint8_t dst_leaf, uint8_t member, uint64_t now_ns);
  // Forgets flows idle longer than the aging time.
  void age(uint64_t now_ns);

  bool busy(uint8_t dst_leaf, uint8_t member, uint64_t now_ns) const;
  size_t flows() const { return flows_.size(); }
  const ConweaveSettings& settings() const { return settings_; }
  const ConweaveTxCounters& counters() const { return counters_; }
  uint64_t heap_bytes() const;

 private:
  static constexpr uint64_t kDisarmed = UINT64_MAX;
  struct Flow {
    bool stable = true;
    uint64_t active_ns = 0;
    uint64_t deadline_ns = kDisarmed;
    uint8_t epoch = 0;
    uint8_t phase = 0;
    uint16_t member = kNoMember;
    uint32_t tail_ts = 0;
  };
  uint16_t sample(uint8_t dst_leaf, std::span<const PathLoad> members, uint64_t now_ns,
                  bool& found);
  uint32_t next_random();

  ConweaveSettings settings_;
  uint64_t random_state_;
  std::unordered_map<uint64_t, Flow> flows_;
  std::unordered_map<uint32_t, uint64_t> busy_until_;  // (leaf << 8 | member) -> time
  ConweaveTxCounters counters_;
};

}  // namespace spraynet
