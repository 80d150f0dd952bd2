#include "fabric/sweep_progress.h"

#include <algorithm>

namespace spraynet::fabric {

void SweepProgress::print() {
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  if (quiet_ || wall < 1.0) return;
  if (wall - last_ < (tty_ ? 0.2 : 10.0)) return;
  last_ = wall;
  shown_ = true;
  uint64_t hops = hops_done_;
  std::vector<const Slot*> active;
  for (const Slot& s : slots_) {
    if (s.active) active.push_back(&s);
  }
  std::sort(active.begin(), active.end(),
            [](const Slot* a, const Slot* b) { return a->run < b->run; });
  std::string running;
  char part[160];
  for (const Slot* a : active) {
    const Slot& s = *a;
    hops += s.hops;
    std::snprintf(part, sizeof part, "%s%s seed %llu: %.0f of %.0f us", running.empty() ? "" : ", ",
                  s.what.c_str(), static_cast<unsigned long long>(s.seed),
                  static_cast<double>(s.vt) / 1000.0, static_cast<double>(s.duration_ns) / 1000.0);
    running += part;
  }
  std::fprintf(stderr, "%s[%zu/%zu runs done] %s virtual, %.1f s wall, %.2f M packet-hops/s%s",
               tty_ ? "\r" : "", done_, total_, running.c_str(), wall,
               static_cast<double>(hops) / wall / 1e6, tty_ ? "\033[K" : "\n");
}

}  // namespace spraynet::fabric
