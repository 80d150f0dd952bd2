// The switch's TCAM: ternary rules with priorities (IPv4 prefixes, IP protocol under a mask,
// L4 port ranges, BTH DestQP range) deciding ecmp | spray | pin port | drop | mirror |
// quarantine, backed by DPDK's rte_acl.
//
// Like a hardware TCAM it has a size: a total capacity, a limit on spray rules and named
// partitions, each with its own capacity. A rule that does not fit is refused with a cause,
// counted and logged once per cause, and its traffic falls back to ECMP visibly: refused rules
// live in a second ("shadow") rte_acl context that is consulted only for packets no admitted
// rule matched, so every packet that a refused rule would have taken is counted, per cause.
//
// Threads. The control side (add, remove, commit, reclaim_retired, rule queries) runs on one
// thread. classify() runs on any number of lcores at once, never locks and never allocates: it
// reads the snapshot that commit() last published through an atomic pointer.
//
// Publication contract (RCU). commit() builds new rte_acl contexts from the rules as they stand,
// publishes them with one atomic pointer store, and retires the previous snapshot without
// freeing it, because an lcore may still be inside classify() on it. The owner calls
// reclaim_retired() only once every reader has passed a quiescent state after the latest
// commit() (with rte_rcu_qsbr: rte_rcu_qsbr_synchronize(), or rte_rcu_qsbr_start() after the
// commit and a successful rte_rcu_qsbr_check() on that token). reclaim_retired() frees every
// retired snapshot; a reader that holds a TcamSnapshot reference across a quiescent state
// breaks the contract.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dataplane/forwarding/tcam_decision_cache.h"
#include "dataplane/wire/packet_parser.h"

struct rte_acl_ctx;
namespace spdlog {
class logger;
}

namespace spraynet {

// What the pipeline does with a packet that a rule matches.
enum class TcamAction : uint8_t {
  kEcmp,     // route and hash as usual (a rule can pin a flow back to ECMP above broader rules)
  kSpray,    // per-packet path choice from the PPCID path id (sprayed QPs)
  kPinPort,  // send out of `port`, whatever the route says
  kDrop,     // counted drop
  kMirror,   // forward as usual AND send a copy out of `port`
  // RoCEv2 packets whose PSN % 100 < keep_percent go on as usual (kept for monitoring), the
  // rest out of `port` (the honeypot): deterministic by PSN, so 10,000 consecutive PSNs split
  // exactly. Packets without a PSN (not RoCEv2) all go to `port`.
  kQuarantine,
};
inline constexpr size_t kTcamActionCount = 6;

// "ecmp" | "spray" | "pin" | "drop" | "mirror" | "quarantine"
std::string_view to_string(TcamAction action);
std::optional<TcamAction> parse_tcam_action(std::string_view name);

// Why add() refused a rule. kNone: admitted.
enum class TcamRefusal : uint8_t {
  kNone,
  kCapacity,          // the TCAM holds `capacity` rules and all are taken
  kPartitionFull,     // the rule's partition holds its capacity
  kSprayLimit,        // `spray_rule_limit` spray rules are already admitted
  kUnknownPartition,  // the rule names a partition the config does not have
  kDuplicateId,       // a rule (admitted or refused) already has this id
  kInvalidRule,       // prefix length > 32, a range with lo > hi, DestQP beyond 24 bits
};
inline constexpr size_t kTcamRefusalCount = 7;

std::string_view to_string(TcamRefusal refusal);  // "none", "capacity", "partition_full", ...

inline constexpr uint32_t kTcamDestQpMax = 0xFFFFFF;  // DestQP is a 24-bit field
inline constexpr std::string_view kTcamDefaultPartition = "default";

// One ternary rule. IPv4 addresses in host byte order; bits below the prefix length, and
// protocol bits outside the mask, are don't-care.
struct TcamRule {
  uint32_t id = 0;
  int32_t priority = 0;  // higher wins; among equal priorities the lower id wins
  std::string partition{kTcamDefaultPartition};

  uint32_t src_ip = 0;
  uint8_t src_prefix_len = 0;  // 0..32; 0 = any source
  uint32_t dst_ip = 0;
  uint8_t dst_prefix_len = 0;  // 0..32; 0 = any destination
  uint8_t ip_proto = 0;
  uint8_t ip_proto_mask = 0;  // 0 = any protocol, 0xFF = exactly ip_proto
  uint16_t src_port_lo = 0;   // inclusive ranges; packets without L4 ports carry port 0
  uint16_t src_port_hi = 0xFFFF;
  uint16_t dst_port_lo = 0;
  uint16_t dst_port_hi = 0xFFFF;
  // Only RoCEv2 packets carry a DestQP; every other packet matches as DestQP 0.
  uint32_t dest_qp_lo = 0;
  uint32_t dest_qp_hi = kTcamDestQpMax;

  TcamAction action = TcamAction::kEcmp;
  uint16_t port = 0;         // egress port for kPinPort, kMirror and kQuarantine; ignored otherwise
  uint8_t keep_percent = 5;  // kQuarantine: 0..100, PSN % 100 below it stays on the normal path
};

struct TcamPartitionConfig {
  std::string name;
  uint32_t capacity = 0;
};

// Three limits, all enforced: a rule is admitted only if it fits each one. They are configured
// independently on purpose: a vendor's spray-rule figure (e.g. 32768) can exceed what the
// hardware holds (16384), and then it is the capacity that refuses rules, which the refusal
// cause makes plain.
struct TcamConfig {
  uint32_t capacity = 16384;
  uint32_t spray_rule_limit = 16384;
  // Partitions rules may name. "default" always exists; unless listed here its capacity is
  // `capacity`.
  std::vector<TcamPartitionConfig> partitions;
};

// The decision for one packet.
struct TcamMatch {
  bool matched = false;   // an admitted rule matched: apply `action`
  bool fallback = false;  // no admitted rule matched but a refused one would have: ECMP
  uint32_t rule_id = 0;   // the matching rule (admitted, or the refused one when fallback)
  TcamAction action = TcamAction::kEcmp;  // kEcmp whenever !matched
  uint16_t port = 0;
  uint8_t keep_percent = 0;  // kQuarantine only
};

// A copy of the TCAM's counters at one moment.
struct TcamCounters {
  uint64_t classified_packets = 0;     // IPv4 packets looked up
  uint64_t not_ipv4_packets = 0;       // not looked up (no IPv4 header): reported as no match
  uint64_t matched_packets = 0;        // matched an admitted rule
  uint64_t fallback_ecmp_packets = 0;  // matched only a refused rule: sent by ECMP instead
  std::array<uint64_t, kTcamRefusalCount> fallback_packets_by_cause{};  // by TcamRefusal
  std::array<uint64_t, kTcamRefusalCount> refused_rules_by_cause{};     // add() refusals
  uint64_t classify_errors = 0;  // rte_acl_classify failed: the burst is reported as no match
  uint64_t commits = 0;
  uint64_t commit_failures = 0;  // rte_acl create/add/build failed: the old snapshot stays
};

// What one commit() built: immutable once published. Readers get it from Tcam::current() and
// pass it to Tcam::classify(); only Tcam creates and frees it.
class TcamSnapshot {
 public:
  ~TcamSnapshot();
  TcamSnapshot(const TcamSnapshot&) = delete;
  TcamSnapshot& operator=(const TcamSnapshot&) = delete;

  uint64_t generation() const { return generation_; }  // 0 before the first commit
  // This snapshot's bytes: the object, its entries and its rte_acl contexts (estimated, see
  // Tcam::acl_context_bytes).
  uint64_t memory_bytes() const;
  size_t admitted_rules() const { return admitted_.entries.size(); }
  size_t refused_rules() const { return shadow_.entries.size(); }

 private:
  friend class Tcam;

  // What a rte_acl result (userdata = index + 1) stands for.
  struct Entry {
    uint32_t rule_id = 0;
    TcamAction action = TcamAction::kEcmp;
    uint16_t port = 0;
    uint8_t keep_percent = 0;
    TcamRefusal refusal = TcamRefusal::kNone;
    // Shared with Tcam so that counts survive rebuilds and outlive a removed rule's snapshots.
    std::shared_ptr<std::atomic<uint64_t>> hits;
    // What classify() answers when this admitted rule matches, made once here rather than
    // field by field per packet.
    TcamMatch match;
  };
  struct Table {
    rte_acl_ctx* acl = nullptr;  // nullptr when there are no rules: everything misses
    std::vector<Entry> entries;
  };

  TcamSnapshot() = default;

  uint64_t generation_ = 0;
  Table admitted_;
  Table shadow_;
};

class Tcam {
 public:
  // Throws std::invalid_argument on a config no TCAM can have (a partition without a name or
  // listed twice, a capacity above what rte_acl can rank). `logger` may be null.
  explicit Tcam(TcamConfig config, std::shared_ptr<spdlog::logger> logger = nullptr);
  ~Tcam();  // readers must have stopped
  Tcam(const Tcam&) = delete;
  Tcam& operator=(const Tcam&) = delete;

  // Control side. add() and remove() take effect at the next commit().
  // Returns kNone when admitted. A rule refused for lack of room or for an unknown partition is
  // kept as refused (its traffic counts as ECMP fallback) until remove(id); a refused rule is
  // not promoted when room frees up: remove it and add it again. Invalid and duplicate rules
  // are not kept at all.
  TcamRefusal add(const TcamRule& rule);
  bool remove(uint32_t id);  // false when no rule has this id
  // Builds and publishes a new snapshot; false when rte_acl could not build it (counted and
  // logged; the previous snapshot stays current and the rules stay pending).
  bool commit();
  void reclaim_retired();  // see the publication contract above
  size_t retired_snapshots() const { return retired_.size(); }

  // Rules as added, admitted or not (not necessarily committed yet).
  size_t admitted_rules() const { return admitted_count_; }
  size_t refused_rules() const { return rules_.size() - admitted_count_; }
  size_t spray_rules() const { return spray_count_; }
  // nullopt when the config has no such partition.
  std::optional<uint32_t> partition_used(std::string_view name) const;
  // kNone for an admitted rule, its cause for a refused one, nullopt for an unknown id.
  std::optional<TcamRefusal> refusal_of(uint32_t id) const;
  // Packets the rule matched since it was added: applied when admitted, fallen back to ECMP
  // when refused. 0 for an unknown id.
  uint64_t rule_hits(uint32_t id) const;
  const TcamConfig& config() const { return config_; }
  // The rte_acl classify method the contexts use ("avx2", "avx512x32", "sse", "scalar", ...):
  // the widest the CPU and EAL's SIMD cap allow; "none" before a context was built.
  std::string_view classify_method() const { return classify_method_; }

  // Fast path. The snapshot to classify against; hold it no longer than one burst.
  const TcamSnapshot& current() const { return *current_.load(std::memory_order_acquire); }
  void classify(const ParsedPacket* const* pkts, uint16_t n, TcamMatch* out,
                TcamDecisionCache* cache = nullptr) const {
    classify(current(), pkts, n, out, cache);
  }
  // One decision per packet, out[i] for pkts[i]. Packets without an IPv4 header never match.
  // With a cache (the caller's own: see tcam_decision_cache.h), keys it holds for this
  // snapshot skip rte_acl; decisions and every counter are the same either way.
  void classify(const TcamSnapshot& snapshot, const ParsedPacket* const* pkts, uint16_t n,
                TcamMatch* out, TcamDecisionCache* cache = nullptr) const;

  TcamCounters counters() const;  // any thread
  // Bytes the TCAM holds (control side, readers stopped or not): this object, its rules, and
  // every snapshot not reclaimed (the current and the retired ones): their entries and rte_acl
  // contexts. rte_acl has no size query, so a context counts as
  // acl_context_bytes(rules, rule_size) (see tcam.cc for how that was measured).
  uint64_t memory_bytes() const;
  // What one rte_acl context of `rules` rules of rule_size bytes takes from the rte_malloc heap
  // once built: the context with its copy of the rules, and the run-time tables.
  static uint64_t acl_context_bytes(size_t rules, size_t rule_size);

 private:
  struct StoredRule {
    TcamRule rule;
    TcamRefusal refusal = TcamRefusal::kNone;
    std::shared_ptr<std::atomic<uint64_t>> hits;
  };
  struct PartitionUse {
    uint32_t capacity = 0;
    uint32_t used = 0;
  };
  // Updated by classify() on every lcore: statistics only, no decision depends on them.
  struct LiveCounters {
    std::atomic<uint64_t> classified_packets{0};
    std::atomic<uint64_t> not_ipv4_packets{0};
    std::atomic<uint64_t> matched_packets{0};
    std::atomic<uint64_t> fallback_ecmp_packets{0};
    std::array<std::atomic<uint64_t>, kTcamRefusalCount> fallback_packets_by_cause{};
    std::atomic<uint64_t> classify_errors{0};
    // Written by the control thread only; atomic so that counters() may run elsewhere.
    std::array<std::atomic<uint64_t>, kTcamRefusalCount> refused_rules_by_cause{};
    std::atomic<uint64_t> commits{0};
    std::atomic<uint64_t> commit_failures{0};
  };

  TcamRefusal check_room(const TcamRule& rule) const;
  void count_refusal(const TcamRule& rule, TcamRefusal cause, std::string_view detail);
  bool build_table(const std::vector<const StoredRule*>& rules, char kind,
                   TcamSnapshot::Table& table);
  std::string next_context_name(char kind);

  TcamConfig config_;
  std::shared_ptr<spdlog::logger> logger_;

  std::map<uint32_t, StoredRule> rules_;  // by id: admitted and refused
  std::map<std::string, PartitionUse, std::less<>> partitions_;
  size_t admitted_count_ = 0;
  size_t spray_count_ = 0;
  std::array<bool, kTcamRefusalCount> refusal_logged_{};
  uint64_t contexts_created_ = 0;
  std::string_view classify_method_ = "none";  // control side only  // makes rte_acl context names unique (see next_context_name)

  std::atomic<TcamSnapshot*> current_;
  std::vector<std::unique_ptr<TcamSnapshot>> retired_;
  mutable LiveCounters live_;
};

}  // namespace spraynet
