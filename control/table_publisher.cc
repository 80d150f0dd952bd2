#include "control/table_publisher.h"

#include <memory>
#include <stdexcept>
#include <string>

#include "dataplane/forwarding/bucket_table.h"
#include "dataplane/forwarding/path_selector.h"
#include "dataplane/runtime/rcu_domain.h"

namespace spraynet::control {

void TablePublisher::publish(std::span<PathSelector* const> groups,
                             std::span<const std::vector<uint32_t>> weights) {
  if (groups.size() != weights.size()) {
    throw std::invalid_argument("table publisher: " + std::to_string(weights.size()) +
                                " weight vectors for " + std::to_string(groups.size()) + " groups");
  }
  // Build everything first, so that a bad weight vector publishes nothing.
  std::vector<std::unique_ptr<const BucketTable>> fresh;
  fresh.reserve(groups.size());
  for (size_t g = 0; g < groups.size(); ++g) fresh.push_back(groups[g]->make_table(weights[g]));

  std::vector<std::unique_ptr<const BucketTable>> retired;
  retired.reserve(groups.size());
  for (size_t g = 0; g < groups.size(); ++g) {
    retired.push_back(groups[g]->publish_table(std::move(fresh[g])));
  }
  counters_.tables += groups.size();
  ++counters_.publications;
  // Nothing retired (a node without groups, the NIC): no grace period to wait for. The NIC's
  // on_publish waits out its own, for its spray weights: one per tick, not two.
  if (rcu_ != nullptr && !retired.empty()) {
    rcu_->synchronize();
    ++counters_.grace_periods;
  }
  counters_.tables_freed += retired.size();
  retired.clear();  // no reader can hold them now
}

}  // namespace spraynet::control
