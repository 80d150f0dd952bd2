#include "fabric/scenario.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <set>
#include <sstream>
#include <stdexcept>

#include "control/config_reader.h"
#include "fabric/source_tree.h"

namespace spraynet::fabric {

// ---- expressions ----

struct ScenarioExpr::Node {
  char op = 0;  // 0: leaf; + - * / ; 'n': negate; 'm' / 'M': min / max of a and b
  double number = 0;
  std::string name;  // leaf: a measure name, or empty for a number
  std::shared_ptr<const Node> a, b;
};

namespace {

using Values = std::map<std::string, std::vector<double>>;
using NodePtr = std::shared_ptr<const ScenarioExpr::Node>;

class ExprParser {
 public:
  explicit ExprParser(const std::string& text) : s_(text) {}

  NodePtr parse_all() {
    NodePtr n = expr();
    skip();
    if (i_ != s_.size()) fail("an operator or the end");
    return n;
  }

 private:
  [[noreturn]] void fail(const std::string& expected) const {
    throw std::invalid_argument("'" + s_ + "': expected " + expected + " at position " +
                                std::to_string(i_ + 1));
  }
  void skip() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  NodePtr binary(char op, NodePtr a, NodePtr b) {
    auto n = std::make_shared<ScenarioExpr::Node>();
    n->op = op;
    n->a = std::move(a);
    n->b = std::move(b);
    return n;
  }
  // One precedence level: operands from `next`, joined left to right by the operators in `ops`.
  NodePtr level(const char* ops, NodePtr (ExprParser::*next)()) {
    NodePtr n = (this->*next)();
    for (;;) {
      skip();
      if (i_ >= s_.size() || std::strchr(ops, s_[i_]) == nullptr) return n;
      const char op = s_[i_++];
      n = binary(op, n, (this->*next)());
    }
  }
  NodePtr expr() { return level("+-", &ExprParser::term); }
  NodePtr term() { return level("*/", &ExprParser::factor); }
  NodePtr factor() {
    skip();
    if (i_ >= s_.size()) fail("a number, a name or '('");
    const char c = s_[i_];
    if (c == '(') {
      ++i_;
      NodePtr n = expr();
      skip();
      if (i_ >= s_.size() || s_[i_] != ')') fail("')'");
      ++i_;
      return n;
    }
    if (c == '-') {
      ++i_;
      auto n = std::make_shared<ScenarioExpr::Node>();
      n->op = 'n';
      n->a = factor();
      return n;
    }
    auto leaf = std::make_shared<ScenarioExpr::Node>();
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '.') {
      const char* start = s_.c_str() + i_;
      char* end = nullptr;
      leaf->number = std::strtod(start, &end);
      if (end == start) fail("a number");
      i_ += static_cast<size_t>(end - start);
      return leaf;
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      const size_t from = i_;
      while (i_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[i_])) || s_[i_] == '_')) ++i_;
      leaf->name = s_.substr(from, i_ - from);
      skip();
      if (i_ < s_.size() && s_[i_] == '(') return call(leaf->name);
      return leaf;
    }
    fail("a number, a name or '('");
  }

  // min(e, e, ...) and max(...), seed by seed: "the best of the other schemes" is a paper's
  // usual baseline. Folded into binary nodes, left to right.
  NodePtr call(const std::string& fn) {
    if (fn != "min" && fn != "max") fail("an operator (only min( and max( take arguments)");
    ++i_;  // '('
    NodePtr n = expr();
    for (;;) {
      skip();
      if (i_ < s_.size() && s_[i_] == ',') {
        ++i_;
        n = binary(fn == "min" ? 'm' : 'M', n, expr());
        continue;
      }
      if (i_ >= s_.size() || s_[i_] != ')') fail("',' or ')'");
      ++i_;
      return n;
    }
  }

  const std::string& s_;
  size_t i_ = 0;
};

std::vector<double> eval_node(const ScenarioExpr::Node& n, const Values& v) {
  if (n.op == 0) {
    if (n.name.empty()) return {n.number};
    const auto it = v.find(n.name);
    if (it == v.end()) throw std::invalid_argument("no measure called '" + n.name + "'");
    return it->second;
  }
  const std::vector<double> a = eval_node(*n.a, v);
  if (n.op == 'n') {
    std::vector<double> r = a;
    for (double& x : r) x = -x;
    return r;
  }
  const std::vector<double> b = eval_node(*n.b, v);
  if (a.size() != b.size() && a.size() != 1 && b.size() != 1) {
    throw std::invalid_argument("measures with different numbers of seeds (" +
                                std::to_string(a.size()) + " and " + std::to_string(b.size()) + ")");
  }
  const size_t len = std::max(a.size(), b.size());
  std::vector<double> r(len);
  for (size_t i = 0; i < len; ++i) {
    const double x = a[a.size() == 1 ? 0 : i];
    const double y = b[b.size() == 1 ? 0 : i];
    switch (n.op) {
      case '+': r[i] = x + y; break;
      case '-': r[i] = x - y; break;
      case '*': r[i] = x * y; break;
      case 'm': r[i] = std::min(x, y); break;
      case 'M': r[i] = std::max(x, y); break;
      // x / 0: infinite or NaN, which the report shows as it is rather than hiding.
      default: r[i] = x / y; break;
    }
  }
  return r;
}

void collect_names(const ScenarioExpr::Node& n, std::set<std::string>& out) {
  if (n.op == 0) {
    if (!n.name.empty()) out.insert(n.name);
    return;
  }
  collect_names(*n.a, out);
  if (n.b) collect_names(*n.b, out);
}

double mean_of(const std::vector<double>& v) {
  if (v.empty()) return 0;
  double s = 0;
  for (double x : v) s += x;
  return s / static_cast<double>(v.size());
}

double stddev_of(const std::vector<double>& v) {
  if (v.size() < 2) return 0;
  const double m = mean_of(v);
  double s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return std::sqrt(s / static_cast<double>(v.size() - 1));
}

}  // namespace

ScenarioExpr ScenarioExpr::parse(const std::string& text) {
  ScenarioExpr e;
  e.text_ = text;
  e.root_ = ExprParser(text).parse_all();
  return e;
}

std::vector<double> ScenarioExpr::eval(const Values& values) const { return eval_node(*root_, values); }

std::vector<std::string> ScenarioExpr::names() const {
  std::set<std::string> s;
  collect_names(*root_, s);
  return {s.begin(), s.end()};
}

ScenarioCondition ScenarioCondition::parse(const std::string& text) {
  // The two-character operators first, so that "<=" is not read as "<".
  static const char* const kOps[] = {"<=", ">=", "==", "!=", "<", ">"};
  for (const char* op : kOps) {
    const size_t at = text.find(op);
    if (at == std::string::npos) continue;
    return {ScenarioExpr::parse(text.substr(0, at)), op,
            ScenarioExpr::parse(text.substr(at + std::string(op).size())), text};
  }
  throw std::invalid_argument("'" + text + "': a condition compares two expressions with < <= > >= == !=");
}

bool ScenarioCondition::holds(const Values& values) const {
  const double a = mean_of(lhs.eval(values));
  const double b = mean_of(rhs.eval(values));
  if (op == "<") return a < b;
  if (op == "<=") return a <= b;
  if (op == ">") return a > b;
  if (op == ">=") return a >= b;
  if (op == "==") return a == b;
  return a != b;
}

// ---- loading ----

namespace {

// Applies the fabric map at parent[key] (if any) over `base`. Errors name the scenario file and
// the map's place in it: "configs/scenarios/x.yaml (scenario.runs[1].fabric): fabric.duration: ...".
FabricConfig apply_fabric_map(const control::ConfigNode& parent, std::string_view key, FabricConfig base) {
  const auto n = parent.optional_child(key);
  if (!n) return base;
  YAML::Node root;
  root["fabric"] = n->yaml();
  YAML::Emitter out;
  out << root;
  return parse_fabric_config_yaml(out.c_str(), parent.file() + " (" + n->path() + ")", base);
}

std::string mode_list(const FabricConfig& c) {
  std::string s;
  for (FabricMode m : c.modes) s += (s.empty() ? "" : ", ") + std::string(to_string(m));
  return s;
}

}  // namespace

namespace {

// "a, b, c" (the scenarios in `dir`), or "none": for errors that list what there is.
std::string names_in(const std::string& dir) {
  std::string known;
  for (const std::string& n : list_scenarios(dir)) known += (known.empty() ? "" : ", ") + n;
  return known.empty() ? "none" : known;
}

Scenario parse_scenario(const control::ConfigNode& root, const std::string& name, bool quick) {
  root.allow_only({"scenario", "preset"});
  // A preset is a published set-up to run (its runs and their --quick form), with no verdict.
  const bool preset = root.has("preset");
  if (preset && root.has("scenario")) root.fail("preset", "a file is a scenario or a preset");
  const control::ConfigNode n = root.child(preset ? "preset" : "scenario");
  if (preset) {
    n.allow_only({"about", "source", "scaled", "fabric", "quick", "runs"});
  } else {
    n.allow_only({"claim", "article", "source", "scaled", "setup", "setup_run", "fabric", "quick", "runs",
                  "measure", "figures", "verdict"});
  }
  Scenario s;
  s.file = name;
  s.name = std::filesystem::path(name).stem().string();
  s.preset = preset;
  s.claim = n.string(preset ? "about" : "claim");
  s.article = n.string_or("article", "");
  s.source = n.string_or("source", "");
  s.scaled = n.string_or("scaled", "");

  // setup: a preset's fabric (and, with --quick, its quick form) to start from, so that a
  // paper's claim is measured on the set-up that presets/NAME.yaml documents, not a copy of it.
  FabricConfig start;
  if (!preset && n.has("setup")) {
    const std::string setup = n.string("setup");
    const std::string path = default_preset_dir() + "/" + setup + ".yaml";
    if (setup.find('/') != std::string::npos || !std::filesystem::exists(path)) {
      n.fail("setup", "one of the presets in " + default_preset_dir() + ": " +
                          names_in(default_preset_dir()) + ", got '" + setup + "'");
    }
    const Scenario p = load_scenario(path, quick);
    // A preset of several runs (hpcc-websearch's loads): setup_run names the one to start from.
    if (n.has("setup_run")) {
      const std::string want = n.string("setup_run");
      std::string names;
      const ScenarioRun* found = nullptr;
      for (const ScenarioRun& r : p.runs) {
        names += (names.empty() ? "" : ", ") + r.name;
        if (r.name == want) found = &r;
      }
      if (found == nullptr) {
        n.fail("setup_run", "one of preset '" + setup + "''s runs: " + names + ", got '" + want + "'");
      }
      start = found->config;
    } else {
      if (p.runs.size() != 1) {
        n.fail("setup", "preset '" + setup + "' has several runs: name one with setup_run");
      }
      start = p.runs.front().config;
    }
  }
  const FabricConfig base = apply_fabric_map(n, "fabric", start);
  const std::vector<control::ConfigNode> runs = n.list("runs");
  const auto finish_run = [&](const std::string& run_name, FabricConfig c,
                              const control::ConfigNode* run) {
    if (quick) c = apply_fabric_map(n, "quick", c);
    if (quick && run != nullptr) c = apply_fabric_map(*run, "quick", c);
    for (const ScenarioRun& r : s.runs) {
      if (r.name == run_name) n.fail("runs", "two runs called '" + run_name + "'");
    }
    s.runs.push_back({run_name, std::move(c)});
  };
  if (runs.empty()) {
    finish_run("base", base, nullptr);
  }
  for (const control::ConfigNode& r : runs) {
    r.allow_only({"name", "fabric", "quick"});
    finish_run(r.string("name"), apply_fabric_map(r, "fabric", base), &r);
  }

  if (preset) return s;
  const auto measure = n.optional_child("measure");
  if (!measure) n.fail("measure", "required: named figures, e.g. ecmp: {run: base, mode: ecmp, metric: throughput_fraction}");
  for (auto it = measure->yaml().begin(); it != measure->yaml().end(); ++it) {
    const std::string key = it->first.as<std::string>();
    const control::ConfigNode m = measure->child(key);
    m.allow_only({"run", "mode", "metric"});
    ScenarioMeasure sm{key, m.string_or("run", s.runs.front().name), m.string("mode"), m.string("metric")};
    if (key.empty() || !(std::isalpha(static_cast<unsigned char>(key[0])) || key[0] == '_') ||
        !std::all_of(key.begin(), key.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; })) {
      measure->fail(key, "a measure's name is letters, digits and '_', starting with a letter");
    }
    const auto run = std::find_if(s.runs.begin(), s.runs.end(), [&](const ScenarioRun& r) { return r.name == sm.run; });
    if (run == s.runs.end()) m.fail("run", "no run called '" + sm.run + "'");
    const auto mode = parse_fabric_mode(sm.mode);
    if (!mode || std::find(run->config.modes.begin(), run->config.modes.end(), *mode) == run->config.modes.end()) {
      m.fail("mode", "one of run '" + sm.run + "''s modes: " + mode_list(run->config) + ", got '" + sm.mode + "'");
    }
    s.measures.push_back(std::move(sm));
  }
  std::set<std::string> known;
  for (const ScenarioMeasure& m : s.measures) known.insert(m.name);
  const auto check_names = [&](const control::ConfigNode& at, std::string_view key, const ScenarioExpr& e) {
    for (const std::string& used : e.names()) {
      if (known.count(used) == 0) at.fail(key, "'" + used + "' is not one of the measures");
    }
  };
  const auto expr = [&](const control::ConfigNode& at, std::string_view key) {
    try {
      ScenarioExpr e = ScenarioExpr::parse(at.string(key));
      check_names(at, key, e);
      return e;
    } catch (const std::invalid_argument& e) {
      at.fail(key, e.what());
    }
  };
  for (const control::ConfigNode& f : n.list("figures")) {
    f.allow_only({"label", "value", "article", "unit"});
    s.figures.push_back({f.string("label"), expr(f, "value"), f.string_or("article", ""), f.string_or("unit", "")});
  }
  if (s.figures.empty()) n.fail("figures", "required: at least one {label, value}");
  const std::vector<control::ConfigNode> rules = n.list("verdict");
  if (rules.empty()) n.fail("verdict", "required: rules {when: [conditions], say, why}, the last without 'when'");
  for (const control::ConfigNode& r : rules) {
    r.allow_only({"when", "say", "why"});
    ScenarioVerdictRule rule;
    for (const std::string& text : r.string_list("when")) {
      try {
        rule.when.push_back(ScenarioCondition::parse(text));
        check_names(r, "when", rule.when.back().lhs);
        check_names(r, "when", rule.when.back().rhs);
      } catch (const std::invalid_argument& e) {
        r.fail("when", e.what());
      }
    }
    rule.say = r.string("say");
    rule.why = r.string_or("why", "");
    s.verdict.push_back(std::move(rule));
  }
  if (!s.verdict.back().when.empty()) {
    rules.back().fail("when", "the last rule must have no conditions, so that every outcome has a verdict");
  }
  return s;
}

}  // namespace

Scenario parse_scenario_yaml(const std::string& yaml, const std::string& name, bool quick) {
  return parse_scenario(control::ConfigNode::load_string(yaml, name), name, quick);
}

Scenario load_scenario(const std::string& path, bool quick) {
  return parse_scenario(control::ConfigNode::load_file(path), path, quick);
}

std::string default_scenario_dir() {
  if (const char* env = std::getenv("SPRAYNET_SCENARIOS")) return env;
  return tree_path("configs/scenarios");
}

std::string default_preset_dir() {
  if (const char* env = std::getenv("SPRAYNET_PRESETS")) return env;
  return tree_path("configs/presets");
}

std::string default_research_dir() {
  if (const char* env = std::getenv("SPRAYNET_RESEARCH")) return env;
  return tree_path("configs/research");
}

std::string find_scenario(const std::string& name_or_path) {
  if (name_or_path.find('/') != std::string::npos || name_or_path.ends_with(".yaml")) {
    return name_or_path;
  }
  const std::string scenarios = default_scenario_dir();
  if (!std::filesystem::exists(scenarios + "/" + name_or_path + ".yaml")) {
    for (const std::string& dir : {default_research_dir(), default_preset_dir()}) {
      const std::string path = dir + "/" + name_or_path + ".yaml";
      if (std::filesystem::exists(path)) return path;
    }
  }
  try {
    return scenario_path(scenarios, name_or_path);
  } catch (const std::invalid_argument& e) {
    std::string what = e.what();
    for (const auto& [kind, dir] : {std::pair<std::string, std::string>{"research claims", default_research_dir()},
                                    {"presets", default_preset_dir()}}) {
      what += "; " + kind + " in " + dir + ": " + names_in(dir);
    }
    throw std::invalid_argument(what);
  }
}

std::vector<std::string> list_scenarios(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    if (e.path().extension() == ".yaml") names.push_back(e.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string scenario_path(const std::string& dir, const std::string& name_or_path) {
  if (name_or_path.find('/') != std::string::npos || name_or_path.ends_with(".yaml")) return name_or_path;
  const std::string path = dir + "/" + name_or_path + ".yaml";
  if (!std::filesystem::exists(path)) {
    // A mistyped name deserves the list, not "cannot open file".
    throw std::invalid_argument("--scenario: no scenario named '" + name_or_path + "' in " + dir +
                                " (known: " + names_in(dir) + "; or give a path to a scenario file)");
  }
  return path;
}

// ---- evaluation ----

namespace {

// `metric` in each of `reports` (the JSON of runs of `mode`, in seed order).
std::vector<double> metric_values_of(const std::vector<nlohmann::json>& reports, const std::string& mode,
                                     const std::string& metric) {
  std::vector<double> out;
  for (const nlohmann::json& j : reports) {
    const nlohmann::json* at = &j;
    std::string walked;
    size_t from = 0;
    while (from <= metric.size()) {
      const size_t dot = metric.find('.', from);
      const std::string key = metric.substr(from, dot == std::string::npos ? std::string::npos : dot - from);
      walked += (walked.empty() ? "" : ".") + key;
      if (at->is_array()) {
        // A list's element by its index: slowdown.bins.0.p99 is the first size bin's p99.
        const bool digits = !key.empty() && key.size() < 9 &&
                            std::all_of(key.begin(), key.end(),
                                        [](char c) { return c >= '0' && c <= '9'; });
        if (!digits || std::stoul(key) >= at->size()) {
          throw std::invalid_argument("metric '" + metric + "': a run's report has no '" + walked +
                                      "' (a list of " + std::to_string(at->size()) +
                                      " elements, indexed from 0)");
        }
        at = &(*at)[std::stoul(key)];
      } else if (!at->is_object() || !at->contains(key)) {
        throw std::invalid_argument("metric '" + metric + "': a run's report has no '" + walked + "'");
      } else {
        at = &(*at)[key];
      }
      if (dot == std::string::npos) break;
      from = dot + 1;
    }
    if (at->is_boolean()) {
      out.push_back(at->get<bool>() ? 1.0 : 0.0);
    } else if (at->is_number()) {
      out.push_back(at->get<double>());
    } else {
      throw std::invalid_argument("metric '" + metric + "' is not a number in a run's report");
    }
  }
  if (out.empty()) throw std::invalid_argument("metric '" + metric + "': no run of mode " + mode);
  return out;
}

// Each mode's run reports, built once for every measure that reads them.
std::map<std::string, std::vector<nlohmann::json>> reports_by_mode(const std::vector<RunResult>& runs) {
  std::map<std::string, std::vector<nlohmann::json>> by_mode;
  for (const RunResult& r : runs) by_mode[r.mode].push_back(to_json(r));
  return by_mode;
}

std::vector<double> metric_of(const std::map<std::string, std::vector<nlohmann::json>>& by_mode,
                              const std::string& mode, const std::string& metric) {
  static const std::vector<nlohmann::json> kNone;
  const auto it = by_mode.find(mode);
  return metric_values_of(it == by_mode.end() ? kNone : it->second, mode, metric);
}

}  // namespace

std::vector<double> metric_values(const std::vector<RunResult>& runs, const std::string& mode,
                                  const std::string& metric) {
  return metric_of(reports_by_mode(runs), mode, metric);
}

ScenarioResult evaluate_scenario(const Scenario& s,
                                 const std::map<std::string, std::vector<RunResult>>& results) {
  ScenarioResult r;
  r.name = s.name;
  r.claim = s.claim;
  r.article = s.article;
  r.source = s.source;
  r.scaled = s.scaled;
  std::map<std::string, std::map<std::string, std::vector<nlohmann::json>>> reports;
  for (const ScenarioMeasure& m : s.measures) {
    const auto it = results.find(m.run);
    if (it == results.end()) throw std::invalid_argument("no results for run '" + m.run + "'");
    if (reports.count(m.run) == 0) reports[m.run] = reports_by_mode(it->second);
    r.measures[m.name] = metric_of(reports[m.run], m.mode, m.metric);
  }
  for (const ScenarioFigure& f : s.figures) {
    const std::vector<double> v = f.value.eval(r.measures);
    r.figures.push_back({f.label, f.value.text(), mean_of(v), stddev_of(v), v.size(), f.article, f.unit});
  }
  for (const ScenarioVerdictRule& rule : s.verdict) {
    const bool all = std::all_of(rule.when.begin(), rule.when.end(),
                                 [&](const ScenarioCondition& c) { return c.holds(r.measures); });
    if (!all) continue;
    r.verdict = rule.say;
    r.why = rule.why;
    for (const ScenarioCondition& c : rule.when) r.conditions.push_back(c.text);
    break;
  }
  return r;
}

namespace {

std::string number(double v) {
  char buf[64];
  if (std::isnan(v) || std::isinf(v)) return std::to_string(v);
  const double a = std::fabs(v);
  if (a != 0 && (a >= 1e6 || a < 1e-3)) {
    std::snprintf(buf, sizeof buf, "%.3g", v);
  } else if (a >= 100) {
    std::snprintf(buf, sizeof buf, "%.1f", v);
  } else {
    std::snprintf(buf, sizeof buf, "%.3f", v);
  }
  return buf;
}

}  // namespace

std::string format_scenario(const ScenarioResult& r) {
  std::ostringstream o;
  o << "scenario " << r.name << "\n";
  o << "  claim:    " << r.claim << "\n";
  if (!r.article.empty()) o << "  article:  " << r.article << (r.source.empty() ? "" : "  (" + r.source + ")") << "\n";
  if (!r.scaled.empty()) o << "  scaled:   " << r.scaled << "\n";
  size_t width = 8;
  for (const auto& f : r.figures) width = std::max(width, f.label.size());
  o << "  " << std::string(width, ' ') << "  measured (mean ± sd over seeds)   article\n";
  for (const auto& f : r.figures) {
    std::string measured = number(f.mean);
    if (f.n > 1) measured += " ± " + number(f.stddev);
    if (!f.unit.empty()) measured += " " + f.unit;
    o << "  " << f.label << std::string(width - f.label.size(), ' ') << "  " << measured
      << std::string(measured.size() < 34 ? 34 - measured.size() : 1, ' ') << (f.article.empty() ? "-" : f.article)
      << "\n";
  }
  o << "  verdict:  " << r.verdict;
  if (!r.conditions.empty()) {
    o << " (";
    for (size_t i = 0; i < r.conditions.size(); ++i) o << (i ? ", " : "") << r.conditions[i];
    o << ")";
  }
  o << "\n";
  if (!r.why.empty()) o << "  why:      " << r.why << "\n";
  return o.str();
}

nlohmann::json to_json(const ScenarioResult& r) {
  nlohmann::json j;
  j["name"] = r.name;
  j["claim"] = r.claim;
  j["article"] = r.article;
  j["source"] = r.source;
  j["scaled"] = r.scaled;
  j["verdict"] = r.verdict;
  j["why"] = r.why;
  j["conditions"] = r.conditions;
  j["figures"] = nlohmann::json::array();
  for (const auto& f : r.figures) {
    j["figures"].push_back({{"label", f.label}, {"value", f.expr}, {"mean", f.mean}, {"stddev", f.stddev},
                            {"seeds", f.n}, {"article", f.article}, {"unit", f.unit}});
  }
  j["measures"] = r.measures;
  return j;
}

}  // namespace spraynet::fabric
