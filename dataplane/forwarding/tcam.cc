#include "dataplane/forwarding/tcam.h"

#include <rte_acl.h>
#include <rte_byteorder.h>
#include <rte_errno.h>
#include <rte_memory.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <bit>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "dataplane/memory_usage.h"
#include "dataplane/wire/flow_key.h"

namespace spraynet {

namespace {

// The rte_acl input for one packet. rte_acl reads the first field as one byte, then every
// further field from 4-byte input words; rules are given in host byte order but the input is
// read in network byte order, so every multi-byte field here is big-endian.
struct AclKey {
  uint8_t ip_proto;
  uint8_t unused[3];  // pads the one-byte first field out to the first input word
  uint32_t src_ip;
  uint32_t dst_ip;
  uint16_t src_port;  // src and dst port share one input word
  uint16_t dst_port;
  uint32_t dest_qp;
};
static_assert(sizeof(AclKey) == 20, "AclKey is read by rte_acl at fixed offsets");

// Field indexes into an AclRule; also the order of the field definitions.
enum AclField : uint8_t { kProto, kSrcIp, kDstIp, kSrcPort, kDstPort, kDestQp, kAclFieldCount };

RTE_ACL_RULE_DEF(AclRule, kAclFieldCount);
static_assert(sizeof(AclRule) == RTE_ACL_RULE_SZ(kAclFieldCount), "rule size rte_acl expects");

rte_acl_config make_acl_config() {
  rte_acl_config cfg{};
  cfg.num_categories = 1;
  cfg.num_fields = kAclFieldCount;
  cfg.max_size = 0;  // no limit on the run-time tables: let rte_acl minimise their size
  auto def = [&cfg](AclField f, uint8_t type, uint8_t size, uint8_t input, size_t offset) {
    cfg.defs[f] = rte_acl_field_def{type, size, static_cast<uint8_t>(f), input,
                                    static_cast<uint32_t>(offset)};
  };
  // Protocol under a bitmask; address prefixes as MASK (value + prefix length); ports and
  // DestQP as inclusive RANGEs.
  def(kProto, RTE_ACL_FIELD_TYPE_BITMASK, 1, 0, offsetof(AclKey, ip_proto));
  def(kSrcIp, RTE_ACL_FIELD_TYPE_MASK, 4, 1, offsetof(AclKey, src_ip));
  def(kDstIp, RTE_ACL_FIELD_TYPE_MASK, 4, 2, offsetof(AclKey, dst_ip));
  def(kSrcPort, RTE_ACL_FIELD_TYPE_RANGE, 2, 3, offsetof(AclKey, src_port));
  def(kDstPort, RTE_ACL_FIELD_TYPE_RANGE, 2, 3, offsetof(AclKey, dst_port));
  def(kDestQp, RTE_ACL_FIELD_TYPE_RANGE, 4, 4, offsetof(AclKey, dest_qp));
  return cfg;
}

uint32_t prefix_mask(uint8_t len) {
  return len == 0 ? 0 : ~uint32_t{0} << (32 - len);
}

// Why a rule cannot be compiled at all, or nullopt.
std::optional<std::string> invalid_reason(const TcamRule& r) {
  if (r.src_prefix_len > 32) return fmt::format("src prefix length {} > 32", r.src_prefix_len);
  if (r.dst_prefix_len > 32) return fmt::format("dst prefix length {} > 32", r.dst_prefix_len);
  if (r.src_port_lo > r.src_port_hi) {
    return fmt::format("src port range {}-{} has lo > hi", r.src_port_lo, r.src_port_hi);
  }
  if (r.dst_port_lo > r.dst_port_hi) {
    return fmt::format("dst port range {}-{} has lo > hi", r.dst_port_lo, r.dst_port_hi);
  }
  if (r.dest_qp_hi > kTcamDestQpMax || r.dest_qp_lo > kTcamDestQpMax) {
    return fmt::format("DestQP range {:#x}-{:#x} exceeds 24 bits", r.dest_qp_lo, r.dest_qp_hi);
  }
  if (r.dest_qp_lo > r.dest_qp_hi) {
    return fmt::format("DestQP range {:#x}-{:#x} has lo > hi", r.dest_qp_lo, r.dest_qp_hi);
  }
  if (r.action == TcamAction::kQuarantine && r.keep_percent > 100) {
    return fmt::format("quarantine keep_percent {} > 100", r.keep_percent);
  }
  return std::nullopt;
}

AclRule to_acl_rule(const TcamRule& r, uint32_t rank) {
  AclRule a{};  // zeroed: rte_acl reads the whole 8-byte unions for MASK prefix lengths
  a.data.category_mask = 1;
  a.data.priority = static_cast<int32_t>(rank);
  a.data.userdata = rank;  // rank = entry index + 1; 0 is rte_acl's "no match"
  a.field[kProto].value.u8 = r.ip_proto & r.ip_proto_mask;
  a.field[kProto].mask_range.u8 = r.ip_proto_mask;
  a.field[kSrcIp].value.u32 = r.src_ip & prefix_mask(r.src_prefix_len);
  a.field[kSrcIp].mask_range.u32 = r.src_prefix_len;
  a.field[kDstIp].value.u32 = r.dst_ip & prefix_mask(r.dst_prefix_len);
  a.field[kDstIp].mask_range.u32 = r.dst_prefix_len;
  a.field[kSrcPort].value.u16 = r.src_port_lo;
  a.field[kSrcPort].mask_range.u16 = r.src_port_hi;
  a.field[kDstPort].value.u16 = r.dst_port_lo;
  a.field[kDstPort].mask_range.u16 = r.dst_port_hi;
  a.field[kDestQp].value.u32 = r.dest_qp_lo;
  a.field[kDestQp].mask_range.u32 = r.dest_qp_hi;
  return a;
}

// The kinds with an IPv4 header are contiguous: one subtraction and one compare.
static_assert(static_cast<int>(PacketKind::kTcp) == static_cast<int>(PacketKind::kIpv4) + 1 &&
              static_cast<int>(PacketKind::kUdp) == static_cast<int>(PacketKind::kIpv4) + 2 &&
              static_cast<int>(PacketKind::kRoce) == static_cast<int>(PacketKind::kIpv4) + 3);
bool has_ipv4_header(const ParsedPacket* p) {
  return p != nullptr && static_cast<uint8_t>(static_cast<uint8_t>(p->kind) -
                                              static_cast<uint8_t>(PacketKind::kIpv4)) <= 3;
}

// Always inlined: called per packet, and out of line its 20-byte result went through memory.
// Whole 4-byte words, as rte_acl reads them: the protocol word's pad bytes are zero (the
// decision cache compares keys as words), and the two ports, big-endian, share one word.
// __builtin_bswap rather than rte_cpu_to_be_*: DPDK's x86 versions are volatile asm (xchgb for
// 16 bits) that the compiler can neither merge nor schedule.
static_assert(std::endian::native == std::endian::little, "make_acl_key swaps to network order");
[[gnu::always_inline]] inline AclKey make_acl_key(const ParsedPacket& p) {
  // The flow key zeroes ports of port-less packets and DestQP of non-RoCE ones.
  const FlowKey k = make_flow_key(p, /*with_dest_qp=*/true);
  const uint32_t proto_word = k.proto();  // little-endian: the protocol is the first byte
  // Both ports in one load: swapping the four bytes also swaps the two ports, which the
  // rotation puts back (three instructions where two 16-bit swaps took nine).
  static_assert(offsetof(FlowKey, dst_port) == offsetof(FlowKey, src_port) + 2);
  uint32_t host_ports;
  std::memcpy(&host_ports, reinterpret_cast<const char*>(&k) + offsetof(FlowKey, src_port), 4);
  const uint32_t ports = std::rotl(__builtin_bswap32(host_ports), 16);
  static_assert(offsetof(AclKey, ip_proto) == 0 &&
                offsetof(AclKey, dst_port) == offsetof(AclKey, src_port) + 2);
  AclKey key;
  std::memcpy(&key, &proto_word, 4);
  key.src_ip = __builtin_bswap32(k.src_ip);
  key.dst_ip = __builtin_bswap32(k.dst_ip);
  std::memcpy(reinterpret_cast<char*>(&key) + offsetof(AclKey, src_port), &ports, 4);
  key.dest_qp = __builtin_bswap32(k.dest_qp());
  return key;
}

// The decision cache's key: the flow key make_acl_key reads, whole (16 bytes, no padding), so
// that two packets with one cache key have one rte_acl key.
[[gnu::always_inline]] inline TcamDecisionCache::Key decision_key(const ParsedPacket& p) {
  const FlowKey k = make_flow_key(p, /*with_dest_qp=*/true);
  static_assert(sizeof(FlowKey) == sizeof(TcamDecisionCache::Key));
  TcamDecisionCache::Key key;
  std::memcpy(&key, &k, sizeof k);
  return key;
}

TcamConfig validated(TcamConfig config) {
  // rte_acl needs one distinct priority per rule, within [1, RTE_ACL_MAX_PRIORITY].
  if (config.capacity > static_cast<uint32_t>(RTE_ACL_MAX_PRIORITY)) {
    throw std::invalid_argument(
        fmt::format("tcam: capacity {} exceeds the {} rules rte_acl can rank", config.capacity,
                    RTE_ACL_MAX_PRIORITY));
  }
  for (size_t i = 0; i < config.partitions.size(); ++i) {
    const std::string& name = config.partitions[i].name;
    if (name.empty()) throw std::invalid_argument("tcam: a partition has no name");
    for (size_t j = 0; j < i; ++j) {
      if (config.partitions[j].name == name) {
        throw std::invalid_argument(fmt::format("tcam: partition '{}' listed twice", name));
      }
    }
  }
  return config;
}

// Packets looked up per rte_acl_classify call: bounds the stack arrays of classify().
constexpr uint16_t kClassifyChunk = 64;

}  // namespace

std::string_view to_string(TcamAction action) {
  switch (action) {
    case TcamAction::kEcmp:
      return "ecmp";
    case TcamAction::kSpray:
      return "spray";
    case TcamAction::kPinPort:
      return "pin";
    case TcamAction::kDrop:
      return "drop";
    case TcamAction::kMirror:
      return "mirror";
    case TcamAction::kQuarantine:
      return "quarantine";
  }
  return "unknown";
}

std::optional<TcamAction> parse_tcam_action(std::string_view name) {
  for (size_t i = 0; i < kTcamActionCount; ++i) {
    const auto action = static_cast<TcamAction>(i);
    if (to_string(action) == name) return action;
  }
  return std::nullopt;
}

std::string_view to_string(TcamRefusal refusal) {
  switch (refusal) {
    case TcamRefusal::kNone:
      return "none";
    case TcamRefusal::kCapacity:
      return "capacity";
    case TcamRefusal::kPartitionFull:
      return "partition_full";
    case TcamRefusal::kSprayLimit:
      return "spray_limit";
    case TcamRefusal::kUnknownPartition:
      return "unknown_partition";
    case TcamRefusal::kDuplicateId:
      return "duplicate_id";
    case TcamRefusal::kInvalidRule:
      return "invalid_rule";
  }
  return "unknown";
}

TcamSnapshot::~TcamSnapshot() {
  rte_acl_free(admitted_.acl);  // both accept nullptr
  rte_acl_free(shadow_.acl);
}

Tcam::Tcam(TcamConfig config, std::shared_ptr<spdlog::logger> logger)
    : config_(validated(std::move(config))),
      logger_(std::move(logger)),
      current_(new TcamSnapshot()) {
  for (const TcamPartitionConfig& p : config_.partitions) {
    partitions_.emplace(p.name, PartitionUse{p.capacity, 0});
  }
  partitions_.try_emplace(std::string(kTcamDefaultPartition), PartitionUse{config_.capacity, 0});
}

Tcam::~Tcam() {
  delete current_.load();
}

TcamRefusal Tcam::check_room(const TcamRule& rule) const {
  const auto partition = partitions_.find(rule.partition);
  if (partition == partitions_.end()) return TcamRefusal::kUnknownPartition;
  // The hardware's size first: when a configured figure promises more than that, it is the
  // capacity that refuses, and the cause says so.
  if (admitted_count_ >= config_.capacity) return TcamRefusal::kCapacity;
  if (partition->second.used >= partition->second.capacity) return TcamRefusal::kPartitionFull;
  if (rule.action == TcamAction::kSpray && spray_count_ >= config_.spray_rule_limit) {
    return TcamRefusal::kSprayLimit;
  }
  return TcamRefusal::kNone;
}

void Tcam::count_refusal(const TcamRule& rule, TcamRefusal cause, std::string_view detail) {
  const auto index = static_cast<size_t>(cause);
  live_.refused_rules_by_cause[index].fetch_add(1, std::memory_order_relaxed);
  if (refusal_logged_[index] || logger_ == nullptr) return;
  refusal_logged_[index] = true;
  // Rules refused for lack of room (or an unknown partition) are kept in the shadow table;
  // invalid and duplicate ones are dropped outright.
  const bool kept = cause != TcamRefusal::kInvalidRule && cause != TcamRefusal::kDuplicateId;
  logger_->warn("tcam: rule {} refused ({}): {}; {}. Further {} refusals are counted, not logged",
                rule.id, to_string(cause), detail,
                kept ? "its traffic falls back to ECMP" : "the rule is not kept", to_string(cause));
}

TcamRefusal Tcam::add(const TcamRule& rule) {
  if (const auto reason = invalid_reason(rule)) {
    count_refusal(rule, TcamRefusal::kInvalidRule, *reason);
    return TcamRefusal::kInvalidRule;
  }
  if (rules_.contains(rule.id)) {
    count_refusal(rule, TcamRefusal::kDuplicateId, "a rule with this id exists");
    return TcamRefusal::kDuplicateId;
  }
  const TcamRefusal cause = check_room(rule);
  rules_.emplace(rule.id, StoredRule{rule, cause, std::make_shared<std::atomic<uint64_t>>(0)});
  switch (cause) {
    case TcamRefusal::kNone:
      ++admitted_count_;
      ++partitions_.find(rule.partition)->second.used;
      if (rule.action == TcamAction::kSpray) ++spray_count_;
      break;
    case TcamRefusal::kUnknownPartition:
      count_refusal(rule, cause, fmt::format("no partition '{}' is configured", rule.partition));
      break;
    case TcamRefusal::kCapacity:
      count_refusal(rule, cause, fmt::format("the TCAM holds {} rules", config_.capacity));
      break;
    case TcamRefusal::kPartitionFull:
      count_refusal(rule, cause,
                    fmt::format("partition '{}' holds {} rules", rule.partition,
                                partitions_.find(rule.partition)->second.capacity));
      break;
    case TcamRefusal::kSprayLimit:
      count_refusal(rule, cause,
                    fmt::format("spray_rule_limit is {} rules", config_.spray_rule_limit));
      break;
    case TcamRefusal::kDuplicateId:
    case TcamRefusal::kInvalidRule:
      break;  // handled above
  }
  return cause;
}

bool Tcam::remove(uint32_t id) {
  const auto it = rules_.find(id);
  if (it == rules_.end()) return false;
  const StoredRule& stored = it->second;
  if (stored.refusal == TcamRefusal::kNone) {
    --admitted_count_;
    --partitions_.find(stored.rule.partition)->second.used;
    if (stored.rule.action == TcamAction::kSpray) --spray_count_;
  }
  rules_.erase(it);
  return true;
}

std::string Tcam::next_context_name(char kind) {
  // rte_acl_create() hands back an existing context of the same name instead of failing, so
  // every context needs a name of its own in the process: this object's address (unique among
  // live Tcams, whose contexts all die with them) and a count of the contexts it has created.
  char name[RTE_ACL_NAMESIZE];
  const int len = std::snprintf(name, sizeof name, "tcam%" PRIxPTR "%c%" PRIx64,
                                reinterpret_cast<uintptr_t>(this), kind, contexts_created_++);
  if (len < 0 || static_cast<size_t>(len) >= sizeof name) return {};
  return name;
}

bool Tcam::build_table(const std::vector<const StoredRule*>& rules, char kind,
                       TcamSnapshot::Table& table) {
  if (rules.empty()) return true;  // rte_acl cannot build an empty context: a null one misses
  std::vector<const StoredRule*> ranked(rules);
  // rte_acl picks the highest priority and leaves ties undefined, so each rule gets a rank of
  // its own: ascending by priority, and among equals the lower id ranks higher.
  std::sort(ranked.begin(), ranked.end(), [](const StoredRule* a, const StoredRule* b) {
    if (a->rule.priority != b->rule.priority) return a->rule.priority < b->rule.priority;
    return a->rule.id > b->rule.id;
  });
  if (ranked.size() > static_cast<size_t>(RTE_ACL_MAX_PRIORITY)) {
    if (logger_) logger_->error("tcam: {} rules are more than rte_acl can rank", ranked.size());
    return false;
  }
  std::vector<AclRule> acl_rules;
  acl_rules.reserve(ranked.size());
  table.entries.reserve(ranked.size());
  for (const StoredRule* s : ranked) {
    acl_rules.push_back(to_acl_rule(s->rule, static_cast<uint32_t>(table.entries.size() + 1)));
    TcamSnapshot::Entry e{s->rule.id, s->rule.action, s->rule.port, s->rule.keep_percent,
                          s->refusal, s->hits,        TcamMatch{}};
    e.match = TcamMatch{true, false, e.rule_id, e.action, e.port, e.keep_percent};
    table.entries.push_back(std::move(e));
  }

  const std::string name = next_context_name(kind);
  if (name.empty() || rte_acl_find_existing(name.c_str()) != nullptr) {
    if (logger_) logger_->error("tcam: no unique rte_acl context name ('{}')", name);
    return false;
  }
  rte_acl_param param{};
  param.name = name.c_str();
  param.socket_id = SOCKET_ID_ANY;
  param.rule_size = RTE_ACL_RULE_SZ(kAclFieldCount);
  param.max_rule_num = static_cast<uint32_t>(acl_rules.size());
  table.acl = rte_acl_create(&param);  // freed by ~TcamSnapshot, also on failure below
  if (table.acl == nullptr) {
    if (logger_)
      logger_->error("tcam: rte_acl_create({}) failed: {}", name, rte_strerror(rte_errno));
    return false;
  }
  int rc = rte_acl_add_rules(table.acl, reinterpret_cast<const rte_acl_rule*>(acl_rules.data()),
                             static_cast<uint32_t>(acl_rules.size()));
  if (rc == 0) {
    const rte_acl_config cfg = make_acl_config();
    rc = rte_acl_build(table.acl, &cfg);
  }
  if (rc != 0) {
    if (logger_) {
      logger_->error("tcam: building {} rules into rte_acl context {} failed: {}", acl_rules.size(),
                     name, rte_strerror(-rc));
    }
    return false;
  }
  // The widest classify method this CPU has and EAL allows (--force-max-simd-bitwidth=512 lets
  // the AVX-512 ones run; DPDK's default cap is 256 bits), set explicitly so that it is known.
  static constexpr std::pair<enum rte_acl_classify_alg, const char*> kMethods[] = {
      {RTE_ACL_CLASSIFY_AVX512X32, "avx512x32"}, {RTE_ACL_CLASSIFY_AVX512X16, "avx512x16"},
      {RTE_ACL_CLASSIFY_AVX2, "avx2"},           {RTE_ACL_CLASSIFY_NEON, "neon"},
      {RTE_ACL_CLASSIFY_ALTIVEC, "altivec"},     {RTE_ACL_CLASSIFY_SSE, "sse"},
      {RTE_ACL_CLASSIFY_SCALAR, "scalar"}};
  for (const auto& [alg, method] : kMethods) {
    if (rte_acl_set_ctx_classify(table.acl, alg) != 0) continue;
    if (classify_method_ != method && logger_) {
      logger_->info("tcam: rte_acl classifies bursts with its {} method", method);
    }
    classify_method_ = method;
    break;
  }
  return true;
}

bool Tcam::commit() {
  std::vector<const StoredRule*> admitted;
  std::vector<const StoredRule*> refused;
  admitted.reserve(admitted_count_);
  for (const auto& [id, stored] : rules_) {
    (stored.refusal == TcamRefusal::kNone ? admitted : refused).push_back(&stored);
  }
  std::unique_ptr<TcamSnapshot> next(new TcamSnapshot());
  next->generation_ = current_.load(std::memory_order_relaxed)->generation_ + 1;
  if (!build_table(admitted, 'a', next->admitted_) || !build_table(refused, 's', next->shadow_)) {
    live_.commit_failures.fetch_add(1, std::memory_order_relaxed);
    if (logger_) {
      logger_->error("tcam: commit of {} rules ({} refused) failed; generation {} stays in use",
                     admitted.size(), refused.size(), next->generation_ - 1);
    }
    return false;
  }
  // Release: a reader that sees the new pointer sees the fully built snapshot behind it.
  TcamSnapshot* old = current_.exchange(next.release(), std::memory_order_acq_rel);
  retired_.emplace_back(old);
  live_.commits.fetch_add(1, std::memory_order_relaxed);
  if (logger_) {
    logger_->debug("tcam: generation {} published: {} rules, {} refused in the shadow",
                   old->generation_ + 1, admitted.size(), refused.size());
  }
  return true;
}

// rte_acl has no size query, and a heap delta around each build would not do either: another
// thread allocating from the rte_malloc heap meanwhile (a second fabric_emu job, a mempool
// growing) would be counted too, and a report must not depend on threads. So a context is
// counted by its rules: rte_acl_create's block is the context (about 1 KiB) and max_rule_num
// rule copies; rte_acl_build's run-time tables were measured (rte_malloc_get_socket_stats
// before and after, one thread, DPDK 22.11, this TCAM's fields) at 9.2 KiB for one spray rule
// (/32 source and destination, UDP port, one DestQP) to 411 KiB for 1024 of them: 8.75 KiB +
// 392 bytes a rule, within 2% over that range. Rules with wide ranges can build larger tables.
uint64_t Tcam::acl_context_bytes(size_t rules, size_t rule_size) {
  if (rules == 0) return 0;  // no context is made for an empty table
  constexpr uint64_t kContext = 1024;
  constexpr uint64_t kRuntimeBase = 8960;
  constexpr uint64_t kRuntimePerRule = 392;
  return kContext + rules * rule_size + kRuntimeBase + kRuntimePerRule * rules;
}

uint64_t TcamSnapshot::memory_bytes() const {
  const size_t rule_size = RTE_ACL_RULE_SZ(kAclFieldCount);
  uint64_t b = sizeof(*this);
  for (const Table* t : {&admitted_, &shadow_}) {
    b += capacity_bytes(t->entries);
    if (t->acl != nullptr) b += Tcam::acl_context_bytes(t->entries.size(), rule_size);
  }
  return b;
}

uint64_t Tcam::memory_bytes() const {
  uint64_t b = sizeof(*this);
  // Each rule: its map node, its hit counter (make_shared: the control block with the atomic
  // in it) and a partition name too long for std::string's own buffer.
  constexpr uint64_t kSharedCounter = 2 * sizeof(void*) + 2 * sizeof(uint32_t) + sizeof(uint64_t);
  for (const auto& [id, stored] : rules_) {
    b += rb_tree_node_bytes<std::pair<const uint32_t, StoredRule>>() + kSharedCounter;
    if (stored.rule.partition.capacity() > 15) b += stored.rule.partition.capacity() + 1;
  }
  for (const auto& [name, use] : partitions_) {
    b += rb_tree_node_bytes<std::pair<const std::string, PartitionUse>>();
    if (name.capacity() > 15) b += name.capacity() + 1;
  }
  b += current().memory_bytes();
  b += capacity_bytes(retired_);
  for (const auto& r : retired_) b += r->memory_bytes();
  return b;
}

void Tcam::reclaim_retired() {
  retired_.clear();
}

std::optional<uint32_t> Tcam::partition_used(std::string_view name) const {
  const auto it = partitions_.find(name);
  if (it == partitions_.end()) return std::nullopt;
  return it->second.used;
}

std::optional<TcamRefusal> Tcam::refusal_of(uint32_t id) const {
  const auto it = rules_.find(id);
  if (it == rules_.end()) return std::nullopt;
  return it->second.refusal;
}

uint64_t Tcam::rule_hits(uint32_t id) const {
  const auto it = rules_.find(id);
  return it == rules_.end() ? 0 : it->second.hits->load(std::memory_order_relaxed);
}

namespace {
// rte_acl's results are rule ranks (1-based); this one marks a key whose lookup failed: no rank
// reaches it (ranks are at most RTE_ACL_MAX_PRIORITY).
constexpr uint32_t kUnanswered = UINT32_MAX;
static_assert(RTE_ACL_MAX_PRIORITY < kUnanswered);

// What the decision cache holds for a key: the admitted rule's rank when one matched (what
// classify applies), else the refused rule's rank | kShadowDecision when one matched (ECMP
// fallback), else 0 (no rule). kUnansweredDecision: the lookup failed (no match, not cached).
constexpr uint32_t kShadowDecision = 1u << 30;
static_assert(RTE_ACL_MAX_PRIORITY < kShadowDecision &&
              (kShadowDecision | RTE_ACL_MAX_PRIORITY) <= TcamDecisionCache::kMaxValue);
constexpr uint32_t kUnansweredDecision = TcamDecisionCache::kMiss;
uint32_t encode_decision(uint32_t admitted, uint32_t shadow, size_t admitted_size,
                         size_t shadow_size) {
  if (admitted - 1 < admitted_size) return admitted;  // 0 is no rule; out of range no rule either
  if (shadow - 1 < shadow_size) return shadow | kShadowDecision;
  return 0;
}

// Rule hit counts for one classify() call, added to the rules' shared atomics when the rule
// changes and once at the end: a burst's packets mostly hit the same rule (one flow, one
// catch-all), and an atomic add per packet (a locked instruction, the counter's cache line
// bouncing between lcores) cost more than the rest of the bookkeeping. Totals are exact.
class HitRun {
 public:
  HitRun() = default;
  HitRun(const HitRun&) = delete;
  HitRun& operator=(const HitRun&) = delete;
  ~HitRun() { flush(); }
  void hit(std::atomic<uint64_t>* counter) {
    if (counter != counter_) {
      flush();
      counter_ = counter;
    }
    ++n_;
  }

 private:
  void flush() {
    if (n_ != 0) counter_->fetch_add(n_, std::memory_order_relaxed);
    n_ = 0;
  }
  std::atomic<uint64_t>* counter_ = nullptr;
  uint64_t n_ = 0;
};
}  // namespace

void Tcam::classify(const TcamSnapshot& snapshot, const ParsedPacket* const* pkts, uint16_t n,
                    TcamMatch* out, TcamDecisionCache* cache) const {
  uint64_t not_ipv4 = 0;
  uint64_t classified = 0;
  uint64_t matched = 0;
  uint64_t fallback = 0;
  uint64_t errors = 0;
  std::array<uint64_t, kTcamRefusalCount> fallback_by_cause{};
  // Plain pointers: through the vectors, every store to `out` made the compiler reload them.
  const TcamSnapshot::Entry* const admitted = snapshot.admitted_.entries.data();
  const TcamSnapshot::Entry* const shadow = snapshot.shadow_.entries.data();
  const size_t admitted_size = snapshot.admitted_.entries.size();
  const size_t shadow_size = snapshot.shadow_.entries.size();
  // Before the first commit, or with no rules, nothing is looked up and nothing is cached.
  if (snapshot.admitted_.acl == nullptr && snapshot.shadow_.acl == nullptr) cache = nullptr;
  // Decisions cached for another TCAM or under another snapshot are forgotten first.
  if (cache != nullptr) cache->bind(this, snapshot.generation_);
  // A cache set aside (it did not hit enough: more flows than it holds) is told what went by.
  TcamDecisionCache* const resting = cache != nullptr && !cache->in_use() ? cache : nullptr;
  if (resting != nullptr) cache = nullptr;
  uint32_t cache_lookups = 0, cache_hits = 0;
  HitRun hits;

  constexpr TcamMatch kNoMatch{};

  for (uint16_t base = 0; base < n; base += kClassifyChunk) {
    const uint16_t count = std::min<uint16_t>(kClassifyChunk, n - base);
    if (cache == nullptr) {
      // Without a cache every looked-up key is asked of rte_acl, in order: its results go
      // straight to the answers, one pass over the admitted results and one over the shadow's.
      AclKey keys[kClassifyChunk];
      uint16_t slot[kClassifyChunk];        // out index of each looked-up key
      const uint8_t* data[kClassifyChunk];  // the keys rte_acl is asked about
      uint16_t asked[kClassifyChunk];       // for the shadow lookup: their indexes into keys
      uint32_t results[kClassifyChunk];
      uint32_t looked_up = 0;
      for (uint16_t i = 0; i < count; ++i) {
        const ParsedPacket* p = pkts[base + i];
        if (!has_ipv4_header(p)) {
          out[base + i] = kNoMatch;
          ++not_ipv4;
          continue;
        }
        keys[looked_up] = make_acl_key(*p);
        slot[looked_up] = static_cast<uint16_t>(base + i);
        data[looked_up] = reinterpret_cast<const uint8_t*>(&keys[looked_up]);
        ++looked_up;
      }
      classified += looked_up;
      if (looked_up == 0) continue;

      uint32_t misses = 0;
      if (snapshot.admitted_.acl == nullptr) {
        for (uint32_t j = 0; j < looked_up; ++j) {
          out[slot[j]] = kNoMatch;
          asked[j] = static_cast<uint16_t>(j);
        }
        misses = looked_up;
      } else if (rte_acl_classify(snapshot.admitted_.acl, data, results, looked_up, 1) != 0) {
        errors += looked_up;  // unanswered: no match, and not asked of the shadow
        for (uint32_t j = 0; j < looked_up; ++j) out[slot[j]] = kNoMatch;
      } else {
        for (uint32_t j = 0; j < looked_up; ++j) {
          const uint32_t r = results[j];
          if (r - 1 < admitted_size) {  // 0 is no rule; out of range is no rule either
            const TcamSnapshot::Entry& e = admitted[r - 1];
            hits.hit(e.hits.get());
            out[slot[j]] = e.match;
          } else {
            out[slot[j]] = kNoMatch;
            data[misses] = data[j];  // compacts the misses in place: misses <= j
            asked[misses++] = static_cast<uint16_t>(j);
          }
        }
        matched += looked_up - misses;
      }
      if (misses != 0 && snapshot.shadow_.acl != nullptr) {
        if (rte_acl_classify(snapshot.shadow_.acl, data, results, misses, 1) != 0) {
          errors += misses;  // unanswered: they stay no match
        } else {
          for (uint32_t k = 0; k < misses; ++k) {
            const uint32_t r = results[k];
            if (r - 1 >= shadow_size) continue;
            const TcamSnapshot::Entry& e = shadow[r - 1];
            hits.hit(e.hits.get());
            TcamMatch& m = out[slot[asked[k]]];
            m.fallback = true;
            m.rule_id = e.rule_id;
            ++fallback;
            ++fallback_by_cause[static_cast<size_t>(e.refusal)];
          }
        }
      }
      continue;
    }

    // With a cache: keys it holds skip rte_acl. Every key is made and its line prefetched
    // before the first is looked at: the lookups then find their lines on the way.
    TcamDecisionCache::Probe probes[kClassifyChunk];
    uint16_t slot[kClassifyChunk];  // out index of each looked-up key
    uint32_t looked_up = 0;
    for (uint16_t i = 0; i < count; ++i) {
      const ParsedPacket* p = pkts[base + i];
      if (!has_ipv4_header(p)) {
        out[base + i] = kNoMatch;
        ++not_ipv4;
        continue;
      }
      probes[looked_up] = cache->probe(decision_key(*p));
      cache->prefetch(probes[looked_up]);
      slot[looked_up++] = static_cast<uint16_t>(base + i);
    }
    classified += looked_up;
    if (looked_up == 0) continue;

    // The decision per looked-up key (see encode_decision), kUnansweredDecision when the
    // lookup failed; the keys the cache does not hold are asked of rte_acl.
    uint32_t decision[kClassifyChunk];
    AclKey keys[kClassifyChunk];
    const uint8_t* data[kClassifyChunk];  // the keys rte_acl is asked about
    uint16_t asked[kClassifyChunk];       // their indexes into probes
    uint32_t adm[kClassifyChunk];         // the admitted rules' answer, by index into asked
    uint32_t results[kClassifyChunk];
    uint32_t to_ask = 0;
    cache_lookups += looked_up;
    for (uint32_t j = 0; j < looked_up; ++j) {
      decision[j] = cache->find(probes[j]);
      if (decision[j] != TcamDecisionCache::kMiss) {
        ++cache_hits;
        continue;
      }
      keys[to_ask] = make_acl_key(*pkts[slot[j]]);
      data[to_ask] = reinterpret_cast<const uint8_t*>(&keys[to_ask]);
      adm[to_ask] = 0;
      asked[to_ask++] = static_cast<uint16_t>(j);
    }

    if (to_ask != 0) {
      // Admitted rules (what the hardware would apply), then the refused ones for the keys no
      // admitted rule took: the traffic a refused rule would have taken goes by ECMP, and is
      // counted as such.
      uint16_t miss[kClassifyChunk];  // indexes into asked of the keys for the shadow
      uint32_t misses = to_ask;
      bool answered = true;
      if (snapshot.admitted_.acl != nullptr) {
        misses = 0;
        if (rte_acl_classify(snapshot.admitted_.acl, data, results, to_ask, 1) != 0) {
          errors += to_ask;
          answered = false;
        } else {
          for (uint32_t k = 0; k < to_ask; ++k) {
            adm[k] = results[k];
            if (results[k] - 1 >= admitted_size) {  // 0 (no rule) or out of range: no match
              data[misses] = data[k];               // compacts the misses in place: misses <= k
              miss[misses++] = static_cast<uint16_t>(k);
            }
          }
        }
      } else {
        for (uint32_t k = 0; k < to_ask; ++k) miss[k] = static_cast<uint16_t>(k);
      }
      uint32_t shd[kClassifyChunk];  // the refused rules' answer, by index into asked
      for (uint32_t k = 0; k < to_ask; ++k) shd[k] = 0;
      if (answered && misses != 0 && snapshot.shadow_.acl != nullptr) {
        if (rte_acl_classify(snapshot.shadow_.acl, data, results, misses, 1) != 0) {
          errors += misses;
          // Their admitted answer was a miss: unanswered, they stay no match and uncached.
          for (uint32_t k = 0; k < misses; ++k) adm[miss[k]] = kUnanswered;
        } else {
          for (uint32_t k = 0; k < misses; ++k) shd[miss[k]] = results[k];
        }
      }
      for (uint32_t k = 0; k < to_ask; ++k) {
        uint32_t& d = decision[asked[k]];
        if (!answered || adm[k] == kUnanswered) {
          d = kUnansweredDecision;
          continue;
        }
        d = encode_decision(adm[k], shd[k], admitted_size, shadow_size);
        cache->store(probes[asked[k]], d);
      }
    }

    for (uint32_t j = 0; j < looked_up; ++j) {
      const uint32_t d = decision[j];
      TcamMatch& m = out[slot[j]];
      if (d == 0 || d == kUnansweredDecision) {
        m = kNoMatch;
      } else if ((d & kShadowDecision) == 0) {
        const TcamSnapshot::Entry& e = admitted[d - 1];
        hits.hit(e.hits.get());
        m = e.match;
        ++matched;
      } else {
        const TcamSnapshot::Entry& e = shadow[(d & ~kShadowDecision) - 1];
        hits.hit(e.hits.get());
        m = kNoMatch;
        m.fallback = true;
        m.rule_id = e.rule_id;
        ++fallback;
        ++fallback_by_cause[static_cast<size_t>(e.refusal)];
      }
    }
  }

  if (cache != nullptr) cache->account(cache_lookups, cache_hits);
  if (resting != nullptr) resting->account(static_cast<uint32_t>(classified), 0);
  // One atomic add per counter per call: lcores share these.
  auto add = [](std::atomic<uint64_t>& c, uint64_t v) {
    if (v != 0) c.fetch_add(v, std::memory_order_relaxed);
  };
  add(live_.not_ipv4_packets, not_ipv4);
  add(live_.classified_packets, classified);
  add(live_.matched_packets, matched);
  add(live_.fallback_ecmp_packets, fallback);
  add(live_.classify_errors, errors);
  for (size_t c = 0; c < kTcamRefusalCount; ++c) {
    add(live_.fallback_packets_by_cause[c], fallback_by_cause[c]);
  }
}

TcamCounters Tcam::counters() const {
  TcamCounters c;
  auto get = [](const std::atomic<uint64_t>& v) { return v.load(std::memory_order_relaxed); };
  c.classified_packets = get(live_.classified_packets);
  c.not_ipv4_packets = get(live_.not_ipv4_packets);
  c.matched_packets = get(live_.matched_packets);
  c.fallback_ecmp_packets = get(live_.fallback_ecmp_packets);
  for (size_t i = 0; i < kTcamRefusalCount; ++i) {
    c.fallback_packets_by_cause[i] = get(live_.fallback_packets_by_cause[i]);
    c.refused_rules_by_cause[i] = get(live_.refused_rules_by_cause[i]);
  }
  c.classify_errors = get(live_.classify_errors);
  c.commits = get(live_.commits);
  c.commit_failures = get(live_.commit_failures);
  return c;
}

}  // namespace spraynet
