#!/usr/bin/env bash
# The main job, on its embedded default: fabric_emu runs a 2-leaf x 8-spine fabric with 8 hosts
# per leaf (100 Gbit/s, MTU 4096, PFC on) on the real switch and NIC pipelines in virtual time,
# first a permutation (each host one QP to a host on the other leaf, 2 ms), then a ring
# all-reduce of 16 MiB over the 16 hosts, each in modes ecmp, ecmp-qp, dlb, spray and
# spray-noreorder over 20 seeds, with DCQCN (fabric_emu's default); then the permutation's ecmp
# and spray again with --cc none beside it. Prints a table per workload and writes
# OUT/report.json, OUT/report-cc-none.json, OUT/allreduce.json and the plots (OUT/*.png).
#   scripts/run.sh [--out DIR] [--quick]      (--quick: 4 seeds, 1 ms: about 15 s)
# fabric_emu runs the seeds and modes of each table N at a time, one per online core by default;
# FABRIC_JOBS=N sets N (passed as --jobs N; FABRIC_JOBS=1: one run at a time). The tables, the
# JSON and the plots are the same whatever N. FABRIC_EMU=PATH runs that fabric_emu instead of
# building build/fabric/fabric_emu. The plots are drawn while the next runs go on; the tables
# after the first are printed once they are done.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=out
SEEDS=1-20
DURATION=2ms
while [ $# -gt 0 ]; do
  case "$1" in
    --out) OUT=$2; shift 2 ;;
    --quick) SEEDS=1-4; DURATION=1ms; shift ;;
    -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run.sh: unknown argument '$1' (--out DIR, --quick)" >&2; exit 2 ;;
  esac
done
mkdir -p "$OUT"

if [ -n "${FABRIC_EMU:-}" ]; then
  EMU=$FABRIC_EMU  # a fabric_emu built elsewhere: nothing to set up or build
else
  scripts/setup.sh
  # shellcheck disable=SC1091  # scripts/build_dir.sh, checked on its own
  . scripts/build_dir.sh
  ensure_build_dir build
  ninja -C build fabric/fabric_emu >/dev/null
  EMU=build/fabric/fabric_emu
fi
JOBS=()
if [ -n "${FABRIC_JOBS:-}" ]; then JOBS=(--jobs "$FABRIC_JOBS"); fi

# fabric_emu exits 5 when a run ended unfinished or dropped on a lossless class (its table marks
# the row with "!" and stderr names the run): the tables are still printed and the job goes on
# to the end, where that is said once more and becomes run.sh's exit status.
warned=0
emu() {
  local rc=0
  "$EMU" ${JOBS[@]+"${JOBS[@]}"} "$@" || rc=$?
  if [ "$rc" -eq 5 ]; then
    warned=1
  elif [ "$rc" -ne 0 ]; then
    exit "$rc"
  fi
}

# The plots (what fabric_emu --plots runs: scripts/fabric_plots.py) are drawn in the background
# while the next fabric_emu runs, their output kept in $TMP; what follows the first table is
# kept there too, and everything is printed in order once the plots are done.
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
plot_pids=()
plots() {  # DIR JSON TIMESERIES NAME
  mkdir -p "$1"
  python3 scripts/fabric_plots.py --json "$2" --timeseries "$3" --out "$1" \
    >"$TMP/$4.out" 2>"$TMP/$4.err" &
  plot_pids+=("$!")
}
plots_done() {  # NAME PID: its output, in its place; a failure is fabric_emu's exit 4
  local rc=0
  wait "$2" || rc=$?
  cat "$TMP/$1.out"
  cat "$TMP/$1.err" >&2
  if [ "$rc" -ne 0 ]; then
    echo "run.sh: plots failed: scripts/fabric_plots.py ($1)" >&2
    exit 4
  fi
}

MODES=ecmp,ecmp-qp,dlb,spray,spray-noreorder
echo "== permutation: each host one QP to a host on the other leaf, ${DURATION} of virtual time =="
emu --leaves 2 --spines 8 --hosts-per-leaf 8 --link-gbps 100 --mtu 4096 \
  --workload permutation --qps-per-host 1 --mode "$MODES" --seeds "$SEEDS" \
  --duration "$DURATION" --json "$OUT/report.json" --timeseries "$OUT/timeseries.csv"
plots "$OUT" "$OUT/report.json" "$OUT/timeseries.csv" permutation
# The all-reduce runs next (while the permutation's plots are drawn), then the --cc none
# permutation (while the all-reduce's are); the output comes in the order of the tables.
{
# Without spray-noreorder: without the reorder engine a ring step stalls on rxe's 67 ms timer
# and the collective does not finish (the permutation above shows that mode's collapse).
echo "== ring all-reduce of 16 MiB over the 16 hosts (ranks placed at random per seed) =="
mkdir -p "$OUT/allreduce"
emu --leaves 2 --spines 8 --hosts-per-leaf 8 --link-gbps 100 --mtu 4096 \
  --workload allreduce --bytes 16777216 --mode "${MODES%,spray-noreorder}" --seeds "$SEEDS" --duration 50ms \
  --json "$OUT/allreduce.json" --timeseries "$OUT/allreduce/timeseries.csv"
} >"$TMP/allreduce-table.out"
plots "$OUT/allreduce" "$OUT/allreduce.json" "$OUT/allreduce/timeseries.csv" allreduce
{
echo
# The same permutation without congestion control (--cc none: the window and PFC alone, where
# every ECMP collision fills a queue to XOFF), to show what DCQCN changes.
echo "== the same permutation with --cc none (ecmp and spray) =="
emu --quiet --leaves 2 --spines 8 --hosts-per-leaf 8 --link-gbps 100 --mtu 4096 \
  --workload permutation --qps-per-host 1 --mode ecmp,spray --seeds "$SEEDS" \
  --duration "$DURATION" --cc none --json "$OUT/report-cc-none.json"
/usr/bin/python3 - "$OUT/report.json" "$OUT/report-cc-none.json" <<'PY'
import json, sys
def means(path):
    runs = json.load(open(path))["runs"]
    m = {}
    for mode in ("ecmp", "spray"):
        v = [r["throughput_fraction"] for r in runs if r["mode"] == mode]
        m[mode] = sum(v) / len(v)
    return m, runs[0]["cc"]["mode"]
(on, cc), (off, _) = means(sys.argv[1]), means(sys.argv[2])
bound = (1 - (7 / 8) ** 8) * 0.98
print(f"throughput_fraction, mean over seeds      {cc:>8}   --cc none")
for mode in ("ecmp", "spray"):
    print(f"  {mode:<40}{on[mode]:8.3f}   {off[mode]:9.3f}")
print(f"  {'spraying gain over ECMP':<40}{on['spray'] / on['ecmp'] - 1:+8.1%}   "
      f"{off['spray'] / off['ecmp'] - 1:+9.1%}")
print(f"  ECMP's collision bound x payload share: {bound:.3f} (1 - (7/8)^8, x 0.98)")
PY
echo
} >"$TMP/cc-none-table.out"
plots_done permutation "${plot_pids[0]}"
cat "$TMP/cc-none-table.out"
cat "$TMP/allreduce-table.out"
plots_done allreduce "${plot_pids[1]}"
echo
echo "report: $OUT/report.json (permutation), $OUT/report-cc-none.json, $OUT/allreduce.json; plots: $OUT/*.png, $OUT/allreduce/*.png"
if [ "$warned" -ne 0 ]; then
  echo "run.sh: some runs are not results (unfinished or lossy on a PFC class): see the warnings above; exit 5" >&2
  exit 5
fi
