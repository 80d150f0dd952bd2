// Catch2 main for the pure wire-format tests: no EAL, no mempools, nothing of DPDK linked.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
