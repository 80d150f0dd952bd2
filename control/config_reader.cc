#include "control/config_reader.h"

#include <arpa/inet.h>

#include <charconv>
#include <cmath>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace spraynet::control {

namespace {

std::string join(std::initializer_list<std::string_view> items) {
  std::string out;
  for (auto s : items) {
    if (!out.empty()) out += "|";
    out += s;
  }
  return out;
}

std::string shown(const YAML::Node& n) {
  if (n.IsScalar()) return "\"" + n.Scalar() + "\"";
  if (n.IsSequence()) return "a list";
  if (n.IsMap()) return "a map";
  return "nothing";
}

// yaml-cpp keeps both pairs of a key given twice and answers a lookup with the first, so a
// second value would be ignored without a word: refuse it, naming the key and both lines.
void refuse_duplicate_keys(const YAML::Node& n, const std::string& file, const std::string& path) {
  if (n.IsSequence()) {
    for (size_t i = 0; i < n.size(); ++i) {
      refuse_duplicate_keys(n[i], file, path + "[" + std::to_string(i) + "]");
    }
    return;
  }
  if (!n.IsMap()) return;
  std::vector<std::pair<std::string, int>> seen;  // key, line (1-based)
  for (auto it = n.begin(); it != n.end(); ++it) {
    const std::string key = it->first.IsScalar() ? it->first.Scalar() : std::string();
    const int line = it->first.Mark().line + 1;
    const std::string at = path.empty() ? key : path + "." + key;
    for (const auto& [k, l] : seen) {
      if (k == key && it->first.IsScalar()) {
        throw ConfigError(file, at,
                          "duplicate key: given at line " + std::to_string(l) + " and again at line " +
                              std::to_string(line) + " (keep one)");
      }
    }
    seen.emplace_back(key, line);
    refuse_duplicate_keys(it->second, file, at);
  }
}

}  // namespace

ConfigError::ConfigError(const std::string& file, const std::string& key,
                         const std::string& reason)
    : std::runtime_error(file + ": " + (key.empty() ? "" : key + ": ") + reason) {}

ConfigNode::ConfigNode(YAML::Node node, std::string file, std::string path)
    : node_(std::move(node)), file_(std::move(file)), path_(std::move(path)) {}

ConfigNode ConfigNode::load_file(const std::string& path) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::BadFile&) {
    throw ConfigError(path, "", "cannot open file");
  } catch (const YAML::Exception& e) {
    throw ConfigError(path, "", "YAML syntax error at line " + std::to_string(e.mark.line + 1) +
                                    ", column " + std::to_string(e.mark.column + 1) + ": " +
                                    e.msg);
  }
  if (!root.IsMap()) throw ConfigError(path, "", "the top level must be a map");
  refuse_duplicate_keys(root, path, "");
  return ConfigNode(root, path, "");
}

ConfigNode ConfigNode::load_string(const std::string& yaml, const std::string& name) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml);
  } catch (const YAML::Exception& e) {
    throw ConfigError(name, "", "YAML syntax error at line " + std::to_string(e.mark.line + 1) +
                                    ": " + e.msg);
  }
  if (!root.IsMap()) throw ConfigError(name, "", "the top level must be a map");
  refuse_duplicate_keys(root, name, "");
  return ConfigNode(root, name, "");
}

std::string ConfigNode::key_path(std::string_view key) const {
  if (path_.empty()) return std::string(key);
  if (key.empty()) return path_;
  return path_ + "." + std::string(key);
}

void ConfigNode::fail(std::string_view key, const std::string& reason) const {
  throw ConfigError(file_, key_path(key), reason);
}

void ConfigNode::fail_here(const std::string& reason) const {
  throw ConfigError(file_, path_, reason);
}

YAML::Node ConfigNode::get(std::string_view key) const {
  if (!node_.IsMap()) fail_here("must be a map, got " + shown(node_));
  return node_[std::string(key)];
}

bool ConfigNode::has(std::string_view key) const {
  const YAML::Node n = get(key);
  // `key:` with nothing after it is null in YAML: most likely a value left out by mistake, so it
  // is refused rather than read as "use the default" (a list may be empty that way).
  if (n.IsDefined() && n.IsNull()) {
    fail(key, "has no value: give one, or leave the key out for its default");
  }
  return n.IsDefined();
}

namespace {

// Why `s` cannot name a port, group, partition or node; empty if it can.
std::string name_problem(const std::string& s) {
  if (s.empty()) return "must not be empty";
  if (s.size() > ConfigNode::kMaxNameLength) {
    return "is " + std::to_string(s.size()) + " characters long; at most " +
           std::to_string(ConfigNode::kMaxNameLength);
  }
  for (const char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-' || c == '.';
    if (!ok) return "may hold only letters, digits, '_', '-' and '.'";
  }
  // Telemetry commands take a port or group as an index or a name: a name of digits only would
  // read as an index.
  if (s.find_first_not_of("0123456789") == std::string::npos) {
    return "must not be digits only (telemetry would read it as an index)";
  }
  return "";
}

}  // namespace

std::string ConfigNode::name(std::string_view key) const {
  const std::string s = string(key);
  if (const std::string why = name_problem(s); !why.empty()) {
    fail(key, "\"" + s + "\" " + why);
  }
  return s;
}

std::string ConfigNode::name_or(std::string_view key, std::string def) const {
  return has(key) ? name(key) : def;
}

ConfigNode ConfigNode::child(std::string_view key) const {
  const YAML::Node n = get(key);
  if (!n.IsDefined() || n.IsNull()) fail(key, "required");
  if (!n.IsMap()) fail(key, "must be a map, got " + shown(n));
  return ConfigNode(n, file_, key_path(key));
}

std::optional<ConfigNode> ConfigNode::optional_child(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  return child(key);
}

std::vector<ConfigNode> ConfigNode::list(std::string_view key) const {
  const YAML::Node n = get(key);
  std::vector<ConfigNode> out;
  if (!n.IsDefined() || n.IsNull()) return out;
  if (!n.IsSequence()) fail(key, "must be a list, got " + shown(n));
  for (size_t i = 0; i < n.size(); ++i) {
    out.emplace_back(n[i], file_, key_path(key) + "[" + std::to_string(i) + "]");
  }
  return out;
}

std::string ConfigNode::scalar() const {
  if (!node_.IsScalar()) fail_here("must be a single value, got " + shown(node_));
  return node_.Scalar();
}

void ConfigNode::allow_only(std::initializer_list<std::string_view> known) const {
  if (!node_.IsMap()) fail_here("must be a map, got " + shown(node_));
  for (const auto& kv : node_) {
    const std::string k = kv.first.Scalar();
    bool ok = false;
    for (auto s : known) ok |= (s == k);
    if (!ok) fail(k, "unknown key (allowed here: " + join(known) + ")");
  }
}

std::string ConfigNode::string(std::string_view key) const {
  const YAML::Node n = get(key);
  if (!n.IsDefined() || n.IsNull()) fail(key, "required");
  if (!n.IsScalar()) fail(key, "must be a single value, got " + shown(n));
  return n.Scalar();
}

std::string ConfigNode::string_or(std::string_view key, std::string def) const {
  return has(key) ? string(key) : def;
}

bool ConfigNode::boolean_or(std::string_view key, bool def) const {
  if (!has(key)) return def;
  const std::string s = string(key);
  if (s == "true" || s == "yes" || s == "on") return true;
  if (s == "false" || s == "no" || s == "off") return false;
  fail(key, "must be true|false, got \"" + s + "\"");
}

double ConfigNode::number_or(std::string_view key, double def, double min, double max) const {
  if (!has(key)) return def;
  const std::string s = string(key);
  std::ostringstream range;
  range << "[" << min << ", " << max << "]";
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end == nullptr || *end != '\0' || !std::isfinite(v) || v < min || v > max) {
    fail(key, "must be a number in " + range.str() + ", got \"" + s + "\"");
  }
  return v;
}

std::optional<uint64_t> parse_uint(std::string_view s) {
  int base = 10;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    s.remove_prefix(2);
    base = 16;
  }
  if (s.empty()) return std::nullopt;
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v, base);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

uint64_t ConfigNode::to_uint(const YAML::Node& n, std::string_view key, uint64_t min,
                             uint64_t max) const {
  const std::string where = "an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
  if (!n.IsScalar()) fail(key, "must be " + where + ", got " + shown(n));
  const auto v = parse_uint(n.Scalar());
  if (!v || *v < min || *v > max) fail(key, "must be " + where + ", got " + shown(n));
  return *v;
}

uint64_t ConfigNode::uint(std::string_view key, uint64_t min, uint64_t max) const {
  const YAML::Node n = get(key);
  if (!n.IsDefined() || n.IsNull()) fail(key, "required");
  return to_uint(n, key, min, max);
}

uint64_t ConfigNode::uint_or(std::string_view key, uint64_t def, uint64_t min,
                             uint64_t max) const {
  return has(key) ? uint(key, min, max) : def;
}

std::string ConfigNode::choice_or(std::string_view key, std::string def,
                                  std::initializer_list<std::string_view> allowed) const {
  if (!has(key)) return def;
  const std::string s = string(key);
  for (auto a : allowed) {
    if (a == s) return s;
  }
  fail(key, "must be one of " + join(allowed) + ", got \"" + s + "\"");
}

std::vector<std::string> ConfigNode::string_list(std::string_view key) const {
  std::vector<std::string> out;
  for (const auto& item : list(key)) out.push_back(item.scalar());
  return out;
}

std::vector<uint64_t> ConfigNode::uint_list(std::string_view key, uint64_t min,
                                            uint64_t max) const {
  std::vector<uint64_t> out;
  // Each item reports its own path (groups[0].weights[2]), not this node's path again.
  for (const auto& item : list(key)) out.push_back(item.to_uint(item.node_, "", min, max));
  return out;
}

std::optional<Ipv4Prefix> parse_ipv4_prefix(std::string_view s) {
  const auto slash = s.find('/');
  const std::string addr(s.substr(0, slash));
  in_addr a{};
  if (inet_pton(AF_INET, addr.c_str(), &a) != 1) return std::nullopt;
  Ipv4Prefix p;
  p.length = 32;
  if (slash != std::string_view::npos) {
    const auto len = parse_uint(s.substr(slash + 1));
    if (!len || *len > 32) return std::nullopt;
    p.length = static_cast<uint8_t>(*len);
  }
  const uint32_t mask = p.length == 0 ? 0 : ~uint32_t{0} << (32 - p.length);
  p.address = ntohl(a.s_addr) & mask;
  return p;
}

std::string format_ipv4(uint32_t host_order) {
  return std::to_string(host_order >> 24) + "." + std::to_string((host_order >> 16) & 0xFF) + "." +
         std::to_string((host_order >> 8) & 0xFF) + "." + std::to_string(host_order & 0xFF);
}

Ipv4Prefix ConfigNode::prefix(std::string_view key) const {
  const std::string s = string(key);
  const auto p = parse_ipv4_prefix(s);
  if (!p) fail(key, "must be an IPv4 address or prefix such as 10.0.0.0/8, got \"" + s + "\"");
  return *p;
}

std::optional<Ipv4Prefix> ConfigNode::optional_prefix(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  return prefix(key);
}

UintRange ConfigNode::range_or_all(std::string_view key, uint64_t min, uint64_t max) const {
  if (!has(key)) return {min, max};
  const std::string s = string(key);
  const std::string allowed = "must be N or LO-HI within [" + std::to_string(min) + ", " +
                              std::to_string(max) + "], got \"" + s + "\"";
  const auto dash = s.find('-');
  std::optional<uint64_t> lo, hi;
  if (dash == std::string::npos) {
    lo = hi = parse_uint(s);
  } else {
    lo = parse_uint(std::string_view(s).substr(0, dash));
    hi = parse_uint(std::string_view(s).substr(dash + 1));
  }
  if (!lo || !hi || *lo > *hi || *lo < min || *hi > max) fail(key, allowed);
  return {*lo, *hi};
}

void ConfigHelp::line(const std::string& key, const std::string& text) {
  constexpr size_t kColumn = 32, kWidth = 100;
  std::string out = key;
  if (out.size() < kColumn) out.resize(kColumn, ' ');
  size_t col = out.size();
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find(' ', pos);
    if (end == std::string::npos) end = text.size();
    const std::string word = text.substr(pos, end - pos);
    if (col + 1 + word.size() > kWidth && col > kColumn) {
      out += "\n" + std::string(kColumn, ' ');
      col = kColumn;
    }
    out += " " + word;
    col += 1 + word.size();
    pos = end + 1;
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  text_ += out + "\n";
}

std::string ConfigHelp::number(double v) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed);
  return std::string(buf, r.ptr);
}

}  // namespace spraynet::control
