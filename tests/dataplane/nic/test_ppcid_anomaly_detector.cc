#include "dataplane/nic/ppcid_anomaly_detector.h"

#include <catch2/catch.hpp>

#include <rte_mbuf.h>

#include <algorithm>
#include <random>
#include <stdexcept>
#include <vector>

#include "dataplane/nic/spray_engine.h"
#include "dataplane/wire/packet_builder.h"
#include "dataplane/wire/packet_parser.h"
#include "tests/support/dpdk_test.h"

using namespace spraynet;
using spraynet::test::TestPool;

namespace {

// Four uplinks, each named by its cable's path id (both ends carry the same id).
const std::vector<uint8_t> kPathIds{3, 7, 9, 12};

PathIdSet known_paths() {
  PathIdSet s;
  for (uint8_t id : kPathIds) s.set(id);
  return s;
}

PpcidAnomalyConfig detector_config(uint32_t threshold = 3, uint32_t qps = 64) {
  PpcidAnomalyConfig c;
  c.qp_table_size = qps;
  c.threshold = threshold;
  c.uplink_path_ids = kPathIds;
  return c;
}

// What the receiver makes of a UDP checksum value on a packet of (qp, psn).
PpcidReading read(uint16_t value, uint32_t qp, uint32_t psn) {
  return ppcid_read(value, PpcidLayout::kTsHigh, qp, psn, known_paths());
}

// A PPCID as the sender on uplink `u`'s cable writes it.
uint16_t genuine(size_t u, uint32_t qp, uint32_t psn, uint8_t ts = 0x42) {
  return ppcid_encode(PpcidLayout::kTsHigh, kPathIds[u], ts, qp, psn);
}

// One packet as it arrives: its UDP checksum, PSN and the uplink it came in on.
struct Arrival {
  uint32_t qp = 0;
  uint32_t psn = 0;
  uint16_t value = 0;
  uint16_t uplink = 0;
};

// A real sender: the SprayEngine picks the uplink and writes the PPCID into a real RoCEv2
// packet built by PacketBuilder; the arrival is what that packet carries on that uplink.
class Sender {
 public:
  Sender(rte_mempool* pool, SprayMode mode) : pool_(pool), spray_(config(mode)), loads_(4) {}

  static SprayEngineConfig config(SprayMode mode) {
    SprayEngineConfig c;
    c.mode = mode;
    c.path_ids = kPathIds;
    return c;
  }

  Arrival send(uint32_t qp, uint32_t psn, uint64_t now_ns) {
    FrameSpec f;
    f.ip.src = 0x0A000001;
    f.ip.dst = 0x0A000002;
    f.udp.src_port = 0xC000;
    f.udp.dst_port = 4791;
    RoceSpec r;
    r.opcode = opcode::kRcSendOnly;
    r.dest_qp = qp;
    r.psn = psn;
    rte_mbuf* m = build_roce_mbuf(pool_, f, r);
    REQUIRE(m != nullptr);
    ParsedPacket p;
    REQUIRE(parser_.parse(m, p) == ParseStatus::kOk);
    const uint16_t uplink = spray_.pick(qp, now_ns, loads_);
    REQUIRE(uplink < 4);
    REQUIRE(spray_.write_ppcid(m, p, uplink, now_ns) != 0);
    ParsedPacket q;
    REQUIRE(parser_.parse(m, q) == ParseStatus::kOk);
    rte_pktmbuf_free(m);
    return Arrival{qp, q.psn, q.udp_checksum, uplink};
  }

  void set_eligible(size_t u, bool up) { loads_[u].eligible = up; }
  void reweight(std::vector<uint32_t> w, uint64_t now_ns) {
    old_.push_back(spray_.publish_weights(
        std::make_unique<const SprayWeights>(SprayWeights{std::move(w), now_ns})));
  }

 private:
  rte_mempool* pool_;
  PacketParser parser_;
  SprayEngine spray_;
  std::vector<PathLoad> loads_;
  std::vector<std::unique_ptr<const SprayWeights>> old_;
};

// Feeds arrivals to the detector; returns how many flagged a QP.
size_t feed(PpcidAnomalyDetector& d, const std::vector<Arrival>& in, uint64_t now_ns) {
  size_t flags = 0;
  for (const Arrival& a : in) {
    if (d.observe(a.qp, a.uplink, read(a.value, a.qp, a.psn), a.psn, now_ns) != nullptr) ++flags;
  }
  return flags;
}

// Packets of a QP arrive out of order: shuffled within windows of `window` (paths of different
// delays), as the reorder engine sees them.
void reorder(std::vector<Arrival>& v, size_t window, std::mt19937& rng) {
  for (size_t i = 0; i < v.size(); i += window) {
    std::shuffle(v.begin() + static_cast<long>(i),
                 v.begin() + static_cast<long>(std::min(v.size(), i + window)), rng);
  }
}

uint64_t evidence_total(const PpcidAnomalyCounters& c) {
  return c.anomalous_wrong_uplink + c.anomalous_bad_check + c.anomalous_unknown_path +
         c.anomalous_ppcid_missing + c.anomalous_ppcid_unexpected + c.anomalous_layout_flip;
}

}  // namespace

TEST_CASE("anomaly config: threshold 1..3 and a bounded table, else a clear error") {
  CHECK(detector_config().check().empty());
  PpcidAnomalyConfig c = detector_config();
  c.threshold = 0;
  CHECK(c.check().find("threshold") != std::string::npos);
  c.threshold = 4;
  CHECK_THROWS_AS(PpcidAnomalyDetector(c), std::invalid_argument);
  c = detector_config();
  c.qp_table_size = 0;
  CHECK(c.check().find("qp_table_size") != std::string::npos);
  c.qp_table_size = PpcidAnomalyConfig::kMaxQps + 1;
  CHECK_THROWS_AS(PpcidAnomalyDetector(c), std::invalid_argument);
}

TEST_CASE("each kind of evidence is counted under its reason") {
  const uint32_t qp = 0x11;
  struct Case {
    const char* name;
    AnomalyReason reason;
    uint16_t first;   // the QP's first packet (sets what it has shown)
    uint16_t forged;  // then the evidence packet
    uint16_t uplink;  // the forged packet's uplink
  };
  // path-high value with path id 3 (known) and timestamp nibble 0xF: under ts-high its path id
  // reads 0xF, which no uplink has, so it is readable only under the other layout.
  const uint16_t other_layout = ppcid_encode(PpcidLayout::kPathHigh, 3, 0xF, qp, 2);
  REQUIRE(read(other_layout, qp, 2).verdict == PpcidVerdict::kLayoutMismatch);
  const uint16_t unknown = ppcid_encode(PpcidLayout::kTsHigh, 5, 0xEE, qp, 2);  // 5, 0xEE: nobody's
  REQUIRE(read(unknown, qp, 2).verdict == PpcidVerdict::kUnknownPath);
  const uint16_t bad = static_cast<uint16_t>(genuine(0, qp, 2) ^ 0x1);
  REQUIRE(read(bad, qp, 2).verdict == PpcidVerdict::kBadCheck);
  const Case cases[] = {
      {"wrong uplink", AnomalyReason::wrong_uplink, genuine(0, qp, 1), genuine(1, qp, 2), 0},
      {"bad check", AnomalyReason::bad_check, genuine(0, qp, 1), bad, 0},
      {"unknown path", AnomalyReason::unknown_path, genuine(0, qp, 1), unknown, 0},
      {"PPCID missing", AnomalyReason::ppcid_missing, genuine(0, qp, 1), 0, 0},
      {"PPCID unexpected", AnomalyReason::ppcid_unexpected, 0, genuine(2, qp, 2), 2},
      {"layout flip", AnomalyReason::layout_flip, genuine(0, qp, 1), other_layout, 0},
  };
  for (const Case& c : cases) {
    SECTION(c.name) {
      PpcidAnomalyDetector d(detector_config(1));
      // The first packet arrives on the uplink its PPCID names: clean.
      CHECK(d.observe(qp, 0, read(c.first, qp, 1), 1, 100) == nullptr);
      CHECK(evidence_total(d.counters()) == 0);
      const AnomalyQp* flagged = d.observe(qp, c.uplink, read(c.forged, qp, 2), 2, 200);
      REQUIRE(flagged != nullptr);
      CHECK(flagged->dest_qp == qp);
      CHECK(flagged->reason == c.reason);
      CHECK(flagged->uplink == c.uplink);
      CHECK(flagged->psn == 2);
      CHECK(flagged->first_ns == 200);
      CHECK(flagged->by_reason[static_cast<size_t>(c.reason)] == 1);
      CHECK(evidence_total(d.counters()) == 1);
      CHECK(d.counters().qps_flagged == 1);
      CHECK(d.counters().packets == 2);
    }
  }
  CHECK(to_string(AnomalyReason::layout_flip) == "layout_flip");
}

TEST_CASE("a QP is flagged on the 3rd forged packet whatever clean packets come between, once") {
  PpcidAnomalyDetector d(detector_config(3));
  const uint32_t qp = 0x2A;
  uint32_t psn = 0;
  uint64_t now = 1000;
  auto clean = [&](size_t n) {
    for (size_t i = 0; i < n; ++i, ++psn) {
      const size_t u = psn % 4;
      REQUIRE(d.observe(qp, static_cast<uint16_t>(u), read(genuine(u, qp, psn), qp, psn), psn,
                        now++) == nullptr);
    }
  };
  // A forger that does not know the check nibble writes a random-looking value: the nibble is
  // wrong, unless by chance; take one whose nibble is wrong.
  auto forged = [&](uint16_t uplink) {
    uint16_t v = static_cast<uint16_t>(0xBEE0 | ((ppcid_check_nibble(qp, psn) + 1) & 0xF));
    const AnomalyQp* f = d.observe(qp, uplink, read(v, qp, psn), psn, now++);
    ++psn;
    return f;
  };
  clean(100);
  CHECK(forged(1) == nullptr);
  clean(1000);
  CHECK(forged(2) == nullptr);
  clean(7);
  const AnomalyQp* f = forged(3);
  REQUIRE(f != nullptr);
  CHECK(f->reason == AnomalyReason::bad_check);
  CHECK(f->uplink == 3);
  CHECK(f->evidence == 3);
  CHECK(f->first_ns == 1000 + 100);
  CHECK(f->flagged_ns == f->last_ns);
  // Reported once: more evidence counts but flags nothing again.
  CHECK(forged(0) == nullptr);
  CHECK(d.counters().qps_flagged == 1);
  CHECK(d.counters().anomalous_bad_check == 4);
  REQUIRE(d.flagged_count() == 1);
  CHECK(d.flagged(0).dest_qp == qp);
  CHECK(d.find(qp)->evidence == 4);
  CHECK(d.find(qp + 1) == nullptr);
}

TEST_CASE("forged packets without a PPCID into a sprayed QP flag it within 3") {
  PpcidAnomalyDetector d(detector_config());
  const uint32_t qp = 0x33;
  for (uint32_t psn = 0; psn < 50; ++psn) {
    d.observe(qp, psn % 4, read(genuine(psn % 4, qp, psn), qp, psn), psn, psn);
  }
  CHECK(d.observe(qp, 0, read(0, qp, 50), 50, 60) == nullptr);
  CHECK(d.observe(qp, 0, read(0, qp, 51), 51, 61) == nullptr);
  const AnomalyQp* f = d.observe(qp, 0, read(0, qp, 52), 52, 62);
  REQUIRE(f != nullptr);
  CHECK(f->reason == AnomalyReason::ppcid_missing);
}

TEST_CASE("clean sprayed traffic over 4 paths: reordering, a link flap, a reweight: no flag") {
  TestPool pool;
  std::mt19937 rng(7);
  PpcidAnomalyDetector d(detector_config(1, 64));  // the most sensitive threshold
  Sender rr(pool.get(), SprayMode::kRoundRobin);
  Sender weighted(pool.get(), SprayMode::kWeighted);
  const uint32_t qps[] = {0x11, 0x12, 0x13, 0x14};
  uint64_t now = 1'000'000;
  std::vector<uint32_t> psn(4, 0);
  size_t flags = 0;
  uint64_t sent = 0;
  auto phase = [&](Sender& s, size_t per_qp, size_t window) {
    for (size_t q = 0; q < 4; ++q) {
      std::vector<Arrival> v;
      for (size_t i = 0; i < per_qp; ++i) v.push_back(s.send(qps[q], psn[q]++, now += 37));
      reorder(v, window, rng);
      flags += feed(d, v, now);
      sent += v.size();
    }
  };
  phase(rr, 2000, 16);
  // Link flap: uplink 2 disappears, then returns.
  rr.set_eligible(2, false);
  phase(rr, 2000, 16);
  rr.set_eligible(2, true);
  phase(rr, 2000, 64);
  // Reweights (the timestamp restarts at each), a path mix change, one path to weight 0.
  weighted.reweight({1, 1, 1, 1}, now);
  phase(weighted, 1500, 32);
  weighted.reweight({8, 1, 4, 0}, now);
  phase(weighted, 1500, 32);
  weighted.reweight({0, 0, 1, 3}, now + 5);
  phase(weighted, 1500, 8);
  CHECK(sent == 4 * 10500);
  CHECK(flags == 0);
  CHECK(d.counters().qps_flagged == 0);
  CHECK(evidence_total(d.counters()) == 0);
  CHECK(d.counters().packets == sent);
  CHECK(pool.whole());
}

TEST_CASE("PSNs across the 2^24 wrap: clean traffic clean, forged packets still flagged") {
  PpcidAnomalyDetector d(detector_config());
  const uint32_t qp = 0xABCDE;
  uint32_t psn = 0xFFFFFF - 500;
  for (int i = 0; i < 1000; ++i, psn = (psn + 1) & 0xFFFFFF) {
    const size_t u = static_cast<size_t>(i) % 4;
    REQUIRE(d.observe(qp, static_cast<uint16_t>(u), read(genuine(u, qp, psn), qp, psn), psn,
                      static_cast<uint64_t>(i)) == nullptr);
  }
  CHECK(psn == 499);
  CHECK(evidence_total(d.counters()) == 0);
  // Forged: a path id valid for uplink 1 arriving on uplink 0, around the wrap.
  const uint32_t forged_psns[] = {0xFFFFFE, 0xFFFFFF, 0};
  const AnomalyQp* f = nullptr;
  for (uint32_t p : forged_psns) f = d.observe(qp, 0, read(genuine(1, qp, p), qp, p), p, 2000);
  REQUIRE(f != nullptr);
  CHECK(f->reason == AnomalyReason::wrong_uplink);
  CHECK(f->psn == 0);
}

TEST_CASE("a full QP table counts overflow and judges nothing beyond it") {
  PpcidAnomalyDetector d(detector_config(1, 2));
  CHECK(d.observe(1, 0, read(genuine(0, 1, 0), 1, 0), 0, 0) == nullptr);
  CHECK(d.observe(2, 0, read(genuine(0, 2, 0), 2, 0), 0, 0) == nullptr);
  for (uint32_t psn = 0; psn < 5; ++psn) {
    CHECK(d.observe(3, 0, read(0x1234, 3, psn), psn, 0) == nullptr);
  }
  CHECK(d.counters().qp_table_overflow == 5);
  CHECK(d.qps_tracked() == 2);
  CHECK(d.find(3) == nullptr);
  // The tracked QPs are still judged.
  CHECK(d.observe(2, 1, read(genuine(0, 2, 1), 2, 1), 1, 0) != nullptr);
  // Without uplink path ids (fabric paths) any uplink may carry any known id.
  PpcidAnomalyConfig c = detector_config(1);
  c.uplink_path_ids.clear();
  PpcidAnomalyDetector fabric(c);
  for (uint32_t psn = 0; psn < 8; ++psn) {
    CHECK(fabric.observe(9, 0, read(genuine(psn % 4, 9, psn), 9, psn), psn, 0) == nullptr);
  }
}
