#include "control/cc_settings.h"

#include <charconv>
#include <cmath>
#include <stdexcept>

namespace spraynet::control {

namespace {

std::string format(double v) {
  char buf[32];
  if (v == std::floor(v) && std::fabs(v) < 1e15) {
    std::snprintf(buf, sizeof buf, "%.0f", v);
  } else {
    std::snprintf(buf, sizeof buf, "%g", v);
  }
  return buf;
}

constexpr double kUs = 1000.0;  // ns per us

// Units are ConnectX's: times in us, rates in Mbit/s, alpha's fixed point out of 1024.
const DcqcnParameter kParameters[] = {
    {"dce_tcp_g", "/1024", "alpha keeps g/1024 of itself each period: g = (1024 - this)/1024", 0,
     1023, true, [](const DcqcnConfig& c) { return double(c.dce_tcp_g); },
     [](DcqcnConfig& c, double v) { c.dce_tcp_g = static_cast<uint32_t>(v); }},
    {"dce_tcp_rtt", "us", "alpha update period", 1, 131071, true,
     [](const DcqcnConfig& c) { return c.dce_tcp_rtt_ns / kUs; },
     [](DcqcnConfig& c, double v) { c.dce_tcp_rtt_ns = static_cast<uint64_t>(v * kUs); }},
    {"initial_alpha_value", "/1024", "alpha on a QP's first CNP (1024: alpha = 1)", 1, 1024,
     true, [](const DcqcnConfig& c) { return double(c.initial_alpha_value); },
     [](DcqcnConfig& c, double v) { c.initial_alpha_value = static_cast<uint32_t>(v); }},
    {"rate_reduce_monitor_period", "us", "at most one rate cut per period", 1, 1e6, true,
     [](const DcqcnConfig& c) { return c.rate_reduce_monitor_period_ns / kUs; },
     [](DcqcnConfig& c, double v) {
       c.rate_reduce_monitor_period_ns = static_cast<uint64_t>(v * kUs);
     }},
    {"rate_to_set_on_first_cnp", "Mbit/s", "current and target rate on the first CNP (0: keep)",
     0, 1e7, false, [](const DcqcnConfig& c) { return c.rate_to_set_on_first_cnp_mbps; },
     [](DcqcnConfig& c, double v) { c.rate_to_set_on_first_cnp_mbps = v; }},
    {"rpg_min_dec_fac", "%", "one cut leaves at least this share of the rate", 0, 100, true,
     [](const DcqcnConfig& c) { return double(c.rpg_min_dec_fac); },
     [](DcqcnConfig& c, double v) { c.rpg_min_dec_fac = static_cast<uint32_t>(v); }},
    {"rpg_min_rate", "Mbit/s", "a QP's rate never goes below", 0.001, 1e7, false,
     [](const DcqcnConfig& c) { return c.rpg_min_rate_mbps; },
     [](DcqcnConfig& c, double v) { c.rpg_min_rate_mbps = v; }},
    {"rpg_max_rate", "Mbit/s", "a QP's rate never goes above (0: line rate)", 0, 1e7, false,
     [](const DcqcnConfig& c) { return c.rpg_max_rate_mbps; },
     [](DcqcnConfig& c, double v) { c.rpg_max_rate_mbps = v; }},
    {"rpg_time_reset", "us", "rate-increase timer", 1, 1e7, true,
     [](const DcqcnConfig& c) { return c.rpg_time_reset_ns / kUs; },
     [](DcqcnConfig& c, double v) { c.rpg_time_reset_ns = static_cast<uint64_t>(v * kUs); }},
    {"rpg_byte_reset", "bytes", "rate-increase byte counter (0: off)", 0, 4294967295.0, true,
     [](const DcqcnConfig& c) { return double(c.rpg_byte_reset); },
     [](DcqcnConfig& c, double v) { c.rpg_byte_reset = static_cast<uint64_t>(v); }},
    {"rpg_threshold", "stages", "F: fast-recovery stages before additive increase", 0, 1000,
     true, [](const DcqcnConfig& c) { return double(c.rpg_threshold); },
     [](DcqcnConfig& c, double v) { c.rpg_threshold = static_cast<uint32_t>(v); }},
    {"rpg_ai_rate", "Mbit/s", "additive increase step of the target rate", 0, 1e7, false,
     [](const DcqcnConfig& c) { return c.rpg_ai_rate_mbps; },
     [](DcqcnConfig& c, double v) { c.rpg_ai_rate_mbps = v; }},
    {"clamp_tgt_rate", "0|1", "1: every cut sets the target to the current rate; 0: only after an increase since the last cut", 0, 1,
     true, [](const DcqcnConfig& c) { return double(c.clamp_tgt_rate); },
     [](DcqcnConfig& c, double v) { c.clamp_tgt_rate = static_cast<uint32_t>(v); }},
    {"clamp_tgt_rate_after_time_inc", "0|1", "with clamp_tgt_rate 0: a timer increase (not only the byte counter's) since the last cut makes the next cut set the target", 0, 1,
     true, [](const DcqcnConfig& c) { return double(c.clamp_tgt_rate_after_time_inc); },
     [](DcqcnConfig& c, double v) { c.clamp_tgt_rate_after_time_inc = static_cast<uint32_t>(v); }},
    {"rpg_hai_rate", "Mbit/s", "hyper increase step of the target rate", 0, 1e7, false,
     [](const DcqcnConfig& c) { return c.rpg_hai_rate_mbps; },
     [](DcqcnConfig& c, double v) { c.rpg_hai_rate_mbps = v; }},
};

}  // namespace

std::span<const DcqcnParameter> dcqcn_parameters() { return kParameters; }

const DcqcnParameter* find_dcqcn_parameter(std::string_view name) {
  for (const DcqcnParameter& p : kParameters) {
    if (name == p.name) return &p;
  }
  return nullptr;
}

std::string_view to_string(CcMode m) {
  switch (m) {
    case CcMode::kNone:
      return "none";
    case CcMode::kDcqcn:
      return "dcqcn";
    case CcMode::kDcqcnConnectx:
      return "dcqcn-connectx";
    case CcMode::kDcqcnPaper:
      return "dcqcn-paper";
    case CcMode::kDctcp:
      return "dctcp";
    case CcMode::kTimely:
      return "timely";
    case CcMode::kHpcc:
      return "hpcc";
  }
  return "?";
}

std::optional<CcMode> parse_cc_mode(std::string_view name) {
  if (name == "none") return CcMode::kNone;
  if (name == "dcqcn") return CcMode::kDcqcn;
  if (name == "dcqcn-connectx") return CcMode::kDcqcnConnectx;
  if (name == "dcqcn-paper") return CcMode::kDcqcnPaper;
  if (name == "dctcp") return CcMode::kDctcp;
  if (name == "timely") return CcMode::kTimely;
  if (name == "hpcc") return CcMode::kHpcc;
  return std::nullopt;
}

DcqcnConfig dcqcn_preset(CcMode mode, double line_gbps) {
  switch (mode) {
    case CcMode::kDcqcnConnectx:
      return dcqcn_connectx_defaults(line_gbps);
    case CcMode::kDcqcnPaper:
      return dcqcn_paper_defaults(line_gbps);
    default:
      break;
  }
  return dcqcn_fabric_defaults(line_gbps);
}

uint64_t preset_cnp_interval_ns(CcMode mode) {
  switch (mode) {
    case CcMode::kDcqcnConnectx:
      return 4'000;  // ConnectX's min_time_between_cnps
    case CcMode::kDcqcnPaper:
      return 50'000;  // the paper's NP: at most one CNP per 50 us per flow
    default:
      break;
  }
  return 0;
}

namespace {

std::string check_value(const DcqcnParameter& p, double v) {
  if (!std::isfinite(v) || v < p.min || v > p.max || (p.integer && v != std::floor(v))) {
    return std::string("must be ") + (p.integer ? "a whole number" : "a number") + " in [" +
           format(p.min) + ", " + format(p.max) + "] (" + p.unit + "), got " + format(v);
  }
  return {};
}

}  // namespace

DcqcnConfig CcSettings::dcqcn(double line_gbps) const {
  DcqcnConfig c = dcqcn_preset(mode, line_gbps);
  for (const auto& [name, value] : rp) {
    const DcqcnParameter* p = find_dcqcn_parameter(name);
    if (p == nullptr) throw std::invalid_argument(name + ": not a DCQCN parameter");
    if (std::string why = check_value(*p, value); !why.empty()) {
      throw std::invalid_argument(name + ": " + why);
    }
    p->set(c, value);
  }
  return c;
}

std::string CcSettings::check() const {
  for (const auto& [name, value] : rp) {
    const DcqcnParameter* p = find_dcqcn_parameter(name);
    if (p == nullptr) return name + ": not a DCQCN parameter";
    if (std::string why = check_value(*p, value); !why.empty()) return name + ": " + why;
  }
  if (cnp_dscp > 63) return "cnp_dscp: must be 0..63";
  // The whole set at a nominal rate: relations between parameters (min rate <= max rate...).
  try {
    if (std::string why = dcqcn(100.0).check(); !why.empty()) return why;
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return {};
}

std::string set_rp_parameter(CcSettings& s, std::string_view name, std::string_view value) {
  const DcqcnParameter* p = find_dcqcn_parameter(name);
  if (p == nullptr) return "not a DCQCN parameter";
  double v = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
  if (ec != std::errc() || end != value.data() + value.size()) {
    return "'" + std::string(value) + "' is not a number (" + p->unit + ")";
  }
  return set_rp_parameter(s, name, v);
}

std::string set_rp_parameter(CcSettings& s, std::string_view name, double v) {
  const DcqcnParameter* p = find_dcqcn_parameter(name);
  if (p == nullptr) return "not a DCQCN parameter";
  if (std::string why = check_value(*p, v); !why.empty()) return why;
  for (auto& [n, old] : s.rp) {
    if (n == name) {
      old = v;
      return {};
    }
  }
  s.rp.emplace_back(std::string(name), v);
  return {};
}

std::string cc_settings_help(std::string_view indent) {
  const DcqcnConfig fabric = dcqcn_fabric_defaults(100.0);
  const DcqcnConfig cx = dcqcn_connectx_defaults(100.0);
  const DcqcnConfig paper = dcqcn_paper_defaults(100.0);
  std::string out;
  for (const DcqcnParameter& p : kParameters) {
    out += std::string(indent) + p.name + " (" + p.unit + ", " + format(p.min) + ".." +
           format(p.max) + "): " + p.what + "; dcqcn " + format(p.get(fabric)) +
           ", dcqcn-connectx " + format(p.get(cx)) + ", dcqcn-paper " + format(p.get(paper)) +
           "\n";
  }
  return out;
}

}  // namespace spraynet::control
