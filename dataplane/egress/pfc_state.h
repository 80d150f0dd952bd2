// A switch's priority flow control (802.1Qbb), one per switch:
//  - ingress accounting per (ingress port, priority) in the switch's shared lossless buffer
//    (SharedBuffer: one pool, a dynamic or static threshold, headroom per priority group): the
//    bytes of that port's lossless traffic sitting in any egress queue. The buffer's XOFF sends
//    an XOFF PFC frame back out of that ingress port (to the upstream sender), refreshed at half
//    the pause it asked for while it stays asserted; its XON sends XON (quanta 0). A packet the
//    buffer cannot hold (its PG's headroom full) is refused at enqueue (admit).
//  - received PFC frames: what they ask of the receiving port's classes (priority n -> class n).
//  - the PFC watchdog, after SONiC's pfcwd (sonic-swss orchagent: pfcwdorch.cpp,
//    pfcactionhandler.cpp, pfc_detect_<asic>.lua, pfc_restore.lua; the "PFC Watchdog Design"
//    HLD in sonic-net/SONiC's wiki), per (port, class):
//      detection: the class has been continuously paused by the neighbour on that port (its
//        pause timer kept running, refreshed by pause frames, never ran out or resumed) and has
//        sent nothing, for the detection time. SONiC's scripts compare counters poll by poll:
//        with packets queued, "no packet sent and PFC frames received"; with the queue empty,
//        "no packet sent and the PFC pause duration covered most of the poll". Both reduce to an
//        unbroken pause with nothing transmitted; here it is measured in now_ns, not polled.
//      action drop (SONiC's default; PfcWdZeroBufferHandler/PfcWdAclHandler): the egress queue
//        is flushed and its arrivals dropped, the ingress priority group is dropped too (packets
//        arriving on the storming port with that priority: watchdog_ingress_drop()), and PFC
//        is off for that priority on that port (PfcWdLossyHandler clears it from the port's PFC
//        mask): received pauses are ignored and no XOFF, refresh or XON goes to the neighbour.
//      action forward (PfcWdLossyHandler alone): PFC off for that priority on that port, as
//        above (pauses ignored, so the queue transmits; no frames sent), and nothing dropped.
//      restoration (pfc_restore.lua): no pause frame received for the restoration time; then
//        pauses are honoured again, PFC frames generated again (an XOFF still asserted goes out
//        at once) and the ingress priority group admitted again.
//    Detection and restoration are logged once each.
//  - path selection per (port, class): eligible() / path_load(). A class in watchdog drop mode
//    takes the port away from that class only; fast feedback (a paused lossless class) too.
//
// The node's part:
//   set-up:   attach_port(p, egress[p]) for every port (PfcState becomes the port's
//             EgressQueueListener, so accounting of packets handed to an attached EgressPort is
//             automatic: never call on_enqueue/on_release for them as well);
//   rx:       a PFC frame received on p -> egress[p].apply(on_pfc_frame(p, frame, now), now);
//   each poll: tick(now); then take_frames(now, out), build each with build_pfc_frame and
//             egress[e.port].enqueue_control(m, now);
//   ingress:   drop a packet of priority q received on p when watchdog_ingress_drop(p, q);
//   selection: path_load(p, tc, now) for each candidate.
// Attached ports must not outlive this object (declare it before the ports in the node).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "dataplane/egress/egress_port.h"
#include "dataplane/egress/shared_buffer.h"
#include "dataplane/forwarding/path_load.h"
#include "dataplane/wire/pfc_frame.h"

namespace spdlog {
class logger;
}

namespace spraynet {

// What the watchdog does to a stormed (port, class); see the header comment.
enum class PfcWatchdogAction : uint8_t { kDrop, kForward };
std::string_view to_string(PfcWatchdogAction action);
std::optional<PfcWatchdogAction> parse_pfc_watchdog_action(std::string_view name);

struct PfcStateConfig {
  uint8_t enabled_priorities = 1u << 3;  // bit n: priority n is lossless (RoCE's usual 3)
  // The lossless ingress buffer; its port_headroom_bytes has one entry per port, like
  // port_link_gbps.
  SharedBufferConfig buffer;
  uint16_t xoff_quanta = 0xFFFF;  // pause time asked for in each XOFF, in 512-bit-time quanta
  // A port with a paused lossless class leaves the DLB/spray candidate set at once.
  bool fast_feedback = false;
  bool watchdog = true;
  uint64_t watchdog_detection_ns = 200'000'000;                  // SONiC's default detection time
  uint64_t watchdog_restoration_ns = 200'000'000;                // and restoration time
  PfcWatchdogAction watchdog_action = PfcWatchdogAction::kDrop;  // and action
  // One entry per port: its link rate, which turns quanta into time. A port with an attached
  // EgressPort uses that port's current link rate instead.
  std::vector<double> port_link_gbps;

  // Empty when valid, else "key: reason".
  std::string check() const;
};

// One PFC frame to send out of `port`.
struct PfcEmission {
  uint16_t port = 0;
  PfcFrame frame;
};

struct PfcPriorityCounters {
  uint64_t xoff_sent = 0;  // including refreshes
  uint64_t xoff_refreshes_sent = 0;
  uint64_t xon_sent = 0;
  uint64_t xoff_received = 0;
  uint64_t xon_received = 0;
  uint64_t watchdog_storms_detected = 0;
  uint64_t watchdog_restorations = 0;
  // Packets received on this port with this priority while it was in watchdog drop mode,
  // dropped at ingress.
  uint64_t watchdog_ingress_drops = 0;
  // PFC frames for this priority (XOFF, refresh or XON) not sent to this port's neighbour
  // because it was storming (either action).
  uint64_t watchdog_frames_suppressed = 0;
};

struct PfcPortCounters {
  uint64_t frames_sent = 0;
  uint64_t frames_received = 0;
  // Received pause times for priorities not enabled here: not honoured, as on a real switch.
  uint64_t ignored_priority_pauses = 0;
  std::array<PfcPriorityCounters, kPriorities> priority{};
};

class PfcState final : public EgressQueueListener {
 public:
  static constexpr uint64_t kNever = UINT64_MAX;

  // Throws std::invalid_argument with config.check()'s reason when the config is invalid.
  // `logger` may be null (nothing is logged).
  PfcState(PfcStateConfig config, std::shared_ptr<spdlog::logger> logger);

  size_t ports() const { return ports_.size(); }
  // Makes PfcState the listener of `egress` (port's egress) and lets the watchdog and path_load
  // see it. Throws std::out_of_range for a port beyond the configured ones.
  void attach_port(uint16_t port, EgressPort& egress);

  // Ingress accounting (EgressQueueListener). Packets from EgressPort::kNoIngressPort and of
  // priorities not enabled are ignored (and admitted); an unknown port is counted in
  // unknown_port_events(). admit() refuses a lossless packet whose PG's headroom is full.
  bool admit(uint16_t ingress_port, uint8_t priority, uint32_t bytes, uint64_t now_ns) override;
  void on_enqueue(uint16_t ingress_port, uint8_t priority, uint32_t bytes,
                  uint64_t now_ns) override;
  void on_release(uint16_t ingress_port, uint8_t priority, uint32_t bytes,
                  uint64_t now_ns) override;
  void on_pause(uint8_t tc, uint64_t until_ns) override;

  // Moves up to out.size() frames due by now_ns (XOFF/XON from threshold crossings, refreshes)
  // into out, at most one per port; returns how many. Frames that did not fit stay due. A
  // priority in watchdog mode on the frame's port is left out (counted as suppressed).
  size_t take_frames(uint64_t now_ns, std::span<PfcEmission> out);

  // A PFC frame received on `port`: for each priority enabled both in the frame and here, pause
  // its class until now + quanta x 512 bit times at the port's link rate, or resume it (0).
  PfcPauseUpdate on_pfc_frame(uint16_t port, const PfcFrame& frame, uint64_t now_ns);

  // The watchdog: call every poll (or at next_event_ns()).
  void tick(uint64_t now_ns);
  // Earliest time at which take_frames or tick has something to do: now_ns when frames are due;
  // kNever when nothing is pending.
  uint64_t next_event_ns(uint64_t now_ns) const;

  // Whether path selection may send new traffic of class `tc` to `port`: its link is up and,
  // for a lossless class, that class is not in watchdog drop mode there and, with fast feedback
  // on, not paused there. Other classes on the port, lossless or lossy, are not affected. An
  // unknown port is never eligible; a known port without an attached EgressPort always is.
  bool eligible(uint16_t port, uint8_t tc, uint64_t now_ns) const;
  PathLoad path_load(uint16_t port, uint8_t tc, uint64_t now_ns) const;
  // Whether traffic class `tc` (= priority here) is one of the lossless priorities.
  bool lossless(uint8_t tc) const { return tc < kPriorities && enabled(tc); }
  // Changes whenever eligible() may have changed other than by time passing (the watchdog
  // entering or leaving drop mode): a caller keeping loads can tell when to read them again.
  // With fast feedback on, eligibility also changes as pauses run out: read every time.
  uint64_t eligibility_changes() const { return eligibility_changes_; }

  // The ingress half of drop mode: true (and counted) when a packet of `priority` received on
  // `port` is to be dropped because that (port, priority) is in watchdog drop mode: its sender
  // is the storming neighbour, and it could never be paused back. Per packet: cheap.
  bool watchdog_ingress_drop(uint16_t port, uint8_t priority) {
    if (storms_ == 0 || port >= ports_.size() || priority >= kPriorities) return false;
    PortState& p = ports_[port];
    if (!((p.ingress_drop_classes >> priority) & 1)) return false;
    ++p.counters.priority[priority].watchdog_ingress_drops;
    return true;
  }

  // The lossless buffer: threshold, pool and headroom occupancy, peaks, headroom overflows.
  const SharedBuffer& buffer() const { return buffer_; }
  // Bytes of the PFC state: the object (its shared buffer inside), the per-port state and the
  // shared buffer's per-port priority groups.
  uint64_t memory_bytes() const {
    return sizeof(*this) + ports_.capacity() * sizeof(PortState) + buffer_.heap_bytes();
  }
  double port_link_gbps(uint16_t port) const;
  // How long `quanta` pause `port`'s link; and how often an asserted XOFF is refreshed there.
  uint64_t pause_duration_ns(uint16_t port, uint16_t quanta) const;
  uint64_t xoff_refresh_interval_ns(uint16_t port) const;

  uint64_t buffered_bytes(uint16_t port, uint8_t priority) const;
  bool xoff_asserted(uint16_t port, uint8_t priority) const;
  // In watchdog drop mode (action drop, storm detected, not yet restored).
  bool watchdog_dropping(uint16_t port, uint8_t priority) const;
  // A storm detected and not yet restored, whatever the action.
  bool watchdog_storming(uint16_t port, uint8_t priority) const;

  const PfcStateConfig& config() const { return config_; }
  const PfcPortCounters& counters(uint16_t port) const { return ports_.at(port).counters; }
  uint64_t unknown_port_events() const { return unknown_port_events_; }
  // Releases of more bytes than were accounted: a bug in the caller, never expected.
  uint64_t accounting_underflows() const { return buffer_.accounting_underflows(); }

 private:
  struct PriorityState {
    uint64_t next_refresh_ns = 0;  // while the buffer asserts XOFF toward the upstream sender
    uint64_t last_pause_received_ns = 0;  // last non-zero pause time received, for restoration
    uint64_t drop_mode_since_ns = 0;
  };
  struct PortState {
    EgressPort* egress = nullptr;
    uint8_t due_classes = 0;           // priorities with a frame due
    uint8_t due_refreshes = 0;         // of which refreshes
    uint8_t storm_classes = 0;         // in watchdog mode (either action): no PFC frames sent
    uint8_t ingress_drop_classes = 0;  // in watchdog drop mode: arrivals dropped at ingress
    std::array<uint16_t, kPriorities> due_quanta{};
    std::array<PriorityState, kPriorities> priority{};
    PfcPortCounters counters;
  };

  bool enabled(uint8_t priority) const { return (config_.enabled_priorities >> priority) & 1; }
  // The accounting state for (port, priority), or nullptr for events to ignore.
  PriorityState* accounted(uint16_t port, uint8_t priority);
  void make_due(uint16_t port, uint8_t priority, uint16_t quanta, bool refresh);
  // XON for the PGs a risen dynamic threshold lets go.
  void send_due_xons();
  void queue_refreshes(uint64_t now_ns);
  uint64_t restoration_deadline_ns(const PriorityState& s) const;
  void enter_storm(uint16_t port, uint8_t priority, uint64_t now_ns);
  void restore(uint16_t port, uint8_t priority, uint64_t now_ns);

  PfcStateConfig config_;
  std::shared_ptr<spdlog::logger> logger_;
  SharedBuffer buffer_;
  std::vector<PortState> ports_;
  uint32_t ports_with_frames_due_ = 0;
  // The watchdog's shortcut: the latest time a pause of an attached port runs to, and how many
  // (port, class) are in watchdog mode (either action).
  uint64_t pause_horizon_ns_ = 0;
  uint32_t storms_ = 0;
  uint64_t eligibility_changes_ = 0;
  uint64_t unknown_port_events_ = 0;
};

}  // namespace spraynet
