// The link-state table: what the control loop knows about each link of a node, rebuilt every
// period from the ports' cumulative counters (DESIGN.md "Control").
//
// Per link:
//   up / watchdog_dropping / paused / queued_bytes   as sampled at the update (paused: any
//            lossless class held by PFC at that instant; watchdog_dropping: any class in PFC
//            watchdog drop mode, watchdog_classes says which);
//   utilisation   EWMA of the wire utilisation of each interval between updates: bytes of the
//            frames that started transmission plus 24 B of wire overhead each (preamble, SFD,
//            FCS, inter-frame gap; frames shorter than 60 B are taken at their mbuf length),
//            over rate x interval. u_ewma = w * u + (1 - w) * u_ewma, w = 0.5 by default: the
//            newest 200 ms weighs half, so a step in load shows 50% at the first tick, 75% at the
//            second and 94% after four (0.8 s) — fast enough to steer within a second, slow
//            enough that one bursty period does not halve a path's buckets;
//   ber      bit-error frames / bits sent (padded frame + FCS) over a decaying window, never
//            below ber_floor (default 1e-12, the IEEE 802.3 objective). A frame lost to bit
//            errors usually holds one bad bit at the rates that matter, so frames stand for bits.
//            The window keeps loss_memory (0.9) of the past per update (about 2 s at 200 ms):
//            without it years of clean traffic would dilute a new burst of errors to nothing,
//            and without the floor a link that never lost a frame would read as perfect;
//   health   0..255: 0 when down, else round(255 * L * P * U) with
//            L = max(0, 1 - 10 * frame loss ratio)   (bit errors and plain loss, same window:
//                                                     10% loss is a dead link for RoCE),
//            P = 1 - 0.5 * fraction of the last interval a lossless class was paused,
//            U = 1 - 0.5 * min(1, utilisation EWMA).
//            An idle clean link is 255, one at 85% is 147, one paused all period at 85% is 73.
//            A class in watchdog drop mode does not make the link unhealthy: the watchdog is per
//            (port, class), and lossy traffic and the other classes still use the link; the
//            stormed class is kept off it at path selection (the switch's per-class eligibility,
//            SwitchNode), not by taking the link's buckets from every class;
//   path id  the PPCID path id, from the link's fingerprint (see below).
//
// Link fingerprint. A path id must name the physical link, not the local port index, so that it
// survives port renumbering at failover (DESIGN.md "PPCID"). The identity is the node name plus
// the peer's MAC when the config gives one ("leaf1>02:00:00:00:01:07": the two ends of the
// cable), else the node name plus the port name ("leaf1/p3"). Its fingerprint is the 64-bit
// FNV-1a of that string, XOR-folded to the path-id width (4 bits in the ts-high layout, 8 in
// path-high). With 16 ids, two of a node's links often fold to the same one: links are visited
// in fingerprint order and a link whose id is taken takes the next free id (mod 2^bits); each
// such case is recorded in collisions() (and logged by the control loop). Since the order and the
// probing depend only on the set of identities, the assignment survives renumbering too. With
// more links than ids some must share one: those keep their folded id and are reported as shared.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "control/switch_config.h"

namespace spraynet {
class EgressPort;
class PfcState;
}  // namespace spraynet

namespace spraynet::control {

struct LinkIdentity {
  std::string node_name;  // the switch or NIC: the same port name on two nodes is two links
  std::string port_name;
  std::optional<std::array<uint8_t, 6>> peer_mac;
  // A path id the config fixed (the NIC's uplinks): kept as given and reserved before the folded
  // ids of the other links are assigned. The caller keeps fixed ids distinct and within range.
  std::optional<uint8_t> path_id = std::nullopt;
};

std::string identity_string(const LinkIdentity& id);
uint64_t link_fingerprint(std::string_view identity);       // FNV-1a, 64 bits
uint8_t fold_path_id(uint64_t fingerprint, unsigned bits);  // XOR-fold to `bits` (1..8) bits

// One identity per port of a switch config, in port order; and its path-id width (4 for the
// ts-high PPCID layout, 8 for path-high).
std::vector<LinkIdentity> link_identities(const SwitchConfig& config);
unsigned path_id_bits(const SwitchConfig& config);

// What the table reads from one port at one instant. Counters are cumulative (since the port was
// made): the table takes differences between updates.
struct PortSample {
  bool up = true;
  double rate_gbps = 0.0;
  uint64_t tx_bytes = 0;  // frames that started transmission: every class and control
  uint64_t tx_packets = 0;
  uint64_t bit_error_frames = 0;
  uint64_t lost_frames = 0;  // the plain per-frame loss rate
  uint64_t queued_bytes = 0;
  bool paused = false;     // a lossless class is paused now
  uint64_t paused_ns = 0;  // summed over lossless classes
  bool watchdog_dropping = false;  // some class is in PFC-watchdog drop mode
  uint8_t watchdog_classes = 0;    // which: bit tc set for class tc
};

// A sample of one egress port. `lossless_classes` is the PFC priority mask (PfcState's
// enabled_priorities; 0 without PFC, when no class is ever paused). The driver should have run
// the port up to now_ns (SwitchNode::poll or transmit) so that the frames due have started.
PortSample sample_port(const EgressPort& egress, uint8_t lossless_classes, uint64_t now_ns);
// Every port in order, into `out` (resized).
void sample_ports(std::span<const EgressPort* const> ports, const PfcState* pfc, uint64_t now_ns,
                  std::vector<PortSample>& out);

struct LinkStateTableConfig {
  double utilisation_weight = 0.5;  // EWMA weight of the newest interval, in (0, 1]
  double ber_floor = 1e-12;         // no estimate reads better than this; in [0, 1)
  double loss_memory = 0.9;         // share of the BER / loss window kept per update, in [0, 1)
  unsigned path_id_bits = 4;        // 1..8

  // Empty when valid, else "key: reason".
  std::string check() const;
};

struct LinkState {
  std::string identity;
  uint64_t fingerprint = 0;
  uint8_t path_id = 0;
  bool up = true;
  double rate_gbps = 0.0;
  double utilisation = 0.0;       // EWMA
  double last_utilisation = 0.0;  // the latest interval alone
  uint64_t queued_bytes = 0;
  bool paused = false;
  double paused_fraction = 0.0;  // of the latest interval
  bool watchdog_dropping = false;  // some class in watchdog drop mode (only that class avoids it)
  uint8_t watchdog_classes = 0;    // bit tc: class tc in drop mode
  double ber = 0.0;
  double frame_loss_ratio = 0.0;
  uint8_t health = 255;
  uint64_t updated_ns = 0;
};

// The health formula above, pure. `watchdog_dropping` true gives 0: for a caller whose link
// carries only the class in drop mode; the table passes false (see health above).
uint8_t link_health(bool up, bool watchdog_dropping, double frame_loss_ratio,
                    double paused_fraction, double utilisation);

struct PathIdCollision {
  size_t link = 0;   // the link that did not get its folded id
  size_t other = 0;  // the link that holds it
  uint8_t folded_id = 0;
  uint8_t assigned_id = 0;  // == folded_id when no id was free: shared with `other`
  bool shared() const { return assigned_id == folded_id; }
};

class LinkStateTable {
 public:
  // One entry per link, in port order. Throws std::invalid_argument with config.check()'s reason.
  explicit LinkStateTable(std::vector<LinkIdentity> links, const LinkStateTableConfig& config = {});

  // One sample per link (std::invalid_argument otherwise). The first update only takes the
  // baseline of the counters (rates and windows need an interval); so does an update at or before
  // the previous one's time. A counter that went backwards (port re-created) restarts its
  // baseline: that interval counts as idle.
  void update(std::span<const PortSample> samples, uint64_t now_ns);
  // The link is down now (an event, ahead of the next sample): up false, health 0. The next
  // update reads up/down from the sample again. Throws std::out_of_range.
  void mark_down(size_t link, uint64_t now_ns);

  size_t size() const { return links_.size(); }
  std::span<const LinkState> links() const { return links_; }
  const LinkState& at(size_t link) const { return links_.at(link); }
  std::span<const PathIdCollision> collisions() const { return collisions_; }
  uint64_t updates() const { return updates_; }
  const LinkStateTableConfig& config() const { return config_; }

 private:
  struct Window {
    PortSample last;
    double bits = 0.0;  // decaying sums for BER and frame loss
    double bit_errors = 0.0;
    double frames = 0.0;
    double frames_lost = 0.0;
  };
  void assign_path_ids();

  LinkStateTableConfig config_;
  std::vector<LinkState> links_;
  std::vector<Window> windows_;
  std::vector<PathIdCollision> collisions_;
  std::vector<std::optional<uint8_t>> fixed_ids_;  // LinkIdentity::path_id, by link
  bool have_baseline_ = false;
  uint64_t last_ns_ = 0;
  uint64_t updates_ = 0;
};

}  // namespace spraynet::control
