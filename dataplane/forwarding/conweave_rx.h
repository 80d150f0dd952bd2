// ConWeave's destination leaf (Song et al., SIGCOMM 2023), as conweave-ns3's RxToR does it
// (conweave-routing.cc RouteInput's dstToR branch and conweave-voq.cc). Per flow it follows the
// source's epochs and masks the reordering a reroute causes:
//  - a packet of an older epoch passes at once (no reply, no hold);
//  - phase 1 (sent on the new path after the TAIL) arriving before this epoch's TAIL is out of
//    order: it is held in the flow's reorder queue (bounded by voq_limit_packets; beyond it a
//    packet passes out of order, counted) until the TAIL arrives, or until the predicted
//    deadline passes: the old path's last one-way latency (the latest phase-0 packet's arrival
//    minus its send time, both leaves' clocks apart) after the TAIL's send time, plus
//    voq_flush_extra; voq_default_wait stands in when no phase-0 packet of the epoch was seen;
//  - an INIT (RTT request) is answered with an RTT reply, a TAIL with a CLEAR, and a packet that
//    arrives CE-marked with a NOTIFY of its path; the caller sends them.
// The queues hold rte_mbuf pointers without reading them; take_due() hands back what is due.
#pragma once

#include <rte_mbuf.h>

#include <cstdint>
#include <deque>
#include <set>
#include <unordered_map>
#include <vector>

#include "dataplane/forwarding/conweave_tx.h"

namespace spraynet {

struct ConweaveRxCounters {
  uint64_t packets = 0;
  uint64_t held = 0;                // packets put in a reorder queue
  uint64_t voq_full = 0;            // out of order, queue at its bound: passed at once
  uint64_t previous_epoch = 0;      // packets of an epoch already left behind: passed
  uint64_t flushes_by_tail = 0;     // queues released by their TAIL
  uint64_t flushes_by_timeout = 0;  // queues released by the deadline
  uint64_t max_queue_depth = 0;     // the deepest any flow's queue was
  uint64_t rtt_replies = 0;         // INITs answered
  uint64_t clears = 0;              // TAILs answered
  uint64_t notifies = 0;            // CE-marked packets reported
  uint64_t aged = 0;
  // Old-path packets that arrived after their queue was let out by the deadline: delivered out of
  // order (the prediction was short).
  uint64_t late_after_timeout = 0;

  ConweaveRxCounters& operator+=(const ConweaveRxCounters& o);
};

class ConweaveRx {
 public:
  explicit ConweaveRx(const ConweaveSettings& settings);
  ~ConweaveRx();
  ConweaveRx(const ConweaveRx&) = delete;
  ConweaveRx& operator=(const ConweaveRx&) = delete;

  struct Result {
    bool held = false;       // the table took the packet
    bool rtt_reply = false;  // answer with an RTT reply (epoch, phase 0)
    bool clear = false;      // answer with a CLEAR (epoch, phase 1)
    bool notify = false;     // tell the source tag.member is busy
  };
  // A data packet of flow `flow_key` with its tag, `ce`: it arrived CE-marked. When held, the
  // table owns `m` until take_due() gives it back.
  Result on_data(uint64_t flow_key, const ConweaveTag& tag, bool ce, uint64_t now_ns, rte_mbuf* m);
  // Appends the packets of every queue due by now_ns to `out`, each queue in arrival order.
  void take_due(uint64_t now_ns, std::vector<rte_mbuf*>& out);
  // The earliest time a queue is due; UINT64_MAX when none holds anything.
  uint64_t next_due_ns() const;
  // Hands back every held packet (shutdown) in arrival order per flow.
  void take_all(std::vector<rte_mbuf*>& out);
  // Forgets flows idle for the aging time with nothing held.
  void age(uint64_t now_ns);

  uint64_t held_now() const { return held_now_; }
  size_t flows() const { return flows_.size(); }
  const ConweaveRxCounters& counters() const { return counters_; }
  uint64_t heap_bytes() const;

 private:
  static constexpr uint64_t kNever = UINT64_MAX;
  struct Flow {
    uint64_t active_ns = 0;
    uint8_t epoch = 0;
    uint8_t phase = 0;
    bool seen = false;
    bool phase0_cache = false;  // a phase-0 packet of this epoch arrived
    uint32_t phase0_tx = 0;
    uint64_t phase0_rx_ns = 0;
    uint32_t tail_ts = 0;
    bool reordering = false;
    bool flush_by_tail = false;
    bool released_by_timeout = false;  // this epoch's queue was let out by the deadline
    uint64_t flush_at_ns = kNever;
    std::deque<rte_mbuf*> queue;
  };
  void flush(Flow& f, std::vector<rte_mbuf*>& out);
  // (Re)arms the flow's release at at_ns.
  void set_due(uint64_t key, Flow& f, uint64_t at_ns);

  ConweaveSettings settings_;
  std::unordered_map<uint64_t, Flow> flows_;
  // The flows holding packets, by release time: next_due_ns() and take_due() without a scan.
  std::set<std::pair<uint64_t, uint64_t>> due_;
  uint64_t held_now_ = 0;
  ConweaveRxCounters counters_;
};

}  // namespace spraynet
