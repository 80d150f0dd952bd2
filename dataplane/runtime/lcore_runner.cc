#include "dataplane/runtime/lcore_runner.h"

#include <rte_errno.h>
#include <rte_launch.h>
#include <rte_lcore.h>

#include <algorithm>
#include <exception>
#include <stdexcept>
#include <string>
#include <utility>

namespace spraynet::runtime {
namespace {

struct Job {
  const LcoreRunner::Fn* fn;
  unsigned lcore;
  unsigned index;
  std::exception_ptr error;
};

// EAL's launch entry point is a C function: exceptions must not cross it.
int run_job(void* arg) {
  auto* job = static_cast<Job*>(arg);
  try {
    (*job->fn)(job->lcore, job->index);
  } catch (...) {
    job->error = std::current_exception();
  }
  return 0;
}

}  // namespace

LcoreRunner::LcoreRunner(std::vector<unsigned> lcores) : lcores_(std::move(lcores)) {
  if (lcores_.empty()) throw std::invalid_argument("LcoreRunner: no lcores given");
  for (size_t i = 0; i < lcores_.size(); ++i) {
    const unsigned id = lcores_[i];
    if (id >= RTE_MAX_LCORE || !rte_lcore_is_enabled(id)) {
      throw std::invalid_argument("LcoreRunner: lcore " + std::to_string(id) +
                                  " is not enabled in EAL (" + std::to_string(rte_lcore_count()) +
                                  " lcores are)");
    }
    if (std::find(lcores_.begin(), lcores_.begin() + i, id) != lcores_.begin() + i) {
      throw std::invalid_argument("LcoreRunner: lcore " + std::to_string(id) + " given twice");
    }
  }
}

std::vector<unsigned> LcoreRunner::all_lcores() {
  std::vector<unsigned> ids{rte_get_main_lcore()};
  unsigned id;
  RTE_LCORE_FOREACH_WORKER(id) {
    ids.push_back(id);
  }
  return ids;
}

void LcoreRunner::run(const Fn& fn) const {
  const unsigned main_lcore = rte_get_main_lcore();
  const bool has_main = std::find(lcores_.begin(), lcores_.end(), main_lcore) != lcores_.end();
  if (has_main && rte_lcore_id() != main_lcore) {
    throw std::logic_error("LcoreRunner: the main lcore's share must run on the main lcore");
  }

  std::vector<Job> jobs;
  jobs.reserve(lcores_.size());  // workers hold pointers into it
  for (unsigned i = 0; i < lcores_.size(); ++i) jobs.push_back(Job{&fn, lcores_[i], i, nullptr});

  std::vector<unsigned> launched;
  std::string launch_error;
  for (Job& job : jobs) {
    if (job.lcore == main_lcore) continue;
    const int ret = rte_eal_remote_launch(run_job, &job, job.lcore);
    if (ret != 0) {
      launch_error = "LcoreRunner: rte_eal_remote_launch on lcore " + std::to_string(job.lcore) +
                     " failed: " + rte_strerror(-ret);
      break;
    }
    launched.push_back(job.lcore);
  }
  if (has_main && launch_error.empty()) {
    for (Job& job : jobs) {
      if (job.lcore == main_lcore) run_job(&job);
    }
  }
  for (unsigned id : launched) rte_eal_wait_lcore(id);

  if (!launch_error.empty()) throw std::runtime_error(launch_error);
  for (const Job& job : jobs) {
    if (job.error) std::rethrow_exception(job.error);
  }
}

}  // namespace spraynet::runtime
