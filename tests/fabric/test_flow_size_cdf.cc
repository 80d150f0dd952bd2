// FlowSizeCdf: the built-in tables (and that they match fabric/cdfs/*.txt), the exact mean, the
// inverse-CDF sampler reproducing the CDF, every parse error naming FILE:LINE, and the
// equal-share size bins used for FCT-slowdown reports.
#include "fabric/flow_size_cdf.h"

#include <catch2/catch.hpp>

#include <unistd.h>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#ifndef SPRAYNET_SOURCE_DIR
#error "SPRAYNET_SOURCE_DIR must be defined (the source tree's root, as a string literal)"
#endif

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using spraynet::fabric::FlowSizeCdf;

namespace {

std::string cdf_file(const std::string& name) {
  return std::string(SPRAYNET_SOURCE_DIR) + "/fabric/cdfs/" + name + ".txt";
}

// A uniform in [0, 1) from the top 53 bits: the same on every standard library, unlike
// std::uniform_real_distribution.
double uniform(std::mt19937_64& rng) {
  return static_cast<double>(rng() >> 11) * 0x1.0p-53;
}

// Writes `text` to a fresh temporary file and removes it at scope exit.
struct TempFile {
  std::string path;
  explicit TempFile(const std::string& text) {
    static int counter = 0;
    path = (std::filesystem::temp_directory_path() /
            ("spraynet_cdf_" + std::to_string(getpid()) + "_" + std::to_string(counter++) + ".txt"))
               .string();
    std::ofstream(path) << text;
  }
  ~TempFile() { std::filesystem::remove(path); }
};

}  // namespace

TEST_CASE("flow_size_cdf: both built-ins parse, with the published points") {
  const std::vector<std::string> names = FlowSizeCdf::builtin_names();
  REQUIRE(names == std::vector<std::string>{"websearch", "alistorage2019"});

  const FlowSizeCdf web = FlowSizeCdf::builtin("websearch");
  REQUIRE(web.points().size() == 12);
  CHECK(web.points().front() == std::pair<uint64_t, double>{0, 0.0});
  CHECK(web.points()[5].first == 80000);
  CHECK(web.points()[5].second == Approx(0.53));
  CHECK(web.points().back().first == 30000000);
  CHECK(web.points().back().second == 1.0);
  CHECK(web.max_bytes() == 30000000);

  const FlowSizeCdf ali = FlowSizeCdf::builtin("alistorage2019");
  REQUIRE(ali.points().size() == 9);
  CHECK(ali.points()[1].first == 4000);
  CHECK(ali.points()[1].second == Approx(0.2293));
  CHECK(ali.max_bytes() == 2000000);
}

TEST_CASE("flow_size_cdf: embedded tables are identical to fabric/cdfs/*.txt") {
  for (const std::string& name : FlowSizeCdf::builtin_names()) {
    INFO(name);
    const FlowSizeCdf from_file = FlowSizeCdf::load(cdf_file(name));
    const FlowSizeCdf embedded = FlowSizeCdf::builtin(name);
    CHECK(from_file.points() == embedded.points());
    // resolve() takes either form.
    CHECK(FlowSizeCdf::resolve(name).points() == embedded.points());
    CHECK(FlowSizeCdf::resolve(cdf_file(name)).points() == embedded.points());
  }
}

TEST_CASE("flow_size_cdf: exact mean of websearch") {
  // Each segment's share of flows is spread uniformly over its sizes, so it contributes
  // share * (lo + hi) / 2. Worked from the table by hand:
  const double expected = 0.15 * (0 + 10000) / 2.0 + 0.05 * (10000 + 20000) / 2.0 +
                          0.10 * (20000 + 30000) / 2.0 + 0.10 * (30000 + 50000) / 2.0 +
                          0.13 * (50000 + 80000) / 2.0 + 0.07 * (80000 + 200000) / 2.0 +
                          0.10 * (200000 + 1000000) / 2.0 + 0.10 * (1000000 + 2000000) / 2.0 +
                          0.10 * (2000000 + 5000000) / 2.0 + 0.07 * (5000000 + 10000000) / 2.0 +
                          0.03 * (10000000 + 30000000) / 2.0;
  CHECK(expected == Approx(1711250.0));  // the sum above, added up: 750 + 750 + ... + 600000
  CHECK(FlowSizeCdf::builtin("websearch").mean_bytes() == Approx(expected).epsilon(1e-12));

  // A point mass (two points with one size) counts at that size.
  const FlowSizeCdf mass = FlowSizeCdf::parse("0 0\n1000 0\n1000 50\n3000 100\n", "mass");
  CHECK(mass.mean_bytes() == Approx(0.5 * 1000 + 0.5 * 2000));
}

TEST_CASE("flow_size_cdf: 200,000 samples reproduce the CDF at every point") {
  for (const std::string& name : FlowSizeCdf::builtin_names()) {
    INFO(name);
    const FlowSizeCdf cdf = FlowSizeCdf::builtin(name);
    std::mt19937_64 rng(12345);
    constexpr int kSamples = 200000;
    std::vector<uint64_t> samples(kSamples);
    double sum = 0;
    uint64_t lo = std::numeric_limits<uint64_t>::max(), hi = 0;
    for (uint64_t& s : samples) {
      s = cdf.sample(uniform(rng));
      sum += static_cast<double>(s);
      lo = std::min(lo, s);
      hi = std::max(hi, s);
    }
    CHECK(lo >= 1);
    CHECK(hi <= cdf.max_bytes());
    for (const auto& [size, fraction] : cdf.points()) {
      INFO("size " << size);
      size_t at_most = 0;
      for (uint64_t s : samples) at_most += s <= size ? 1 : 0;
      const double empirical = static_cast<double>(at_most) / kSamples;
      CHECK(std::abs(empirical - fraction) < 0.005);
    }
    // The sampler's mean agrees with the exact one (websearch's tail makes it the noisier).
    CHECK(sum / kSamples == Approx(cdf.mean_bytes()).epsilon(0.03));
  }
}

TEST_CASE("flow_size_cdf: sample() edges and interpolation") {
  const FlowSizeCdf web = FlowSizeCdf::builtin("websearch");
  CHECK(web.sample(0.0) >= 1);
  CHECK(web.sample(1e-12) >= 1);
  CHECK(web.sample(std::numeric_limits<double>::quiet_NaN()) >= 1);
  CHECK(web.sample(-1.0) >= 1);
  CHECK(web.sample(0.15) == 10000);
  CHECK(web.sample(0.075) == 5000);
  CHECK(web.sample(0.5) == 73077);  // 50000 + 30000 * (50 - 40) / (53 - 40) = 73076.9
  CHECK(web.sample(std::nextafter(1.0, 0.0)) <= 30000000);
  CHECK(web.sample(std::nextafter(1.0, 0.0)) > 29999000);
  CHECK(web.sample(1.0) == 30000000);
  CHECK(web.sample(2.0) == 30000000);
}

TEST_CASE("flow_size_cdf: comments, blank lines, CRLF and tabs are accepted") {
  const FlowSizeCdf cdf = FlowSizeCdf::parse(
      "# a comment\n\n  0\t0   # trailing comment\r\n100 50\r\n\n200 100\n# end", "ok");
  REQUIRE(cdf.points().size() == 3);
  CHECK(cdf.points()[1] == std::pair<uint64_t, double>{100, 0.5});
  CHECK(cdf.max_bytes() == 200);
  // Trailing points at 100% do not raise the maximum.
  CHECK(FlowSizeCdf::parse("0 0\n10 100\n20 100\n", "t").max_bytes() == 10);
}

TEST_CASE("flow_size_cdf: every parse error names FILE:LINE and the reason") {
  struct Case {
    const char* text;
    const char* where;   // "src:LINE:"
    const char* reason;  // a piece of the message
  };
  // Two lines of preamble so that LINE counts comments and blank lines.
  const Case cases[] = {
      {"# hdr\n\n0 0\nabc 50\n10 100\n", "src:4:", "not a non-negative integer"},
      {"# hdr\n\n0 0\n10.5 50\n20 100\n", "src:4:", "not a non-negative integer"},
      {"# hdr\n\n0 0\n10 half\n20 100\n", "src:4:", "not a number"},
      {"# hdr\n\n0 0\n10 nan\n20 100\n", "src:4:", "not a number"},
      {"# hdr\n\n0 0\n-10 50\n20 100\n", "src:4:", "negative size"},
      {"# hdr\n\n0 0\n10 -5\n20 100\n", "src:4:", "negative percent"},
      {"# hdr\n\n0 0\n10 50\n5 60\n20 100\n", "src:5:", "sizes must be non-decreasing"},
      {"# hdr\n\n0 0\n10 50\n20 40\n30 100\n", "src:5:", "percents must be non-decreasing"},
      {"# hdr\n\n0 0\n10 50\n20 100.5\n", "src:5:", "above 100"},
      {"# hdr\n\n0 0\n10 50\n20 99\n\n# trailer\n", "src:5:", "must be 100"},
      {"# hdr\n\n0 0\n", "src:3:", "at least 2 points, found 1"},
      {"", "src:1:", "at least 2 points, found 0"},
      {"# hdr\n\n10 5\n20 100\n", "src:3:", "first point's percent must be 0"},
      {"# hdr\n\n0 0\n10 50 7\n20 100\n", "src:4:", "got 3 fields"},
      {"# hdr\n\n0 0\n99999999999999999999999 50\n20 100\n", "src:4:", "out of range"},
  };
  for (const Case& c : cases) {
    INFO(c.text);
    CHECK_THROWS_AS(FlowSizeCdf::parse(c.text, "src"), std::invalid_argument);
    CHECK_THROWS_WITH(FlowSizeCdf::parse(c.text, "src"), StartsWith(c.where) && Contains(c.reason));
  }
}

TEST_CASE("flow_size_cdf: load() and resolve() name the file") {
  const TempFile bad("0 0\n10 50\n5 100\n");
  CHECK_THROWS_WITH(FlowSizeCdf::load(bad.path), StartsWith(bad.path + ":3:"));
  CHECK_THROWS_WITH(FlowSizeCdf::resolve(bad.path), StartsWith(bad.path + ":3:"));

  const TempFile good("0 0\n10 50\n20 100\n");
  CHECK(FlowSizeCdf::resolve(good.path).max_bytes() == 20);

  const std::string missing = "/nonexistent/spraynet/cdf.txt";
  CHECK_THROWS_WITH(FlowSizeCdf::load(missing), StartsWith(missing + ": cannot open"));
  CHECK_THROWS_WITH(FlowSizeCdf::resolve(missing),
                    Contains(missing) && Contains("websearch") && Contains("alistorage2019"));
}

TEST_CASE("flow_size_cdf: an unknown built-in lists the allowed names") {
  CHECK_THROWS_AS(FlowSizeCdf::builtin("hadoop"), std::invalid_argument);
  CHECK_THROWS_WITH(FlowSizeCdf::builtin("hadoop"),
                    Contains("hadoop") && Contains("websearch") && Contains("alistorage2019"));
}

TEST_CASE("flow_size_cdf: bin edges are increasing, end at max, and split flows evenly") {
  for (const std::string& name : FlowSizeCdf::builtin_names()) {
    const FlowSizeCdf cdf = FlowSizeCdf::builtin(name);
    for (size_t bins = 1; bins <= 20; ++bins) {
      INFO(name << " bins " << bins);
      const std::vector<uint64_t> edges = cdf.bin_edges(bins);
      REQUIRE(!edges.empty());
      CHECK(edges.size() <= bins);
      CHECK(edges.back() == cdf.max_bytes());
      for (size_t i = 1; i < edges.size(); ++i) CHECK(edges[i] > edges[i - 1]);
      CHECK(FlowSizeCdf::bin_of(edges, cdf.max_bytes()) == edges.size() - 1);
    }
  }

  // Websearch's deciles, worked by hand from the table: 10% lies 10/15 of the way to 10 KB,
  // 50% lies 10/13 of the way from 50 KB to 80 KB, the rest are table points.
  const FlowSizeCdf web = FlowSizeCdf::builtin("websearch");
  const std::vector<uint64_t> edges = web.bin_edges();
  CHECK(edges == std::vector<uint64_t>{6667, 20000, 30000, 50000, 73077, 200000, 1000000, 2000000,
                                       5000000, 30000000});
  CHECK(FlowSizeCdf::bin_of(edges, 1) == 0);
  CHECK(FlowSizeCdf::bin_of(edges, 6667) == 0);
  CHECK(FlowSizeCdf::bin_of(edges, 6668) == 1);
  CHECK(FlowSizeCdf::bin_of(edges, 30000000) == 9);
  CHECK(FlowSizeCdf::bin_of(edges, 40000000) == 9);  // beyond the last edge: last bin

  // Roughly equal shares of sampled flows per bin.
  std::mt19937_64 rng(7);
  std::vector<size_t> counts(edges.size(), 0);
  constexpr int kSamples = 100000;
  for (int i = 0; i < kSamples; ++i) ++counts[FlowSizeCdf::bin_of(edges, web.sample(uniform(rng)))];
  for (size_t i = 0; i < counts.size(); ++i) {
    INFO("bin " << i);
    CHECK(std::abs(static_cast<double>(counts[i]) / kSamples - 0.1) < 0.01);
  }

  // A point mass merges the bins it spans: half the flows are exactly 1000 bytes.
  const FlowSizeCdf mass = FlowSizeCdf::parse("0 0\n1000 50\n1000 100\n", "mass");
  CHECK(mass.bin_edges(10) == std::vector<uint64_t>{200, 400, 600, 800, 1000});
  CHECK_THROWS_AS(mass.bin_edges(0), std::invalid_argument);
  CHECK_THROWS_AS(FlowSizeCdf::bin_of({}, 5), std::invalid_argument);
}
