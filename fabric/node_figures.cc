#include "fabric/node_figures.h"

#include <stdexcept>
#include <string>

namespace spraynet::fabric {
namespace {

NodeFigures::ClassCounters classes_of(const EgressPort& e, uint64_t now_ns) {
  NodeFigures::ClassCounters c{};
  for (uint8_t tc = 0; tc < EgressPort::kClasses; ++tc) c[tc] = e.counters(tc, now_ns);
  return c;
}

}  // namespace

NodeFigures NodeFigures::of(const switch_emu::SwitchNode& sw, const control::ControlLoop* control,
                            uint64_t now_ns) {
  NodeFigures f;
  f.is_switch = true;
  for (uint16_t p = 0; p < sw.port_count(); ++p) {
    const switch_emu::SwitchPortCounters pc = sw.port_counters(p);
    f.ports.push_back(Port{pc.rx_packets, pc.tx_bytes, classes_of(sw.egress(p), now_ns)});
    f.ports.back().int_records = sw.egress(p).int_counters();
  }
  f.memory = sw.memory_usage();
  f.sw_counters = sw.counters();
  f.sw_drops = sw.drops();
  if (const PfcState* pfc = sw.pfc()) {
    f.has_pfc = true;
    const SharedBuffer& b = pfc->buffer();
    f.pfc_pool_peak_bytes = b.pool_peak_bytes();
    for (uint16_t p = 0; p < sw.port_count(); ++p) {
      for (uint8_t pg = 0; pg < kPriorities; ++pg) {
        if (!pfc->lossless(pg)) continue;
        const double used = static_cast<double>(b.peak_headroom_used_bytes(p, pg));
        const double fraction = used / static_cast<double>(b.headroom_bytes(p));
        if (fraction > f.pfc_headroom_peak_fraction) {
          f.pfc_headroom_peak_fraction = fraction;
          f.pfc_headroom_peak_bytes = b.peak_headroom_used_bytes(p, pg);
        }
      }
      for (const PfcPriorityCounters& k : pfc->counters(p).priority) {
        f.pfc_watchdog_storms += k.watchdog_storms_detected;
        f.pfc_watchdog_frames_suppressed += k.watchdog_frames_suppressed;
      }
    }
  }
  if (control != nullptr) f.control_publications = control->counters().publications;
  for (size_t g = 0; g < sw.group_count(); ++g) {
    f.flowlets_started += sw.group(g).flowlet_table().counters().flowlets_started;
  }
  if (const ConweaveTx* tx = sw.conweave_tx()) f.conweave_tx = tx->counters();
  if (const ConweaveRx* rx = sw.conweave_rx()) f.conweave_rx = rx->counters();
  f.conga = sw.conga_counters();
  if (const CongaTables* t = sw.conga_tables()) {
    f.conga_tables = t->counters();
    f.conga_entries = t->live_entries(now_ns);
  }
  return f;
}

NodeFigures NodeFigures::of(nic_emu::NicNode& nic, uint64_t now_ns, uint64_t cc_at_ns,
                            bool per_qp) {
  NodeFigures f;
  for (uint16_t u = 0; u < nic.uplink_count(); ++u) {
    const nic_emu::NicPortCounters& pc = nic.port_counters(u);
    f.ports.push_back(Port{pc.rx_packets, pc.tx_bytes, classes_of(nic.egress(u), now_ns)});
  }
  f.memory = nic.memory_usage();
  f.ppcid = nic.ppcid_counters();
  f.nic_counters = nic.counters();
  f.nic_drops = nic.drops();
  if (const ReorderEngine* re = nic.reorder()) {
    f.has_reorder = true;
    f.reorder = re->counters();
    f.reorder_held = re->buffered();
    f.reorder_depth.assign(re->depth_histogram().begin(), re->depth_histogram().end());
  }
  RcTrafficEngine* rc = nic.rc_engine();
  f.requester_totals = rc->requester_totals();
  f.responder_totals = rc->responder_totals();
  f.placement_totals = rc->placement_totals();
  f.cc = rc->cc_summary(cc_at_ns);
  f.reps = rc->reps_totals();
  if (per_qp) f.requesters.resize(rc->qps());
  for (uint32_t q = 0; q < rc->qps(); ++q) {
    const RcQpFlowCounters k = rc->flow_counters(q);
    if (per_qp) f.requesters[q] = k;
    // A QP that sent and never had a byte acknowledged: cut off (a filter, a dead path).
    f.qps_never_acked += k.has_requester && k.packets_sent > 0 && k.bytes_acked == 0;
  }
  if (per_qp) f.heat_map = nic.heat_map();
  return f;
}

void NodeFigures::write(ByteWriter& w) const {
  w.put(is_switch);
  w.put_vector(ports);
  w.put(memory);
  if (is_switch) {
    w.put(sw_counters);
    w.put(sw_drops);
    w.put(has_pfc);
    w.put(pfc_pool_peak_bytes);
    w.put(pfc_headroom_peak_fraction);
    w.put(pfc_headroom_peak_bytes);
    w.put(pfc_watchdog_storms);
    w.put(pfc_watchdog_frames_suppressed);
    w.put(control_publications);
    w.put(flowlets_started);
    w.put(conga);
    w.put(conga_tables);
    w.put(conga_entries);
    w.put(conweave_tx);
    w.put(conweave_rx);
    return;
  }
  w.put(ppcid);
  w.put(nic_counters);
  w.put(nic_drops);
  w.put(has_reorder);
  w.put(reorder);
  w.put(reorder_held);
  w.put_vector(reorder_depth);
  w.put(requester_totals);
  w.put(responder_totals);
  w.put(placement_totals);
  w.put(cc);
  w.put(reps);
  w.put(qps_never_acked);
  w.put_vector(requesters);
  w.put(heat_map.has_value());
  if (heat_map) {
    w.put(heat_map->uplinks());
    w.put_vector(heat_map->entries());
    w.put_vector(heat_map->counts());
  }
}

NodeFigures NodeFigures::read(ByteReader& r) {
  NodeFigures f;
  f.is_switch = r.get<bool>();
  f.ports = r.get_vector<Port>();
  f.memory = r.get<MemoryUsage>();
  if (f.is_switch) {
    f.sw_counters = r.get<switch_emu::SwitchCounters>();
    f.sw_drops = r.get<switch_emu::SwitchDropCounters>();
    f.has_pfc = r.get<bool>();
    f.pfc_pool_peak_bytes = r.get<uint64_t>();
    f.pfc_headroom_peak_fraction = r.get<double>();
    f.pfc_headroom_peak_bytes = r.get<uint64_t>();
    f.pfc_watchdog_storms = r.get<uint64_t>();
    f.pfc_watchdog_frames_suppressed = r.get<uint64_t>();
    f.control_publications = r.get<uint64_t>();
    f.flowlets_started = r.get<uint64_t>();
    f.conga = r.get<switch_emu::CongaCounters>();
    f.conga_tables = r.get<CongaTableCounters>();
    f.conga_entries = r.get<uint64_t>();
    f.conweave_tx = r.get<ConweaveTxCounters>();
    f.conweave_rx = r.get<ConweaveRxCounters>();
    return f;
  }
  f.ppcid = r.get<nic_emu::PpcidCounters>();
  f.nic_counters = r.get<nic_emu::NicCounters>();
  f.nic_drops = r.get<nic_emu::NicDropCounters>();
  f.has_reorder = r.get<bool>();
  f.reorder = r.get<ReorderCounters>();
  f.reorder_held = r.get<uint64_t>();
  f.reorder_depth = r.get_vector<uint64_t>();
  f.requester_totals = r.get<RcRequesterCounters>();
  f.responder_totals = r.get<RcResponderCounters>();
  f.placement_totals = r.get<RcPlacementResponderCounters>();
  f.cc = r.get<RcCcSummary>();
  f.reps = r.get<RepsCounters>();
  f.qps_never_acked = r.get<uint64_t>();
  f.requesters = r.get_vector<RcQpFlowCounters>();
  if (r.get<bool>()) {
    const auto uplinks = r.get<uint16_t>();
    auto entries = r.get_vector<nic_emu::QpArrivals>();
    auto counts = r.get_vector<uint64_t>();
    try {
      f.heat_map.emplace(uplinks, std::move(entries), std::move(counts));
    } catch (const std::invalid_argument& e) {
      throw std::runtime_error(std::string("fabric_emu --mpi: a frame from another rank: ") +
                               e.what());
    }
  }
  return f;
}

}  // namespace spraynet::fabric
