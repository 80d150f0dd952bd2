#include "fabric/huge_heap.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

namespace spraynet::fabric {

void heap_on_huge_pages(char** argv) {
  static constexpr const char* kTunable = "glibc.malloc.hugetlb";
  const char* set = std::getenv("GLIBC_TUNABLES");
  if (set != nullptr && std::strstr(set, kTunable) != nullptr) return;
  // A copy: setenv may replace the string getenv pointed to.
  const std::optional<std::string> before =
      set != nullptr ? std::optional<std::string>(set) : std::nullopt;
  std::string value = std::string(kTunable) + "=1";
  if (before && !before->empty()) value = *before + ":" + value;
  if (setenv("GLIBC_TUNABLES", value.c_str(), 1) != 0) return;
  execv("/proc/self/exe", argv);
  // Still here: the exec failed; leave the environment as it was.
  if (before) {
    setenv("GLIBC_TUNABLES", before->c_str(), 1);
  } else {
    unsetenv("GLIBC_TUNABLES");
  }
}

}  // namespace spraynet::fabric
