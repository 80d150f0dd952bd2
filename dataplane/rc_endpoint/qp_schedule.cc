#include "dataplane/rc_endpoint/qp_schedule.h"

#include <algorithm>

#include "dataplane/memory_usage.h"

namespace spraynet {

void QpSchedule::set(uint32_t qp, uint64_t due_ns) {
  grow(qp + 1);
  uint64_t& d = due_[qp];
  if (d == due_ns) return;
  if (d != kNever) by_time_.erase({d, qp});
  d = due_ns;
  if (due_ns != kNever) by_time_.emplace(due_ns, qp);
}

size_t QpSchedule::due_by(uint64_t now_ns, std::vector<uint32_t>& out) const {
  const size_t from = out.size();
  for (const auto& [t, qp] : by_time_) {
    if (t > now_ns) break;
    out.push_back(qp);
  }
  std::sort(out.begin() + static_cast<std::ptrdiff_t>(from), out.end());
  return out.size() - from;
}

uint64_t QpSchedule::memory_bytes() const {
  return capacity_bytes(due_) +
         by_time_.size() * rb_tree_node_bytes<std::pair<uint64_t, uint32_t>>();
}

}  // namespace spraynet
