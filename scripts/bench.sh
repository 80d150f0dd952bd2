#!/usr/bin/env bash
# Every performance figure beside its baseline, measured in the same run (medians of
# repetitions): the switch pipeline per mode and TCAM size beside dpdk-testpmd io forwarding on
# the same ports, the reorder engine beside rte_reorder, the TCAM beside rte_acl, ICRC beside
# rte_net_crc and zlib, the parser beside rte_net_get_ptype, the switch's latency under load,
# NicNode spray TX / reorder RX, fabric_emu packet-hops/s, fabric_emu --threads 2 vs 1 at 256 and
# 1024 hosts (wall, CPU, hops/s per core), scripts/run.sh --jobs 2 vs 1, switch_emu on net_af_xdp
# beside net_af_packet on one veth pair (root) and the 8192-host three-tier fabric, spray and ecmp
# (wall, CPU, hops per CPU second, peak RSS; about 15 minutes). Prints a table on stdout and
# progress on stderr; --json FILE writes one entry per figure (value, unit, baseline, ratio,
# target, met).
#
#   scripts/bench.sh [--json FILE] [--quick] [--build DIR] [--only SECTIONS]
#
# --quick: a smaller matrix and fewer, shorter repetitions (about a minute). Needs a build
# configured with -Dbenchmarks=enabled (scripts/test.sh's build/ is); builds what is missing.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$root/build"
args=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --json) args+=(--json "$(realpath -m "$2")"); shift 2 ;;
    --quick) args+=(--quick); shift ;;
    --build) build="$(realpath -m "$2")"; shift 2 ;;
    --only) args+=(--only "$2"); shift 2 ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "bench.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

command -v dpdk-testpmd > /dev/null || { echo "bench.sh: dpdk-testpmd not found" >&2; exit 1; }
if [[ ! -f "$build/build.ninja" ]]; then
  meson setup "$build" "$root" -Dbenchmarks=enabled > /dev/null
fi
targets=(switch_emu/switch_emu fabric/fabric_emu bench/bench_wire bench/bench_reorder
         bench/bench_tcam bench/bench_latency bench/bench_nic)
ninja -C "$build" "${targets[@]}" > /dev/null

exec python3 "$root/bench/bench_run.py" --build "$build" "${args[@]}"
