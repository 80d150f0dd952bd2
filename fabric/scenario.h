// A scenario turns one claim of the background articles into a deterministic fabric_emu
// experiment and a verdict computed from what it measures. It is a YAML file
// (configs/scenarios/NAME.yaml):
//
//   scenario:
//     claim: what the article says, in a sentence
//     article: the article's figure, as it gives it ("ECMP ~60%, spraying ~95%")
//     source: where in the articles
//     scaled: which time constants are scaled down to run here, and why (empty: none)
//     setup: PRESET             optional: start from configs/presets/PRESET.yaml's fabric (and
//                               its quick form with --quick); `fabric` and `quick` then apply
//     fabric: {...}             the base experiment: fabric_emu's YAML keys (see --help)
//     quick: {...}              overrides for --quick (fewer seeds, shorter runs)
//     runs:                     named variants of the base, each with its own overrides;
//       - name: base            default: one run called "base" with no overrides
//         fabric: {...}
//     measure:                  named figures, each one metric of one mode of one run, a value
//       ecmp: {run: base, mode: ecmp, metric: throughput_fraction}     per seed
//     figures:                  what the report shows: an expression over the measures, the
//       - {label: ..., value: "spray / ecmp", article: 1.4}            article's value if any
//     verdict:                  ordered: the first rule whose conditions all hold on the means
//       - {when: ["spray >= 0.9"], say: holds}                        decides the verdict
//       - {say: does not hold, why: the likely reason}
//
// A metric is a path into one run's JSON report ("fct_us.p99", "drops.queue_full"). Expressions
// take + - * /, parentheses, min(...) and max(...) over measure names and numbers; they are evaluated seed by seed
// (a measure of one value broadcasts), so a figure's spread is over seeds. Conditions compare
// two expressions' means with < <= > >= == !=. Nothing in the verdict is a constant chosen to
// make it hold: the rules are written before the run and the numbers pick one.
#pragma once

#include <nlohmann/json.hpp>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "fabric/fabric_config.h"
#include "fabric/fabric_report.h"

namespace spraynet::fabric {

// A parsed arithmetic expression over named per-seed values.
class ScenarioExpr {
 public:
  // Throws std::invalid_argument naming the position and what was expected.
  static ScenarioExpr parse(const std::string& text);
  // One value per seed; a name missing from `values` throws std::invalid_argument.
  std::vector<double> eval(const std::map<std::string, std::vector<double>>& values) const;
  std::vector<std::string> names() const;
  const std::string& text() const { return text_; }

  struct Node;

 private:
  std::string text_;
  std::shared_ptr<const Node> root_;
};

// lhs OP rhs, compared on the means.
struct ScenarioCondition {
  ScenarioExpr lhs;
  std::string op;
  ScenarioExpr rhs;
  std::string text;
  static ScenarioCondition parse(const std::string& text);
  bool holds(const std::map<std::string, std::vector<double>>& values) const;
};

struct ScenarioRun {
  std::string name;
  FabricConfig config;
};

struct ScenarioMeasure {
  std::string name;
  std::string run;
  std::string mode;    // as fabric_emu names it ("ecmp", "spray")
  std::string metric;  // path into the run's JSON
};

struct ScenarioFigure {
  std::string label;
  ScenarioExpr value;
  std::string article;  // the article's figure, as text; empty if it gives none
  std::string unit;
};

struct ScenarioVerdictRule {
  std::vector<ScenarioCondition> when;  // empty: always
  std::string say;
  std::string why;
};

// A preset (configs/presets/NAME.yaml) has the same form under `preset:` with `about` for
// `claim` and no measure, figures or verdict: a published set-up (a paper's topology, workload
// and settings) to run and report, with its --quick form.
struct Scenario {
  std::string name;
  std::string file;
  bool preset = false;
  std::string claim;  // a preset's `about`
  std::string article;
  std::string source;
  std::string scaled;
  std::vector<ScenarioRun> runs;
  std::vector<ScenarioMeasure> measures;
  std::vector<ScenarioFigure> figures;
  std::vector<ScenarioVerdictRule> verdict;
};

// Reads a scenario; `quick` applies its quick overrides. Throws control::ConfigError naming the
// file and key. Every run's config is checked, every figure and condition only names measures,
// every measure names a run and one of that run's modes, and the last verdict rule has no
// condition (so there always is a verdict).
Scenario load_scenario(const std::string& path, bool quick);
Scenario parse_scenario_yaml(const std::string& yaml, const std::string& name, bool quick);

// configs/scenarios under the source tree, or $SPRAYNET_SCENARIOS.
std::string default_scenario_dir();
// configs/presets under the source tree, or $SPRAYNET_PRESETS.
std::string default_preset_dir();
// configs/research under the source tree, or $SPRAYNET_RESEARCH: scenarios that test a paper's
// headline claim on its published set-up (`setup: PRESET`). Their full forms take minutes to
// hours, so scripts/claims.sh runs them only with --research; the tests run their --quick forms.
std::string default_research_dir();
// --scenario NAME: the scenario of that name, else the research claim, else the preset; a path
// is taken as it is. An unknown name is an error listing all three.
std::string find_scenario(const std::string& name_or_path);
// Names (file stems) of the scenarios in `dir`, sorted.
std::vector<std::string> list_scenarios(const std::string& dir);
// NAME -> dir/NAME.yaml; a path (containing '/' or ending .yaml) is taken as it is.
std::string scenario_path(const std::string& dir, const std::string& name_or_path);

struct ScenarioFigureResult {
  std::string label;
  std::string expr;
  double mean = 0;
  double stddev = 0;  // sample standard deviation over seeds (0 for one)
  size_t n = 0;
  std::string article;
  std::string unit;
};

struct ScenarioResult {
  std::string name;
  std::string claim;
  std::string article;
  std::string source;
  std::string scaled;
  std::vector<ScenarioFigureResult> figures;
  std::string verdict;
  std::string why;
  std::vector<std::string> conditions;  // the deciding rule's conditions, as written
  std::map<std::string, std::vector<double>> measures;
};

// The value of `metric` in each run of `mode` (in seed order). Throws std::invalid_argument when
// the path does not lead to a number.
std::vector<double> metric_values(const std::vector<RunResult>& runs, const std::string& mode,
                                  const std::string& metric);
// `results` maps each scenario run's name to its RunResults (every mode and seed).
ScenarioResult evaluate_scenario(const Scenario& s,
                                 const std::map<std::string, std::vector<RunResult>>& results);
std::string format_scenario(const ScenarioResult& r);
nlohmann::json to_json(const ScenarioResult& r);

}  // namespace spraynet::fabric
