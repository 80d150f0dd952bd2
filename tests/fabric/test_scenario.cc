// Scenarios: the expressions and conditions a verdict is computed with, what a scenario file
// may say (and the errors when it says something else), how runs and quick overrides combine,
// and that every scenario shipped in configs/scenarios loads.
#include "fabric/scenario.h"

#include <catch2/catch.hpp>

#include <cmath>

#include "control/config_reader.h"

using namespace spraynet::fabric;
using Values = std::map<std::string, std::vector<double>>;

TEST_CASE("expressions evaluate seed by seed with precedence, parentheses and broadcast") {
  const Values v{{"a", {1, 2, 3}}, {"b", {2, 4, 6}}, {"k", {10}}};
  CHECK(ScenarioExpr::parse("a + b * 2").eval(v) == std::vector<double>{5, 10, 15});
  CHECK(ScenarioExpr::parse("(a + b) * 2").eval(v) == std::vector<double>{6, 12, 18});
  CHECK(ScenarioExpr::parse("b / a - 1").eval(v) == std::vector<double>{1, 1, 1});
  CHECK(ScenarioExpr::parse("k - a").eval(v) == std::vector<double>{9, 8, 7});
  CHECK(ScenarioExpr::parse("-a + 0.5").eval(v) == std::vector<double>{-0.5, -1.5, -2.5});
  CHECK(ScenarioExpr::parse("1e-3 * k").eval(v) == std::vector<double>{0.01});
  CHECK(ScenarioExpr::parse("b / a - k").names() == std::vector<std::string>{"a", "b", "k"});
  CHECK(std::isinf(ScenarioExpr::parse("a / 0").eval(v)[0]));
  CHECK_THROWS_WITH(ScenarioExpr::parse("a +").eval(v), Catch::Contains("position 4"));
  CHECK_THROWS_WITH(ScenarioExpr::parse("(a + b"), Catch::Contains("')'"));
  CHECK_THROWS_WITH(ScenarioExpr::parse("a b"), Catch::Contains("an operator or the end"));
  CHECK_THROWS_WITH(ScenarioExpr::parse("a + c").eval(v), Catch::Contains("no measure called 'c'"));
  // min and max seed by seed, any number of arguments, nested, broadcast.
  const Values w{{"x", {1, 5, 3}}, {"y", {4, 2, 3}}, {"z", {0, 9, 2}}};
  CHECK(ScenarioExpr::parse("min(x, y)").eval(w) == std::vector<double>{1, 2, 3});
  CHECK(ScenarioExpr::parse("max(x, y, z)").eval(w) == std::vector<double>{4, 9, 3});
  CHECK(ScenarioExpr::parse("1 - x / min(y, max(z, 2))").eval(w) == std::vector<double>{0.5, -1.5, -0.5});
  CHECK(ScenarioExpr::parse("min(x, 2)").eval(w) == std::vector<double>{1, 2, 2});
  CHECK(ScenarioExpr::parse("min (x)").names() == std::vector<std::string>{"x"});
  CHECK_THROWS_WITH(ScenarioExpr::parse("sum(x, y)"), Catch::Contains("only min( and max("));
  CHECK_THROWS_WITH(ScenarioExpr::parse("min(x y)"), Catch::Contains("',' or ')'"));
  CHECK_THROWS_WITH(ScenarioExpr::parse("min(x,"), Catch::Contains("a number, a name or '('"));
  const Values uneven{{"a", {1, 2}}, {"b", {1, 2, 3}}};
  CHECK_THROWS_WITH(ScenarioExpr::parse("a + b").eval(uneven), Catch::Contains("different numbers of seeds"));
}

TEST_CASE("conditions compare the means of two expressions") {
  const Values v{{"a", {1, 3}}, {"b", {2, 2}}};
  CHECK(ScenarioCondition::parse("a <= b").holds(v));
  CHECK(ScenarioCondition::parse("a >= b").holds(v));
  CHECK(ScenarioCondition::parse("a == b").holds(v));
  CHECK_FALSE(ScenarioCondition::parse("a < b").holds(v));
  CHECK_FALSE(ScenarioCondition::parse("a != b").holds(v));
  CHECK(ScenarioCondition::parse("a * 2 > b").holds(v));
  CHECK_THROWS_WITH(ScenarioCondition::parse("a b"), Catch::Contains("< <= > >= == !="));
}

namespace {

const char* kScenario = R"(
scenario:
  claim: spraying beats ECMP
  article: "+40%"
  fabric: {leaves: 2, spines: 4, hosts_per_leaf: 4, mode: [ecmp, spray], duration: 2ms, seeds: 1-5}
  quick: {duration: 1ms, seeds: 1-2}
  runs:
    - name: base
    - name: slow
      fabric: {link_gbps: 25}
      quick: {seeds: 3}
  measure:
    ecmp: {mode: ecmp, metric: throughput_fraction}
    spray: {run: base, mode: spray, metric: throughput_fraction}
    p99: {run: slow, mode: spray, metric: fct_us.p99}
  figures:
    - {label: gain, value: "spray / ecmp - 1", article: "+0.40"}
  verdict:
    - {when: ["spray / ecmp >= 1.4"], say: holds}
    - {when: ["spray > ecmp"], say: holds in direction only, why: smaller gain}
    - {say: does not hold}
)";

RunResult run(const std::string& mode, uint64_t seed, double throughput) {
  RunResult r;
  r.mode = mode;
  r.seed = seed;
  r.throughput_fraction = throughput;
  return r;
}

}  // namespace

TEST_CASE("a scenario's runs are the base with their overrides; --quick applies its own last") {
  const Scenario full = parse_scenario_yaml(kScenario, "s.yaml", false);
  REQUIRE(full.runs.size() == 2);
  CHECK(full.name == "s");
  CHECK(full.runs[0].name == "base");
  CHECK(full.runs[0].config.spines == 4);
  CHECK(full.runs[0].config.duration_ns == 2'000'000);
  CHECK(full.runs[0].config.seed_last == 5);
  CHECK(full.runs[1].config.link_gbps == 25);
  CHECK(full.runs[1].config.spines == 4);
  CHECK(full.runs[1].config.seed_last == 5);
  const Scenario quick = parse_scenario_yaml(kScenario, "s.yaml", true);
  CHECK(quick.runs[0].config.duration_ns == 1'000'000);
  CHECK(quick.runs[0].config.seed_last == 2);
  CHECK(quick.runs[1].config.seed_first == 3);
  CHECK(quick.runs[1].config.seed_last == 3);
  CHECK(quick.runs[1].config.link_gbps == 25);
  REQUIRE(full.measures.size() == 3);
  CHECK(full.measures[0].run == "base");  // the first run unless named
  CHECK(full.measures[2].metric == "fct_us.p99");
}

TEST_CASE("the first verdict rule whose conditions hold on the measured means decides") {
  const Scenario s = parse_scenario_yaml(kScenario, "s.yaml", false);
  const auto results = [](double ecmp, double spray) {
    std::map<std::string, std::vector<RunResult>> m;
    for (const char* name : {"base", "slow"}) {
      for (uint64_t seed = 1; seed <= 2; ++seed) {
        m[name].push_back(run("ecmp", seed, ecmp + 0.01 * static_cast<double>(seed)));
        m[name].push_back(run("spray", seed, spray));
      }
    }
    return m;
  };
  ScenarioResult r = evaluate_scenario(s, results(0.60, 0.97));
  CHECK(r.verdict == "holds");
  REQUIRE(r.figures.size() == 1);
  CHECK(r.figures[0].n == 2);
  CHECK(r.figures[0].mean == Approx((0.97 / 0.61 + 0.97 / 0.62) / 2 - 1));
  CHECK(r.figures[0].stddev > 0);
  CHECK(r.measures.at("ecmp") == std::vector<double>{0.61, 0.62});
  r = evaluate_scenario(s, results(0.80, 0.97));
  CHECK(r.verdict == "holds in direction only");
  CHECK(r.why == "smaller gain");
  r = evaluate_scenario(s, results(0.97, 0.90));
  CHECK(r.verdict == "does not hold");
  CHECK(format_scenario(r).find("does not hold") != std::string::npos);
  CHECK(to_json(r)["figures"][0]["label"] == "gain");
}

TEST_CASE("a metric is a path to a number in a run's report") {
  std::vector<RunResult> runs{run("spray", 1, 0.9)};
  runs[0].fct_p99_us = 12.5;
  CHECK(metric_values(runs, "spray", "throughput_fraction") == std::vector<double>{0.9});
  CHECK(metric_values(runs, "spray", "fct_us.p99") == std::vector<double>{12.5});
  CHECK_THROWS_WITH(metric_values(runs, "spray", "fct_us.p98"), Catch::Contains("no 'fct_us.p98'"));
  CHECK_THROWS_WITH(metric_values(runs, "spray", "fct_us"), Catch::Contains("not a number"));
  CHECK_THROWS_WITH(metric_values(runs, "ecmp", "throughput_fraction"), Catch::Contains("no run of mode ecmp"));
}

TEST_CASE("scenario files that say something else get errors naming the key") {
  const auto error_of = [](const std::string& body) {
    try {
      parse_scenario_yaml("scenario:\n  claim: c\n  fabric: {mode: [ecmp, spray]}\n" + body, "bad.yaml", false);
    } catch (const spraynet::control::ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string ok_figure = "  figures: [{label: x, value: e}]\n";
  const std::string ok_verdict = "  verdict: [{say: s}]\n";
  CHECK_THAT(error_of("  measure: {e: {mode: dlb, metric: m}}\n" + ok_figure + ok_verdict),
             Catch::Contains("scenario.measure.e.mode") && Catch::Contains("ecmp, spray"));
  CHECK_THAT(error_of("  measure: {e: {run: other, mode: ecmp, metric: m}}\n" + ok_figure + ok_verdict),
             Catch::Contains("no run called 'other'"));
  CHECK_THAT(error_of("  measure: {e: {mode: ecmp, metric: m}}\n  figures: [{label: x, value: f}]\n" + ok_verdict),
             Catch::Contains("'f' is not one of the measures"));
  CHECK_THAT(error_of("  measure: {e: {mode: ecmp, metric: m}}\n" + ok_figure + "  verdict: [{when: [e > 1], say: s}]\n"),
             Catch::Contains("last rule must have no conditions"));
  CHECK_THAT(error_of("  measure: {e: {mode: ecmp, metric: m}}\n" + ok_figure + ok_verdict + "  colour: red\n"),
             Catch::Contains("colour"));
  CHECK_THAT(error_of("  measure: {e: {mode: ecmp, metric: m}}\n" + ok_figure + ok_verdict +
                      "  runs: [{name: a, fabric: {spines: many}}]\n"),
             Catch::Contains("bad.yaml (scenario.runs[0].fabric)") && Catch::Contains("spines"));
}

TEST_CASE("every scenario in configs/scenarios loads, full and quick") {
  const std::string dir = std::string(SPRAYNET_SOURCE_DIR) + "/configs/scenarios";
  const std::vector<std::string> names = list_scenarios(dir);
  REQUIRE_FALSE(names.empty());
  for (const std::string& name : names) {
    INFO(name);
    for (bool quick : {false, true}) {
      const Scenario s = load_scenario(scenario_path(dir, name), quick);
      CHECK(s.name == name);
      CHECK_FALSE(s.claim.empty());
      CHECK_FALSE(s.figures.empty());
    }
  }
}
