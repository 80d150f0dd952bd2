#include "dataplane/egress/link_emulator.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <stdexcept>
#include <vector>

using namespace spraynet;

namespace {

LinkEmulator make_link(double gbps, uint64_t delay_ns = 0) {
  LinkEmulatorConfig c;
  c.rate_gbps = gbps;
  c.propagation_delay_ns = delay_ns;
  return LinkEmulator(c);
}

// Fraction of `n` frames of `bytes` that the link loses, all started back to back at t = 0.
uint64_t count_lost(LinkEmulator& link, int n, uint32_t bytes, LinkFrameFate fate) {
  uint64_t lost = 0;
  for (int i = 0; i < n; ++i) lost += link.transmit(bytes, 0).fate == fate ? 1 : 0;
  return lost;
}

// Whether `observed` lies within 5 standard deviations of a binomial(n, p) mean.
bool binomially_plausible(uint64_t observed, int n, double p) {
  const double mean = n * p;
  const double sd = std::sqrt(n * p * (1.0 - p));
  return std::abs(static_cast<double>(observed) - mean) <= 5.0 * sd;
}

}  // namespace

TEST_CASE("Each frame costs its bytes plus 24 on the wire; short frames are padded to 60") {
  CHECK(LinkEmulator::wire_bits(1000) == 1024 * 8);
  CHECK(LinkEmulator::wire_bits(64) == 88 * 8);
  CHECK(LinkEmulator::wire_bits(42) == 84 * 8);  // padded to 60
  CHECK(LinkEmulator::checked_bits(1000) == 1004 * 8);
  CHECK(LinkEmulator::checked_bits(10) == 64 * 8);
}

TEST_CASE("1000 frames of 1000 B at 10 Gbit/s: the last arrives at exactly 819,200 ns + delay") {
  const uint64_t delay = GENERATE(0u, 5000u);
  LinkEmulator link = make_link(10.0, delay);
  LinkTransmission last;
  for (int i = 0; i < 1000; ++i) {
    last = link.transmit(1000, 0);  // all ready at 0: back to back
    // Frame i's last bit leaves at (i + 1) x 819.2 ns, rounded up to a whole ns.
    const uint64_t exact_tenths = static_cast<uint64_t>(i + 1) * 8192;
    REQUIRE(last.end_ns == (exact_tenths + 9) / 10);
    REQUIRE(last.arrival_ns == last.end_ns + delay);
    REQUIRE(last.fate == LinkFrameFate::kDelivered);
  }
  CHECK(last.start_ns == 818380);  // 999 x 819.2 = 818,380.8: starts within that ns
  CHECK(last.end_ns == 819200);
  CHECK(last.arrival_ns == 819200 + delay);
  CHECK(link.next_start_ns() == 819200);
}

TEST_CASE("Back-to-back minimum frames at 100 Gbit/s keep their sub-ns remainders") {
  LinkEmulator link = make_link(100.0);
  // 64 B + 24 = 704 bits = 7.04 ns: after 1000 frames exactly 7040 ns, not 7000 or 8000.
  for (int i = 0; i < 1000; ++i) link.transmit(64, 0);
  CHECK(link.next_start_ns() == 7040);
  // 25 frames take 176 ns exactly: at 25 G a 1000 B frame takes 327.68 ns.
  LinkEmulator slow = make_link(25.0);
  for (int i = 0; i < 25; ++i) slow.transmit(1000, 0);
  CHECK(slow.next_start_ns() == 8192);
}

TEST_CASE("A frame starts when it is ready or when the line is free, whichever is later") {
  LinkEmulator link = make_link(10.0);
  CHECK(link.next_start_ns() == 0);
  LinkTransmission a = link.transmit(1000, 100);
  CHECK(a.start_ns == 100);
  CHECK(a.end_ns == 920);  // 100 + 819.2, rounded up
  CHECK(link.next_start_ns() == 920);
  // Ready before the line is free: it follows the previous frame exactly.
  LinkTransmission b = link.transmit(1000, 500);
  CHECK(b.start_ns == 919);  // 919.2
  CHECK(b.end_ns == 1739);   // 1738.4, rounded up
  // Ready after an idle gap: the sub-ns remainder is gone, it starts on its own time.
  LinkTransmission c = link.transmit(1000, 5000);
  CHECK(c.start_ns == 5000);
  CHECK(c.end_ns == 5820);
  CHECK(link.arrival_ns(1000, 5000) == 5820);
}

TEST_CASE("Propagation delay: several frames are in flight at once") {
  LinkEmulator link = make_link(10.0, 1'000'000);  // 1 ms of fibre
  std::vector<LinkTransmission> sent;
  for (int i = 0; i < 10; ++i) sent.push_back(link.transmit(1000, 0));
  // The tenth frame has left long before the first one arrives.
  CHECK(sent[9].start_ns < sent[0].arrival_ns);
  CHECK(sent[0].arrival_ns == 820 + 1'000'000);
  for (size_t i = 1; i < sent.size(); ++i) {
    CHECK(sent[i].arrival_ns - sent[i - 1].arrival_ns <= 820);
    CHECK(sent[i].arrival_ns > sent[i - 1].arrival_ns);
  }
  CHECK(link.arrival_ns(1000, 2000) == 2000 + 820 + 1'000'000);
}

TEST_CASE("Shortening the delay never lets a frame overtake an earlier one") {
  LinkEmulator link = make_link(10.0, 10'000);
  const LinkTransmission first = link.transmit(1000, 0);
  link.set_propagation_delay_ns(0);
  const LinkTransmission second = link.transmit(1000, 0);
  CHECK(first.arrival_ns == 10'820);
  CHECK(second.arrival_ns == first.arrival_ns);  // held behind the first, not at 1639
  const LinkTransmission later = link.transmit(1000, 20'000);
  CHECK(later.arrival_ns == 20'820);
}

TEST_CASE("BER loses a frame of b bits with probability 1 - (1 - BER)^b") {
  LinkEmulatorConfig c;
  c.bit_error_rate = 1e-5;
  c.seed = 42;
  LinkEmulator link(c);
  const double p1000 = 1.0 - std::pow(1.0 - 1e-5, 1004 * 8);
  const double p64 = 1.0 - std::pow(1.0 - 1e-5, 68 * 8);
  CHECK(link.frame_loss_probability(1000) == Approx(p1000).epsilon(1e-9));
  CHECK(link.frame_loss_probability(64) == Approx(p64).epsilon(1e-9));
  CHECK(p1000 == Approx(0.0772).epsilon(0.01));  // the numbers the statistics below rest on

  const int n = 200'000;
  const uint64_t lost_big = count_lost(link, n, 1000, LinkFrameFate::kBitError);
  const uint64_t lost_small = count_lost(link, n, 64, LinkFrameFate::kBitError);
  CHECK(binomially_plausible(lost_big, n, p1000));
  CHECK(binomially_plausible(lost_small, n, p64));
  // Long frames suffer more: the rate is per bit, not per frame.
  CHECK(lost_big > 10 * lost_small);
}

TEST_CASE("The plain loss rate loses that fraction of frames whatever their size") {
  LinkEmulatorConfig c;
  c.loss_rate = 0.01;
  c.seed = 7;
  LinkEmulator link(c);
  const int n = 200'000;
  const uint64_t lost_big = count_lost(link, n, 1500, LinkFrameFate::kLost);
  const uint64_t lost_small = count_lost(link, n, 64, LinkFrameFate::kLost);
  CHECK(binomially_plausible(lost_big, n, 0.01));
  CHECK(binomially_plausible(lost_small, n, 0.01));
  CHECK(link.frame_loss_probability(1500) == 0.0);  // no BER configured
}

TEST_CASE("Losses are reproducible from the seed, and differ between seeds") {
  auto fates = [](uint64_t seed) {
    LinkEmulatorConfig c;
    c.loss_rate = 0.3;
    c.bit_error_rate = 1e-4;
    c.seed = seed;
    LinkEmulator link(c);
    std::vector<LinkFrameFate> f;
    for (int i = 0; i < 1000; ++i) f.push_back(link.transmit(1000, 0).fate);
    return f;
  };
  CHECK(fates(1) == fates(1));
  CHECK(fates(1) != fates(2));
}

TEST_CASE("A down link sends nothing and reports when it may start as never") {
  LinkEmulator link = make_link(10.0);
  link.transmit(1000, 0);
  link.set_up(false);
  CHECK_FALSE(link.up());
  CHECK(link.next_start_ns() == LinkEmulator::kNever);
  const LinkTransmission t = link.transmit(1000, 10'000);
  CHECK(t.fate == LinkFrameFate::kLinkDown);
  link.set_up(true);
  // Nothing was serialised while down: the next frame starts when it is ready.
  const LinkTransmission u = link.transmit(1000, 10'000);
  CHECK(u.fate == LinkFrameFate::kDelivered);
  CHECK(u.start_ns == 10'000);
  CHECK(u.end_ns == 10'820);
}

TEST_CASE("Rate, BER and loss change at run time; bad values are refused with the key") {
  LinkEmulator link = make_link(10.0);
  link.transmit(1000, 0);  // busy until 819.2
  link.set_rate_gbps(100.0);
  CHECK(link.rate_gbps() == 100.0);
  CHECK(link.next_start_ns() == 820);  // the remainder of the old rate is rounded up
  const LinkTransmission t = link.transmit(1000, 0);
  CHECK(t.start_ns == 820);
  CHECK(t.end_ns == 902);  // 820 + 81.92

  link.set_loss_rate(1.0);
  CHECK(link.transmit(1000, 0).fate == LinkFrameFate::kLost);
  link.set_loss_rate(0.0);
  link.set_bit_error_rate(1.0);
  CHECK(link.transmit(1000, 0).fate == LinkFrameFate::kBitError);
  link.set_bit_error_rate(0.0);
  CHECK(link.transmit(1000, 0).fate == LinkFrameFate::kDelivered);

  CHECK_THROWS_AS(link.set_rate_gbps(0.0), std::invalid_argument);
  CHECK_THROWS_AS(link.set_rate_gbps(-1.0), std::invalid_argument);
  CHECK_THROWS_AS(link.set_rate_gbps(std::nan("")), std::invalid_argument);
  CHECK_THROWS_AS(link.set_bit_error_rate(1.5), std::invalid_argument);
  CHECK_THROWS_AS(link.set_loss_rate(-0.1), std::invalid_argument);
  CHECK(link.rate_gbps() == 100.0);  // a refused value changes nothing

  LinkEmulatorConfig bad;
  bad.rate_gbps = 0;
  CHECK(bad.check() == "rate_gbps: must be > 0");
  CHECK_THROWS_AS(LinkEmulator(bad), std::invalid_argument);
  bad = {};
  bad.loss_rate = 2;
  CHECK(bad.check() == "loss_rate: must be between 0 and 1");
  CHECK(LinkEmulatorConfig{}.check().empty());
}
