#include "fabric/source_tree.h"

#include <cstdlib>
#include <filesystem>
#include <system_error>
#include <vector>

namespace spraynet::fabric {

std::string tree_path(const std::string& relative) {
  namespace fs = std::filesystem;
  std::vector<fs::path> roots;
  if (const char* env = std::getenv("SPRAYNET_SOURCE_DIR"); env != nullptr && *env != '\0') {
    roots.emplace_back(env);
  }
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (fs::path p = exe.parent_path(); !p.empty(); p = p.parent_path()) {
      roots.push_back(p);
      if (p == p.root_path()) break;
    }
  }
  if (const fs::path cwd = fs::current_path(ec); !ec) roots.push_back(cwd);
  roots.emplace_back(SPRAYNET_SOURCE_DIR);
  for (const fs::path& root : roots) {
    const fs::path candidate = root / relative;
    if (fs::exists(candidate, ec)) return candidate.string();
  }
  return (fs::path(SPRAYNET_SOURCE_DIR) / relative).string();
}

}  // namespace spraynet::fabric
