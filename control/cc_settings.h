// Congestion control settings, one source for every place they are given: the NIC's YAML (`cc:`),
// fabric_emu's flags and YAML, and the help text of both. DCQCN's reaction-point parameters
// carry ConnectX's names and units (NVIDIA's "DCQCN CC Parameters": rpg_time_reset in us,
// rpg_ai_rate in Mbit/s, ...) and are applied over a preset: `dcqcn` (ConnectX's defaults) or
// `dcqcn-paper` (the SIGCOMM 2015 paper's values); see docs/congestion-control.md.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dataplane/rc_endpoint/dcqcn_rate_control.h"

namespace spraynet::control {

// One reaction-point parameter as a user writes it: ConnectX's name, its unit, its range.
struct DcqcnParameter {
  const char* name;  // rpg_time_reset
  const char* unit;  // us | Mbit/s | bytes | /1024 | % | stages
  const char* what;
  double min;
  double max;
  bool integer;
  double (*get)(const DcqcnConfig&);
  void (*set)(DcqcnConfig&, double);
};
std::span<const DcqcnParameter> dcqcn_parameters();
const DcqcnParameter* find_dcqcn_parameter(std::string_view name);

// dcqcn: ConnectX's algorithm and parameter names with the defaults spraynet measured to hold a
// 100 Gbit/s lossless fabric (dcqcn_fabric_defaults; docs/congestion-control.md says which
// differ from ConnectX's and why); dcqcn-connectx: ConnectX's shipped defaults exactly;
// dcqcn-paper: the SIGCOMM 2015 paper's; none: no congestion control.
// dctcp, timely: the ACK-clocked algorithms of ns-3 HPCC's rdma-hw.cc (cc modes 8, 7) with its
// run script's defaults (DctcpRateControl, TimelyRateControl): no CNPs; DCTCP reads ECN marks
// echoed in ACKs, TIMELY the RTT. hpcc: HpccRateControl (cc mode 3) on the INT records the
// switches push (a switch's `int:` block) and the receiving NIC echoes in its ACKs
// (dataplane/wire/int_header.h).
enum class CcMode : uint8_t { kNone, kDcqcn, kDcqcnConnectx, kDcqcnPaper, kDctcp, kTimely, kHpcc };
std::string_view to_string(CcMode m);  // none | dcqcn | dcqcn-connectx | dcqcn-paper | dctcp...
std::optional<CcMode> parse_cc_mode(std::string_view name);
inline constexpr const char* kCcModeNames =
    "dcqcn | dcqcn-connectx | dcqcn-paper | dctcp | timely | hpcc | none";
inline bool is_dcqcn(CcMode m) {
  return m == CcMode::kDcqcn || m == CcMode::kDcqcnConnectx || m == CcMode::kDcqcnPaper;
}

// The reaction-point preset of a mode (kNone: dcqcn's) on a QP of this line rate.
DcqcnConfig dcqcn_preset(CcMode mode, double line_gbps);
// The notification point's CNP interval of a mode's preset: dcqcn 0 (a CNP for every marked
// packet, the rate_reduce_monitor_period bounds the cuts), ConnectX's 4 us, the paper's 50 us.
uint64_t preset_cnp_interval_ns(CcMode mode);

// Where ACK/NAKs travel: on the QP's data class (as NICs do), or on the CNP's strict-priority
// class (ns-3's AckHighPrio, for side-by-side runs with the research simulators).
enum class AckClass : uint8_t { kData, kHigh };

struct CcSettings {
  CcMode mode = CcMode::kNone;
  // The notification point (the receiving NIC): at most one CNP per QP per this interval
  // (ConnectX's min_time_between_cnps; 0: one for every CE-marked packet); unset: the mode's
  // (preset_cnp_interval_ns).
  std::optional<uint64_t> min_time_between_cnps_ns;
  uint64_t cnp_interval_ns() const {
    return min_time_between_cnps_ns ? *min_time_between_cnps_ns : preset_cnp_interval_ns(mode);
  }
  uint8_t cnp_dscp = 48;  // ConnectX's cnp_dscp: class 6, strict priority, lossy
  AckClass ack_class = AckClass::kData;
  // Reaction-point parameters set over the preset, by name (DcqcnParameter), in their units.
  std::vector<std::pair<std::string, double>> rp;

  // HPCC's base RTT T (its window is the line rate x T); 0: the caller's estimate.
  uint64_t base_rtt_ns = 0;

  bool enabled() const { return mode != CcMode::kNone; }
  bool dcqcn_mode() const { return is_dcqcn(mode); }  // CNPs sent and reacted to
  // The switches mark ECN for it: DCQCN (CNPs) and DCTCP (echoed in ACKs).
  bool marks_ecn() const { return is_dcqcn(mode) || mode == CcMode::kDctcp; }
  // The preset for a QP whose line rate is line_gbps, with rp applied; throws
  // std::invalid_argument("name: reason") for an unknown name or a value out of range.
  DcqcnConfig dcqcn(double line_gbps) const;
  // Empty when valid, else "key: reason" (with key the parameter's name).
  std::string check() const;
};

// Sets one reaction-point parameter given as text ("300", "5", "0.5"), checked against its
// range; empty when done, else the reason.
std::string set_rp_parameter(CcSettings& s, std::string_view name, std::string_view value);
// The same with the value as a number.
std::string set_rp_parameter(CcSettings& s, std::string_view name, double value);

// The help lines: every cc key with its unit, default (ConnectX's) and range.
std::string cc_settings_help(std::string_view indent);

}  // namespace spraynet::control
