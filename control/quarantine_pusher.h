// The quarantine response to a QP the NIC's anomaly detector flagged: a TCAM quarantine rule
// pushed to the switch through its telemetry socket (/spraynet/tcam_add), which sends the QP's
// packets to a honeypot port except the keep_percent share of PSNs that stays on the normal
// path for monitoring. The switch must run with acting commands on; a refusal (acting commands
// off, a duplicate id, a full TCAM, a port it does not have) is logged with the switch's reason
// and counted, and the QP is not tried again (a refusal does not go away by repeating it).
//
// Threads. The lcore only marks QPs flagged (NicNode::anomaly_flags()); this class runs a thread
// of its own that every period asks `collect` for the newly flagged QPs and does the socket I/O
// outside every lock the lcore takes, so a slow or absent switch never stalls the dataplane.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace spdlog {
class logger;
}

namespace spraynet::control {

struct QuarantinePushConfig {
  std::string switch_socket;
  std::string honeypot_port;
  uint32_t keep_percent = 5;
  uint32_t rule_id_base = 900;
  int32_t priority = 1000;
  uint64_t period_ms = 50;
  uint64_t timeout_ms = 2000;
};

// One flagged QP to quarantine: its DestQP and its host's address (host byte order).
struct QuarantineTarget {
  uint32_t dest_qp = 0;
  uint32_t dst_ip = 0;
};

// What became of one push.
struct QuarantinePush {
  uint32_t rule_id = 0;
  QuarantineTarget target;
  bool admitted = false;
  std::string detail;  // the switch's reply when admitted, else why not
};

// The /spraynet/tcam_add parameter for rule `rule_id`: a YAML map like a tcam.rules entry.
std::string quarantine_rule_yaml(const QuarantinePushConfig& config, uint32_t rule_id,
                                 const QuarantineTarget& target);

class QuarantinePusher {
 public:
  // Fills `out` with the QPs flagged since the previous call (the caller takes its own locks).
  using Collect = std::function<void(std::vector<QuarantineTarget>& out)>;

  QuarantinePusher(QuarantinePushConfig config, Collect collect,
                   std::shared_ptr<spdlog::logger> logger);
  ~QuarantinePusher();  // stop()
  QuarantinePusher(const QuarantinePusher&) = delete;
  QuarantinePusher& operator=(const QuarantinePusher&) = delete;

  void start();  // the thread: collect and push every period_ms
  // Stops the thread, then one last collect-and-push pass: a QP flagged just before the stop is
  // still pushed. Idempotent.
  void stop();
  // One collect-and-push pass on the caller's thread.
  void run_once();

  uint64_t pushes() const { return pushes_.load(); }  // rules the switch admitted
  uint64_t failures() const { return failures_.load(); }
  std::vector<QuarantinePush> history() const;  // every push so far, in order
  const QuarantinePushConfig& config() const { return config_; }

 private:
  QuarantinePush push(const QuarantineTarget& target, uint32_t rule_id);

  QuarantinePushConfig config_;
  Collect collect_;
  std::shared_ptr<spdlog::logger> logger_;
  std::mutex run_lock_;  // one pass at a time (the thread, or stop()'s last pass)
  uint32_t next_index_ = 0;
  std::vector<QuarantineTarget> scratch_;

  mutable std::mutex history_lock_;
  std::vector<QuarantinePush> history_;
  std::atomic<uint64_t> pushes_{0};
  std::atomic<uint64_t> failures_{0};

  std::mutex wake_lock_;
  std::condition_variable wake_;
  bool stopping_ = false;
  bool stopped_ = false;
  std::thread thread_;
};

}  // namespace spraynet::control
