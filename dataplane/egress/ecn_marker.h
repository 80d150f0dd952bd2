// ECN marking on an egress queue (RFC 3168 CE, RED-style on the class's queue depth), as a
// RoCEv2 switch marks for DCQCN: per traffic class, no mark at or below kmin_bytes, probability
// pmax * (q - kmin) / (kmax - kmin) between, always above kmax_bytes. Only ECN-capable packets
// (ECT(0) or ECT(1)) are marked; Not-ECT packets never are, and CE stays CE. Marking sets both
// ECN bits and patches the IPv4 header checksum incrementally (RFC 1624); the RoCEv2 ICRC masks
// the TOS byte and the checksum, so it stays valid.
//
// Deterministic: one seeded generator per marker (a port's), so that the same packets at the
// same depths draw the same marks. No clock: the caller passes the queue depth it decides on
// (at enqueue or at dequeue, `mark_at`).
#pragma once

#include <array>
#include <cstdint>
#include <random>
#include <string>

struct rte_mbuf;

namespace spraynet {

enum class EcnMarkPoint : uint8_t {
  kDequeue,  // the depth the packet leaves behind it (ns-3 HPCC's choice, the default)
  kEnqueue,  // the depth it finds on arrival
};

struct EcnClassConfig {
  bool enabled = false;
  uint64_t kmin_bytes = 100 * 1024;
  uint64_t kmax_bytes = 400 * 1024;
  double pmax = 0.2;
};

struct EcnMarkerConfig {
  std::array<EcnClassConfig, 8> classes{};
  EcnMarkPoint mark_at = EcnMarkPoint::kDequeue;
  uint64_t seed = 1;
  // Empty when valid, else "key: reason" (kmin <= kmax, pmax in (0, 1]).
  std::string check() const;
};

struct EcnClassCounters {
  uint64_t marked = 0;      // CE set by this marker
  uint64_t not_ect = 0;     // would have been marked, but not ECN-capable: left alone
  uint64_t already_ce = 0;  // would have been marked, and CE already
  uint64_t not_ipv4 = 0;    // no IPv4 header where the caller said: left alone
};

class EcnMarker {
 public:
  explicit EcnMarker(const EcnMarkerConfig& config);  // throws std::invalid_argument

  // The probability a packet of class tc is marked at this queue depth (0 for a class off).
  double mark_probability(uint8_t tc, uint64_t queue_bytes) const;

  // Decides for one packet whose IPv4 header starts at l3_offset in its first segment; marks it
  // when drawn and ECN-capable. True when this call set CE. Counts every decision to mark that
  // could not be carried out, by cause. A class >= 8 or off is never marked.
  bool on_packet(rte_mbuf* m, uint16_t l3_offset, uint8_t tc, uint64_t queue_bytes);
  // The same for an Ethernet frame whose IPv4 header is found by ipv4_offset(), read only once
  // a mark is drawn: a port below kmin (almost always) never touches the packet's data. A frame
  // that is not IPv4 is counted as not_ipv4.
  bool on_frame(rte_mbuf* m, uint8_t tc, uint64_t queue_bytes);

  const EcnMarkerConfig& config() const { return config_; }
  const EcnClassCounters& counters(uint8_t tc) const { return counters_.at(tc); }
  uint64_t total_marked() const;

 private:
  double next_uniform();  // [0, 1)
  // Whether a packet of class tc at this depth is to be marked (draws when 0 < p < 1).
  bool draw(uint8_t tc, uint64_t queue_bytes);
  // Marks the packet whose IPv4 header is at l3_offset (one draw said so), counting the cause
  // when it cannot be.
  bool mark(rte_mbuf* m, uint16_t l3_offset, uint8_t tc);

  EcnMarkerConfig config_;
  std::mt19937_64 rng_;
  std::array<EcnClassCounters, 8> counters_{};
};

// Where the IPv4 header of an Ethernet frame starts in its first segment: 14 (EtherType
// 0x0800), 18 (one 802.1Q tag, then 0x0800); -1 for anything else (another EtherType, QinQ, a
// frame too short to say). What a port's marker uses: it sees frames, not parsed packets.
int ipv4_offset(const rte_mbuf* m);

// Sets CE in the IPv4 header at `ip` (its TOS byte's two low bits) and updates the header
// checksum incrementally; returns false (and changes nothing) for a Not-ECT packet. CE stays
// CE (returns true, checksum untouched).
bool ipv4_set_ce(uint8_t* ip);

}  // namespace spraynet
