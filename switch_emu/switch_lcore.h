// What a poll-mode lcore runs for a switch: the common node driver (program/node_lcore.h) on a
// SwitchNode. The switch adds no stop rule of its own.
#pragma once

#include "program/node_lcore.h"
#include "switch_emu/switch_node.h"

namespace spraynet::switch_emu {

using SwitchShared = program::NodeShared<SwitchNode>;
using SwitchLcore = program::NodeLcore<SwitchNode>;

}  // namespace spraynet::switch_emu
