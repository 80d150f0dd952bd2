// Where fabric_emu finds the tree's own files at run time (configs/scenarios/,
// scripts/fabric_plots.py): a clone that was moved or copied (`cp -r`) must still run, so the
// path compiled in is the last resort, not the answer.
#pragma once

#include <string>

namespace spraynet::fabric {

// `relative` (e.g. "configs/scenarios") under the first of: $SPRAYNET_SOURCE_DIR; the
// directory the executable is in and each of its ancestors (build/fabric/fabric_emu sits two
// levels below the tree); the working directory; the tree the program was built from. The
// first where it exists; if none has it, the path under the built-from tree (whose error then
// names it).
std::string tree_path(const std::string& relative);

}  // namespace spraynet::fabric
