// Reads YAML configs with errors that name the file, the key (as a path such as
// `ports[2].link.rate_gbps`) and what is allowed: `configs/leaf.yaml: ports[2].link.rate_gbps:
// must be a number in [0.001, 10000], got "fast"`. Unknown keys are errors too, so that a typo
// never silently leaves a default in place.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace spraynet::control {

class ConfigError : public std::runtime_error {
 public:
  ConfigError(const std::string& file, const std::string& key, const std::string& reason);
};

struct Ipv4Prefix {
  uint32_t address = 0;  // host byte order, host bits cleared
  uint8_t length = 0;
};

struct UintRange {
  uint64_t lo = 0;
  uint64_t hi = 0;
};

class ConfigNode {
 public:
  ConfigNode(YAML::Node node, std::string file, std::string path);

  // Parses a whole file or a string (the latter for tests and embedded defaults).
  static ConfigNode load_file(const std::string& path);
  static ConfigNode load_string(const std::string& yaml, const std::string& name);

  const std::string& file() const { return file_; }
  const std::string& path() const { return path_; }
  std::string key_path(std::string_view key) const;
  [[noreturn]] void fail(std::string_view key, const std::string& reason) const;
  [[noreturn]] void fail_here(const std::string& reason) const;

  bool has(std::string_view key) const;          // present; a key with no value (null) is an error
  ConfigNode child(std::string_view key) const;  // required map
  std::optional<ConfigNode> optional_child(std::string_view key) const;
  std::vector<ConfigNode> list(std::string_view key) const;  // missing key: empty list
  bool is_map() const { return node_.IsMap(); }
  bool is_scalar() const { return node_.IsScalar(); }
  std::string scalar() const;  // this node as a string (it must be a scalar)
  // The node itself, for a reader that hands a sub-map on to another loader.
  const YAML::Node& yaml() const { return node_; }

  // Every key of this map must be one of `known`.
  void allow_only(std::initializer_list<std::string_view> known) const;

  std::string string(std::string_view key) const;
  // A name other keys and telemetry refer to (ports, groups, partitions, the node): required,
  // 1..kMaxNameLength letters, digits, '_', '-' or '.', not digits only.
  static constexpr size_t kMaxNameLength = 64;
  std::string name(std::string_view key) const;
  std::string name_or(std::string_view key, std::string def) const;
  std::string string_or(std::string_view key, std::string def) const;
  bool boolean_or(std::string_view key, bool def) const;
  double number_or(std::string_view key, double def, double min, double max) const;
  uint64_t uint_or(std::string_view key, uint64_t def, uint64_t min, uint64_t max) const;
  uint64_t uint(std::string_view key, uint64_t min, uint64_t max) const;
  std::string choice_or(std::string_view key, std::string def,
                        std::initializer_list<std::string_view> allowed) const;
  std::vector<std::string> string_list(std::string_view key) const;
  std::vector<uint64_t> uint_list(std::string_view key, uint64_t min, uint64_t max) const;
  Ipv4Prefix prefix(std::string_view key) const;                  // "10.0.0.0/8" or "10.0.0.1"
  std::optional<Ipv4Prefix> optional_prefix(std::string_view key) const;
  // "N" or "LO-HI" (decimal or 0x hex), within [min, max]; missing: [min, max].
  UintRange range_or_all(std::string_view key, uint64_t min, uint64_t max) const;

 private:
  YAML::Node get(std::string_view key) const;
  uint64_t to_uint(const YAML::Node& n, std::string_view key, uint64_t min, uint64_t max) const;

  YAML::Node node_;
  std::string file_;
  std::string path_;
};

// A config's --help text: "key: default" in a column, then what is allowed, wrapped under itself
// at 100 columns. One writer for every program's config help.
class ConfigHelp {
 public:
  void line(const std::string& key, const std::string& text);
  void raw(const std::string& text) { text_ += text; }
  const std::string& str() const { return text_; }
  // 67108.864, 0.001, 1000000 (never 1e+06).
  static std::string number(double v);

 private:
  std::string text_;
};

// Parses a decimal or 0x-prefixed unsigned integer; nullopt if it is not one.
std::optional<uint64_t> parse_uint(std::string_view s);
std::optional<Ipv4Prefix> parse_ipv4_prefix(std::string_view s);
std::string format_ipv4(uint32_t host_order);

}  // namespace spraynet::control
