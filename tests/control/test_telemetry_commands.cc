// What a telemetry reply becomes on DPDK's socket (TelemetryCommands::flatten, which
// to_telemetry sends): one level of keys, and every number a whole JSON number, since DPDK
// 22.11's rte_tel_data has no float type and quotes its strings.
#include "control/telemetry_commands.h"

#include <catch2/catch.hpp>

#include <rte_telemetry.h>

#include <cstdint>
#include <limits>

using nlohmann::json;
using spraynet::control::TelemetryCommands;

TEST_CASE("telemetry: floats travel as whole numbers in the unit their key names") {
  const json reply = {{"rate_gbps", 10.0},
                      {"utilisation", 0.25},
                      {"ber", 1e-12},
                      {"frame_loss_ratio", 0.001},
                      {"loss_rate", 0.5},
                      {"jitter_ns", 71686.2},
                      {"completion_ns", {{"mean", 3.007281e9}, {"count", 4}}},
                      {"alpha", 1.0 / 8}};
  const json flat = TelemetryCommands::flatten(reply);
  CHECK(flat == json{{"rate_mbps", 10000u},
                     {"utilisation_ppm", 250000u},
                     {"ber_ppq", 1000u},
                     {"frame_loss_ratio_ppq", 1000000000000u},
                     {"loss_rate_ppq", 500000000000000u},
                     {"jitter_ns", 71686u},
                     {"completion_ns/mean", 3007281000u},
                     {"completion_ns/count", 4u},
                     {"alpha_ppm", 125000u}});
  for (const auto& [k, v] : flat.items()) {
    INFO(k);
    CHECK(v.is_number_unsigned());
  }
}

TEST_CASE("telemetry: integers keep their value past 32 bits; booleans are 0/1") {
  const json flat = TelemetryCommands::flatten(
      {{"big", int64_t{5'000'000'000}}, {"neg", -3}, {"up", true}, {"name", "in0"}});
  CHECK(flat.at("big") == 5'000'000'000u);
  CHECK(flat.at("big").is_number_unsigned());
  CHECK(flat.at("neg") == -3);
  CHECK(flat.at("up") == 1u);
  CHECK(flat.at("name") == "in0");
}

TEST_CASE("telemetry: nested objects and arrays of objects flatten to a/b and a/<i>/b") {
  const json flat = TelemetryCommands::flatten(
      {{"links", json::array({{{"port", "a"}, {"rate_gbps", 0.001}}, {{"port", "b"}}})},
       {"egress", {{"queued", 3}}},
       {"rates", json::array({0.5, 2.0})},
       {"weights", json::array({1, 2})}});
  CHECK(flat.at("links/0/port") == "a");
  CHECK(flat.at("links/0/rate_mbps") == 1u);
  CHECK(flat.at("links/1/port") == "b");
  CHECK(flat.at("egress/queued") == 3u);
  CHECK(flat.at("rates_ppm") == json::array({500000u, 2000000u}));
  CHECK(flat.at("weights") == json::array({1, 2}));
  // A reply that is an array of objects (nic_emu's ports) becomes <index>/field entries.
  const json ports = TelemetryCommands::flatten(
      json::array({{{"name", "u0"}, {"rx_packets", 5u}}, {{"name", "u1"}}}));
  CHECK(ports == json{{"0/name", "u0"}, {"0/rx_packets", 5u}, {"1/name", "u1"}});
  // An array of names stays an array.
  CHECK(TelemetryCommands::flatten(json::array({"in", "out"})) == json::array({"in", "out"}));
}

TEST_CASE("telemetry: huge and non-finite floats") {
  const json flat = TelemetryCommands::flatten(
      {{"huge_ns", 1e30}, {"nan_ns", std::numeric_limits<double>::quiet_NaN()}});
  CHECK(flat.at("huge_ns") == std::numeric_limits<uint64_t>::max());
  CHECK(flat.at("nan_ns").is_number_float());  // sent as text: JSON has no number for NaN
}

TEST_CASE("telemetry: to_telemetry fills a dict from the flattened reply") {
  rte_tel_data* d = rte_tel_data_alloc();
  REQUIRE(d != nullptr);
  // No array inside the dict: DPDK frees a nested container only when it sends the reply, so
  // one made here would leak (LeakSanitizer); an array reply fills `d` itself.
  const json reply = {{"rate_gbps", 25.0}, {"count", 3}};
  CHECK(TelemetryCommands::to_telemetry(reply, d) == 0);
  rte_tel_data_free(d);
  rte_tel_data* a = rte_tel_data_alloc();
  REQUIRE(a != nullptr);
  CHECK(TelemetryCommands::to_telemetry(json::array({1, 2}), a) == 0);
  rte_tel_data_free(a);
}
