// One switch or NIC port's egress: eight traffic-class FIFO queues and a control queue in front of
// an emulated link (LinkEmulator), and the delay line holding the frames in flight on it.
//
// Scheduling is strict priority, class 7 first, skipping classes that PFC has paused; the
// control queue (PFC frames) goes before every class and is never paused. Frames start exactly
// when the link could have started them: every call that takes now_ns first starts, in order,
// every frame that could have started by now_ns (at the later of the link becoming free, the
// frame reaching the head of an unpaused class), so the schedule does not depend on how often
// the driver calls, as long as it calls by next_event_ns().
//
// ECN (EgressPortConfig::ecn): classes with marking on get CE set on ECN-capable IPv4 frames by
// queue depth (dataplane/egress/ecn_marker.h), at dequeue (the depth the frame leaves behind it
// when it starts on the wire) or at enqueue (the depth it finds). Marking changes two header
// bytes, never which frames go where: the accounting is the same with it on or off.
//
// The wire as the link (EgressPortConfig::wire: switch_emu's ports without `link:`): no shaper
// and no delay line. Nothing starts by itself: dequeue() takes frames off the class queues when
// the driver asks, as many as its PMD's tx queue can take, in the same strict priority order
// skipping paused classes (so a paused class stays queued while the others leave), and what the
// PMD then refuses comes back with unsend() and goes first next time. The link's rate is only
// what utilisation is measured against; up/down, PFC, the watchdog and ECN hold as on an
// emulated link. The port's load (load_bytes(), what path selection and the link-state table
// read) is its own queues plus what waits in the PMD's tx descriptors (set_tx_backlog).
//
// Ownership: enqueue and enqueue_control take the mbuf in every case. It is then forwarded
// (returned by dequeue once its last bit has reached the far end) or freed and counted under
// exactly one drop cause. The destructor frees whatever is still held.
//
// Not copyable or movable: PfcState and the listener keep pointers to it.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>

#include "dataplane/egress/earliest_event.h"
#include "dataplane/egress/ecn_marker.h"
#include "dataplane/egress/fifo_ring.h"
#include "dataplane/egress/link_emulator.h"

struct rte_mbuf;

namespace spraynet {

// Told when a packet enters a traffic-class queue and when it leaves it, whether by starting
// transmission or by being dropped from the queue (link down, PFC watchdog, free_all). Every
// on_enqueue is followed by exactly one on_release with the same (ingress port, priority, bytes).
// Packets refused at enqueue never enter and produce neither call; control frames produce none.
// This is how PFC ingress accounting learns that buffer was taken and freed.
class EgressQueueListener {
 public:
  virtual ~EgressQueueListener() = default;
  // Asked before a packet with an ingress port is queued (after the port's own checks): false
  // refuses it (the switch's buffer cannot hold it), and it is freed and counted as
  // drops_headroom_overflow, with neither on_enqueue nor on_release.
  virtual bool admit(uint16_t /*ingress_port*/, uint8_t /*priority*/, uint32_t /*bytes*/,
                     uint64_t /*now_ns*/) {
    return true;
  }
  virtual void on_enqueue(uint16_t ingress_port, uint8_t priority, uint32_t bytes,
                          uint64_t now_ns) = 0;
  virtual void on_release(uint16_t ingress_port, uint8_t priority, uint32_t bytes,
                          uint64_t now_ns) = 0;
  // A class was paused until until_ns (by whatever path: a PFC frame, a test, a tool).
  virtual void on_pause(uint8_t /*tc*/, uint64_t /*until_ns*/) {}
};

enum class EgressEnqueueResult : uint8_t {
  kQueued,
  kQueueFull,         // the class (or control) queue's byte (frame) limit would be exceeded
  kLinkDown,          // a down link accepts nothing
  kWatchdogDrop,      // the class is in PFC-watchdog drop mode
  kHeadroomOverflow,  // the listener refused it: its ingress PG's PFC headroom is full
  kInvalid,           // null mbuf or class >= 8 (counted in invalid_requests())
};

// What one received PFC frame asks of this port's classes: pause the classes in pause_classes
// until pause_until_ns[class], resume (XON) those in resume_classes.
struct PfcPauseUpdate {
  uint8_t pause_classes = 0;
  uint8_t resume_classes = 0;
  std::array<uint64_t, 8> pause_until_ns{};
};

// Where every frame offered to a port is, at any moment: refused at the door (counted by cause,
// or an invalid request), dequeued to the driver, lost after it was accepted (link down, the
// watchdog, the wire, the delay line), still queued, on the wire, or freed by free_all() at
// shutdown. Counted at each of those places, so that balanced() checks they add up.
struct EgressAccounting {
  uint64_t offered = 0;    // enqueue() and enqueue_control() calls
  uint64_t refused = 0;    // not accepted (its class counters say why) or invalid
  uint64_t dequeued = 0;   // handed to the driver by dequeue()
  uint64_t lost = 0;       // accepted, then dropped (the class counters' drops less refusals)
  uint64_t queued = 0;     // waiting in a class or the control queue
  uint64_t in_flight = 0;  // started on the wire, not yet dequeued
  uint64_t freed_at_shutdown = 0;
  bool balanced() const {
    return offered == refused + dequeued + lost + queued + in_flight + freed_at_shutdown;
  }
  EgressAccounting& operator+=(const EgressAccounting& o) {
    offered += o.offered;
    refused += o.refused;
    dequeued += o.dequeued;
    lost += o.lost;
    queued += o.queued;
    in_flight += o.in_flight;
    freed_at_shutdown += o.freed_at_shutdown;
    return *this;
  }
};

struct EgressClassCounters {
  uint64_t enqueued = 0;
  // Frames that started transmission, including those the link then lost (they used the wire).
  uint64_t transmitted_packets = 0;
  uint64_t transmitted_bytes = 0;
  uint64_t drops_queue_full = 0;
  uint64_t drops_link_down = 0;  // refused while down, or queued/in flight when it went down
  uint64_t drops_watchdog = 0;   // flushed or refused in PFC-watchdog drop mode
  // Refused by the listener's admit(): the ingress PG's headroom was full (a lossless packet
  // lost to a headroom too small for the link; a correct buffer config never counts one).
  uint64_t drops_headroom_overflow = 0;
  uint64_t drops_bit_error = 0;   // lost on the wire to bit errors
  uint64_t drops_loss = 0;        // lost on the wire to the plain loss rate
  // Sent, but the delay line already held EgressPortConfig::delay_line_limit_frames frames
  // (arrived ones the driver had not taken yet, and those still on the wire): lost at the far
  // end, as on a receiver out of descriptors.
  uint64_t drops_delay_line_full = 0;
  uint64_t paused_ns = 0;         // total time the class was held by PFC
  uint64_t longest_pause_ns = 0;  // the longest single pause (refreshes extend one pause)
  // How a PFC storm spreads and lasts: pause intervals opened (a refresh extends one, it does
  // not open another), when the first began (UINT64_MAX: never paused) and when the latest
  // ended (now, for one still open; 0: never paused).
  uint64_t pause_intervals = 0;
  uint64_t first_pause_ns = UINT64_MAX;
  uint64_t last_pause_end_ns = 0;
  // ECN (a class with marking on): CE set by this port, and frames it would have marked that
  // were not ECN-capable (Not-ECT) and left alone. Neither is a drop.
  uint64_t ecn_marked = 0;
  uint64_t ecn_not_ect = 0;
};

// In-band telemetry for HPCC (int_header.h): each frame carrying INT on `udp_port` gets this
// port's record pushed on its stack as it starts on the wire, the way ns-3 HPCC's switch does at
// dequeue (SwitchNode::SwitchNotifyDequeue): the class, the bytes the port still holds in all
// its queues, the start time, the bytes the port sent before this frame, and the line rate.
struct EgressIntConfig {
  bool enabled = false;
  uint16_t udp_port = 4792;  // kIntUdpPort
  // The longest frame the port may send (its MTU as a frame): a record that would not fit sets
  // M instead (the spec's §5.7).
  size_t max_frame_len = SIZE_MAX;
};

// What the port did with INT frames. Records are pushed or refused per frame, never a drop.
struct EgressIntCounters {
  uint64_t pushed = 0;
  uint64_t hops_exceeded = 0;  // the frame's hop budget was spent: E set
  uint64_t mtu_exceeded = 0;   // no room: M set
  bool any() const { return pushed + hops_exceeded + mtu_exceeded != 0; }
  EgressIntCounters& operator+=(const EgressIntCounters& o) {
    pushed += o.pushed;
    hops_exceeded += o.hops_exceeded;
    mtu_exceeded += o.mtu_exceeded;
    return *this;
  }
};

struct EgressPortConfig {
  static constexpr uint64_t kDefaultClassLimitBytes = 1 << 20;

  LinkEmulatorConfig link;
  std::array<uint64_t, 8> class_limit_bytes = {kDefaultClassLimitBytes, kDefaultClassLimitBytes,
                                               kDefaultClassLimitBytes, kDefaultClassLimitBytes,
                                               kDefaultClassLimitBytes, kDefaultClassLimitBytes,
                                               kDefaultClassLimitBytes, kDefaultClassLimitBytes};
  uint32_t control_queue_limit_frames = 64;
  // Frames the delay line may hold: what is on the wire plus what has arrived and not yet been
  // taken by dequeue. It bounds the port's memory when a driver stops draining it. The default
  // is far above what a link holds (a 100 Gbit/s link with 1 ms of delay carries about 3,000
  // MTU frames) and above a pool's worth of mbufs; a frame beyond it is counted
  // (drops_delay_line_full) and freed.
  static constexpr uint32_t kDefaultDelayLineLimitFrames = 1u << 18;
  uint32_t delay_line_limit_frames = kDefaultDelayLineLimitFrames;
  // CE marking per class; every class off by default (no marker is made, nothing is read).
  EcnMarkerConfig ecn;
  // The wire is the link (see the header): no shaper, no delay line; link.rate_gbps stays the
  // rate utilisation is measured against, link.up its state; delay, BER and loss are not used.
  bool wire = false;
  EgressIntConfig int_telemetry;

  // Empty when valid, else "key: reason".
  std::string check() const;
};

class EgressPort {
 public:
  static constexpr int kClasses = 8;
  static constexpr uint16_t kNoIngressPort = 0xFFFF;  // locally generated: no PFC accounting
  static constexpr uint64_t kNever = UINT64_MAX;

  // Throws std::invalid_argument with config.check()'s reason when the config is invalid.
  explicit EgressPort(const EgressPortConfig& config);
  ~EgressPort();
  EgressPort(const EgressPort&) = delete;
  EgressPort& operator=(const EgressPort&) = delete;

  // At most one; nullptr to remove. It must outlive this port or be removed first.
  void set_listener(EgressQueueListener* listener) { listener_ = listener; }

  // Takes ownership of m in every case; a refused mbuf is freed and counted. `priority` is the
  // packet's PFC priority (what ingress accounting is kept by), tc its egress class.
  EgressEnqueueResult enqueue(rte_mbuf* m, uint8_t tc, uint16_t ingress_port, uint8_t priority,
                              uint64_t now_ns);
  // A control frame (PFC): ahead of every class, never paused, never in watchdog drop mode.
  EgressEnqueueResult enqueue_control(rte_mbuf* m, uint64_t now_ns);
  // Up to max frames whose last bit has reached the far end by now_ns, in arrival order. The
  // caller owns them. Frames the link lost are freed and counted, never returned. On a wire
  // port: up to max (at most kWireBurst) frames to hand to the PMD now, those it refused last
  // time first, then the queues' heads in strict priority order, paused classes skipped.
  // `bytes` (may be null) gets the frames' bytes added, so that a caller counting them need
  // not touch each mbuf again.
  uint16_t dequeue(uint64_t now_ns, rte_mbuf** out, uint16_t max, uint64_t* bytes = nullptr);
  // Wire port: the last n frames the latest dequeue() returned (pkts: those frames, in order),
  // which the PMD did not take. They go first at the next dequeue and count as in flight (they
  // have left their classes, as on a NIC's tx ring) until then; the caller no longer owns them.
  // `bytes` (may be null) gets their bytes taken off again. Ignored on an emulated link.
  void unsend(rte_mbuf* const* pkts, uint16_t n, uint64_t* bytes = nullptr);
  // Wire port: what the PMD's tx queue holds, sent by the driver and not yet on the wire (its
  // descriptors in use): part of load_bytes(), never of queued_bytes() (the port does not hold
  // them, and a stopped peer must not keep the node from being idle).
  void set_tx_backlog(uint64_t bytes) { tx_backlog_bytes_ = bytes; }
  bool wire() const { return config_.wire; }
  static constexpr uint16_t kWireBurst = 64;  // a wire dequeue returns at most this many
  // Up to max frames already started on the wire, whatever their arrival time, in arrival order,
  // with their arrival times in arrival_ns[]: for a driver that hands a frame to the far end as
  // soon as it has started (fabric_emu's logical processes, where the far end runs elsewhere and
  // the cable's delay is the time they may run apart). Counted as dequeue counts them; frames
  // the link lost are freed and counted, never returned.
  uint16_t take_in_flight(rte_mbuf** out, uint64_t* arrival_ns, uint16_t max,
                          uint64_t* bytes = nullptr);
  // Earliest time at which dequeue could return a frame or a queue could start one (it may be in
  // the past when a dequeue was cut short by max); kNever when nothing is queued or in flight.
  uint64_t next_event_ns() const { return next_event_; }
  // Also keep next_event_ns() in slot `index` of `events` (nullptr: nowhere else): a node with
  // many ports keeps them in one EarliestEvent, so that its own next event is one load, not a
  // scan of every port.
  void set_next_event_slot(EarliestEvent* events, size_t index) {
    next_event_slots_ = events;
    next_event_index_ = index;
    if (events != nullptr) events->set(index, next_event_);
  }

  // All classes and the control queue; not in flight.
  uint64_t queued_bytes() const { return total_queued_bytes_; }
  // The port's backlog as path selection and the link-state table see it: queued_bytes(), and
  // on a wire port also the frames the PMD refused (held for the next dequeue) and those in
  // its tx descriptors (set_tx_backlog).
  uint64_t load_bytes() const { return total_queued_bytes_ + unsent_bytes_ + tx_backlog_bytes_; }
  uint64_t queued_bytes(uint8_t tc) const;
  size_t queued_packets(uint8_t tc) const;
  size_t in_flight() const { return in_flight_.size(); }

  // PFC. A pause replaces the class's timer (802.1Qbb): the class sends nothing new from now_ns
  // until until_ns; a frame already started finishes. Ignored for a class in watchdog drop or
  // forward mode.
  void pause(uint8_t tc, uint64_t until_ns, uint64_t now_ns);
  void resume(uint8_t tc, uint64_t now_ns);
  void apply(const PfcPauseUpdate& update, uint64_t now_ns);
  bool paused(uint8_t tc, uint64_t now_ns) const;
  bool any_paused(uint64_t now_ns, uint8_t class_mask = 0xFF) const;

  // PFC watchdog drop mode (decided by PfcState): entering flushes the class's queue and lifts
  // its pause; while on, arrivals are dropped and pauses ignored. Leaving it also leaves forward
  // mode.
  void set_drop_mode(uint8_t tc, bool on, uint64_t now_ns);
  bool drop_mode(uint8_t tc) const;
  bool any_drop_mode() const { return drop_mode_mask_ != 0; }
  // PFC watchdog forward mode: entering lifts the class's pause; while on, pauses are ignored and
  // the queue keeps sending; nothing is dropped for it.
  void set_forward_mode(uint8_t tc, bool on, uint64_t now_ns);
  // Drop or forward mode: the class's pauses are ignored.
  bool pauses_ignored(uint8_t tc) const {
    return tc < kClasses && ((pauses_ignored_mask_ >> tc) & 1);
  }
  // Since when the class has been continuously paused (one pause interval: refreshes extend it,
  // a timer running out or an XON ends it) with nothing started, queued packets or not; kNever
  // when it is not paused at now_ns, or pauses are ignored. What the watchdog measures.
  uint64_t stalled_since_ns(uint8_t tc, uint64_t now_ns) const;

  // The link. Going down frees everything queued and in flight (counted as link_down) and lifts
  // every pause; a down link sends nothing and refuses everything. Each setter first starts the
  // frames due by now_ns under the old settings. Rate/BER/loss setters throw
  // std::invalid_argument on invalid values, like LinkEmulator's.
  void set_link_up(bool up, uint64_t now_ns);
  void set_link_rate_gbps(double rate_gbps, uint64_t now_ns);
  void set_propagation_delay_ns(uint64_t delay_ns, uint64_t now_ns);
  void set_bit_error_rate(double ber, uint64_t now_ns);
  void set_loss_rate(double loss_rate, uint64_t now_ns);
  bool link_up() const { return link_.up(); }
  const LinkEmulator& link() const { return link_; }

  // Frees everything queued and in flight without counting drops; the listener is told about
  // class packets. For shutdown.
  void free_all();

  EgressClassCounters counters(uint8_t tc, uint64_t now_ns) const;
  // Bytes of this port besides the mbufs: the object, its class/control queues' and delay
  // line's ring capacity, the link emulator's generator once made, the ECN marker.
  uint64_t memory_bytes() const;
  // The port's ECN marker; nullptr when no class marks.
  const EcnMarker* ecn_marker() const { return ecn_.get(); }
  const EgressClassCounters& control_counters() const { return control_counters_; }
  EgressAccounting accounting() const;
  // Calls with a null mbuf or a class >= 8 (the mbuf, if any, is freed).
  uint64_t invalid_requests() const { return invalid_requests_; }
  // Pauses received for a class in watchdog drop or forward mode.
  uint64_t pauses_ignored_by_watchdog() const { return pauses_ignored_; }
  const EgressIntCounters& int_counters() const { return int_counters_; }
  // Bytes of every frame the port has started (the wire's length, INT records included): the
  // counter INT records carry.
  uint64_t tx_bytes() const { return tx_bytes_; }

 private:
  static constexpr int kControl = kClasses;  // index of the control queue in per-queue arrays

  struct Queued {
    rte_mbuf* mbuf;
    uint64_t enqueued_ns;
    uint32_t bytes;
    uint16_t ingress_port;
    uint8_t priority;
  };
  struct InFlight {
    rte_mbuf* mbuf;
    uint64_t arrival_ns;
    uint32_t bytes;
    uint8_t queue;  // class, or kControl
  };
  // One class's PFC timer. The pause interval [since_ns, until_ns) is "open" from the pause that
  // started it until it runs out or is resumed; refreshes extend it without reopening it.
  struct PauseTimer {
    bool open = false;
    uint64_t since_ns = 0;
    uint64_t until_ns = 0;
    uint64_t closed_total_ns = 0;  // paused time of intervals already closed
    uint64_t longest_ns = 0;       // the longest interval closed
    uint64_t released_ns = 0;      // when the last interval closed: nothing starts before it
    uint64_t intervals = 0;        // intervals opened
    uint64_t first_since_ns = UINT64_MAX;
  };

  // next_event_ns() is asked far more often than the port changes (an event loop asks every
  // port of a node each time it serves it): every public mutator recomputes it on its way out.
  struct NextEventRefresh {
    EgressPort& port;
    explicit NextEventRefresh(EgressPort& p) : port(p) {}
    ~NextEventRefresh() {
      port.next_event_ = port.compute_next_event();
      if (port.next_event_slots_ != nullptr) {
        port.next_event_slots_->set(port.next_event_index_, port.next_event_);
      }
    }
  };
  uint64_t compute_next_event() const;

  // Starts, in order, every frame that could have started by now_ns (nothing on a wire port:
  // its frames start when the driver takes them).
  void advance(uint64_t now_ns);
  uint16_t dequeue_wire(uint64_t now_ns, rte_mbuf** out, uint16_t max, uint64_t* bytes);
  EgressEnqueueResult admit_and_queue(rte_mbuf* m, uint8_t tc, uint16_t ingress_port,
                                      uint8_t priority, uint64_t now_ns);
  EgressEnqueueResult enqueue_wire(rte_mbuf* m, uint8_t tc, uint16_t ingress_port, uint8_t priority,
                                   uint64_t now_ns);
  // dequeue() and take_in_flight(): up to max frames off the front of the delay line whose last
  // bit arrives by until_ns, their arrival times in arrival_ns[] (when not null), counted.
  uint16_t pop_in_flight(uint64_t until_ns, rte_mbuf** out, uint64_t* arrival_ns, uint16_t max,
                         uint64_t* bytes);
  // Earliest start of the head of queue q (a class or kControl), ignoring the link; kNever if
  // the queue is empty.
  uint64_t head_ready_ns(int q) const;
  void start_head(int q, uint64_t ready_ns);
  // EgressIntConfig: pushes this port's record on an INT frame of `bytes` starting at start_ns
  // from queue q, leaving queued_bytes in the port's queues (ns-3 HPCC: the egress's
  // GetNBytesTotal() at dequeue); the frame's length after it.
  uint32_t push_int(rte_mbuf* m, int q, uint64_t start_ns, uint32_t bytes, uint64_t queued_bytes);
  void close_expired_pause(int tc, uint64_t now_ns);
  void end_pause(int tc, uint64_t now_ns);
  // Frees a class's queue, counting each packet with `counter` (nullptr: not counted).
  void flush_class(int tc, uint64_t EgressClassCounters::*counter, uint64_t now_ns);
  void flush_control(uint64_t EgressClassCounters::*counter);
  // Frees the frames in flight whose last bit has not arrived by now_ns (all of them when
  // counter is nullptr: shutdown), counting each with `counter`.
  void flush_in_flight(uint64_t EgressClassCounters::*counter, uint64_t now_ns);
  EgressClassCounters& counters_of(int q) {
    return q == kControl ? control_counters_ : class_counters_[q];
  }
  EgressEnqueueResult refuse(rte_mbuf* m, int q, uint64_t EgressClassCounters::*counter,
                             EgressEnqueueResult result);

  EgressPortConfig config_;
  LinkEmulator link_;
  EgressQueueListener* listener_ = nullptr;
  // Made only when some class marks: a port without ECN pays one null test per frame.
  std::unique_ptr<EcnMarker> ecn_;

  std::array<FifoRing<Queued>, kClasses + 1> queues_;  // classes 0..7, then control
  std::array<uint64_t, kClasses + 1> queued_bytes_{};
  uint64_t total_queued_bytes_ = 0;
  // Bit q set: queues_[q] is not empty. advance() and compute_next_event() look at those only,
  // which is one or two queues on a fabric's port rather than nine.
  uint32_t nonempty_ = 0;
  FifoRing<InFlight> in_flight_;

  std::array<PauseTimer, kClasses> pause_{};
  // When each class queue last started a frame: with the pause timer, what stalled_since_ns()
  // is made of.
  std::array<uint64_t, kClasses> last_start_ns_{};
  uint8_t drop_mode_mask_ = 0;
  uint8_t open_pauses_ = 0;          // bit tc: pause_[tc].open (any_paused looks at those only)
  uint8_t pauses_ignored_mask_ = 0;  // drop or forward mode
  uint64_t latest_now_ns_ = 0;       // the latest now_ns seen, for free_all's listener calls
  uint64_t next_event_ = kNever;     // compute_next_event() as of the last mutation
  EarliestEvent* next_event_slots_ = nullptr;
  size_t next_event_index_ = 0;

  std::array<EgressClassCounters, kClasses> class_counters_{};
  EgressClassCounters control_counters_{};
  uint64_t invalid_requests_ = 0;
  uint64_t pauses_ignored_ = 0;
  uint64_t tx_bytes_ = 0;
  EgressIntCounters int_counters_{};
  // accounting(): counted where each event happens, not derived from one another.
  uint64_t offered_ = 0;
  uint64_t refused_ = 0;
  uint64_t dequeued_ = 0;
  uint64_t freed_at_shutdown_ = 0;
  uint64_t invalid_requests_with_mbuf_ = 0;
  // Wire port: the classes of the latest dequeue's frames (what unsend() gives back needs its
  // class again), the bytes of the frames held after unsend (in in_flight_), and the PMD's.
  std::array<uint8_t, kWireBurst> wire_taken_queue_{};
  uint16_t wire_taken_ = 0;
  uint64_t unsent_bytes_ = 0;
  uint64_t tx_backlog_bytes_ = 0;
};

}  // namespace spraynet
