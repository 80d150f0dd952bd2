#!/usr/bin/env bash
# A bounded soak on real processes (root): scripts/topo.sh's fabric with 2 uplinks (nic0 -- spine0,
# spine1 -- nic1, net_af_packet on veth in namespaces), nic0's RC traffic engine WRITEing to
# nic1's without end, while scripts/soak.py drives chaos through the spines' telemetry (link
# flaps, BER bursts, TCAM churn; PFC storms sent into a spine port from nic0's side, the PFC
# watchdog on) and every second checks each process: the accounting identity, each lcore's
# progress, traffic flowing, RSS outside DPDK's memory flat after the warm-up, alive.
#   scripts/soak.sh [SECONDS] [--out DIR] [--prefix P]     (SECONDS: 20..86400, default 600)
# At the end it stops the processes with SIGINT and checks their exit status, their reports'
# mempool check and accounting; writes DIR/soak.json (default out/). Exits 0 when every check
# held, 1 when one did not, 2 on bad use; on any exit, SIGINT or SIGTERM it takes it all down.
set -Eeuo pipefail

ME=soak.sh
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TOPO=$ROOT/scripts/topo.sh
SECONDS_TO_RUN=600
OUT=$ROOT/out
PREFIX=spsk
usage() {  # exit code: 0 for --help (on stdout), 2 for bad use (on stderr)
  if [ "${1:-2}" = 0 ]; then sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0; fi
  sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}
while [ $# -gt 0 ]; do
  case "$1" in
    --out) [ $# -ge 2 ] || usage; OUT=$2; shift 2 ;;
    --prefix) [ $# -ge 2 ] || usage; PREFIX=$2; shift 2 ;;
    -h|--help) usage 0 ;;
    [0-9]*) SECONDS_TO_RUN=$1; shift ;;
    *) echo "$ME: unknown argument '$1'" >&2; usage ;;
  esac
done
if ! [[ $SECONDS_TO_RUN =~ ^[0-9]{1,5}$ ]] || [ "$SECONDS_TO_RUN" -lt 20 ] ||
  [ "$SECONDS_TO_RUN" -gt 86400 ]; then
  echo "$ME: SECONDS: '$SECONDS_TO_RUN' is not allowed: 20..86400" >&2
  exit 2
fi
[[ $PREFIX =~ ^[a-z][a-z0-9]{0,5}$ ]] ||
  { echo "$ME: --prefix: '$PREFIX' is not allowed: 1-6 lower-case letters or digits, starting with a letter" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "$ME: needs root (network namespaces, veth)" >&2; exit 2; }
for tool in jq python3 ip; do
  command -v "$tool" >/dev/null || { echo "$ME: $tool is not installed (scripts/setup.sh)" >&2; exit 2; }
done
case "$OUT" in /*) ;; *) OUT=$PWD/$OUT ;; esac
RUN=$OUT/soak
mkdir -p "$RUN"

# The programs: given (meson test), else built here if needed.
export SWITCH_EMU=${SWITCH_EMU:-$ROOT/build/switch_emu/switch_emu}
export NIC_EMU=${NIC_EMU:-$ROOT/build/nic_emu/nic_emu}
if [ ! -x "$SWITCH_EMU" ] || [ ! -x "$NIC_EMU" ]; then
  # shellcheck disable=SC1091  # scripts/build_dir.sh, checked on its own
  . "$ROOT/scripts/build_dir.sh" && ensure_build_dir "$ROOT/build" -Dbenchmarks=disabled
  ninja -C "$ROOT/build" switch_emu/switch_emu nic_emu/nic_emu >/dev/null
fi

PROCS=(spine0 spine1 nic0 nic1)
CHILD=
UP=0
topo() {
  "$TOPO" "$1" --set "prefix=$PREFIX" --set uplinks=2 --set traffic=rc --set rc_messages=0 \
    --set spray=rr --set "dir=$RUN" --set "spine_extra=$RUN/spine_extra.yaml" "${@:2}"
}
# shellcheck disable=SC2317  # run by the traps
cleanup() {
  trap - EXIT INT TERM
  if [ -n "$CHILD" ]; then kill -TERM "$CHILD" 2>/dev/null || true; wait "$CHILD" 2>/dev/null || true; fi
  if [ "$UP" = 1 ] || ip netns list | grep -q "^$PREFIX-"; then
    topo down >/dev/null 2>&1 || true
  fi
}
trap cleanup EXIT
trap 'echo "$ME: interrupted: taking the topology down" >&2; cleanup; exit 130' INT TERM
run() { "$@" & CHILD=$!; wait "$CHILD"; local rc=$?; CHILD=; return $rc; }

# What the spines need for the chaos: acting telemetry commands, PFC on the RoCE priority with
# a watchdog that notices a storm within 100 ms.
cat >"$RUN/spine_extra.yaml" <<'EOF'
telemetry: {acting_commands: true}
pfc:
  priorities: [3]
  watchdog: {detect_ms: 100, restore_ms: 100, action: drop}
EOF

echo "== soak: $SECONDS_TO_RUN s, nic0 -> spine0, spine1 -> nic1, RC WRITEs without end =="
UP=1
run topo up >"$RUN/topo.log" 2>&1 || { cat "$RUN/topo.log" >&2; exit 1; }
sample_rc=0
run python3 "$ROOT/scripts/soak.py" run --prefix "$PREFIX" --dir "$RUN" \
  --seconds "$SECONDS_TO_RUN" --procs "$(IFS=,; echo "${PROCS[*]}")" --json "$RUN/samples.json" \
  --storm-ns "$PREFIX-nic0" --storm-iface n0u0,n0u1 || sample_rc=$?

# SIGINT, as an operator stops them; each writes its report and its mempool check.
for name in "${PROCS[@]}"; do
  if [ -f "$RUN/$name.pid" ]; then kill -INT "$(cat "$RUN/$name.pid")" 2>/dev/null || true; fi
done
for name in "${PROCS[@]}"; do
  for ((i = 0; i < 300; i++)); do
    [ -f "$RUN/$name.rc" ] && break
    sleep 0.1
  done
done
run topo down >/dev/null 2>&1 || true
UP=0

FAILED=()
check() {  # description, then the command that must succeed
  local what=$1
  shift
  if "$@"; then echo "  ok: $what"; else echo "  FAILED: $what"; FAILED+=("$what"); fi
}
check "every sample held (scripts/soak.py: $RUN/samples.json)" test "$sample_rc" = 0
for name in "${PROCS[@]}"; do
  check "$name exited with status 0 on SIGINT" test "$(cat "$RUN/$name.rc" 2>/dev/null)" = 0
  check "$name: every mbuf back in its pool, accounting balanced at exit" \
    test "$(jq -r '"\(.mempool_in_use_at_exit)/\(.accounting.balanced)"' "$RUN/$name.json" 2>/dev/null)" = 0/true
done

exits=$(for name in "${PROCS[@]}"; do
  jq -n --arg n "$name" --arg rc "$(cat "$RUN/$name.rc" 2>/dev/null || echo none)" \
    --slurpfile r <(cat "$RUN/$name.json" 2>/dev/null || echo null) \
    '{($n): {exit_status: $rc, mempool_in_use_at_exit: ($r[0].mempool_in_use_at_exit // null),
             accounting_balanced: ($r[0].accounting.balanced // null)}}'
done | jq -s add)
failed_json=$(printf '%s\n' "${FAILED[@]+"${FAILED[@]}"}" | jq -R . | jq -s 'map(select(. != ""))')
jq --argjson exits "$exits" --argjson failed "$failed_json" \
  '. + {processes: $exits, failed_checks: $failed, passed: ($failed | length == 0)}' \
  "$RUN/samples.json" >"$OUT/soak.json" 2>/dev/null ||
  jq -n --argjson exits "$exits" --argjson failed "$failed_json" \
    '{processes: $exits, failed_checks: $failed, passed: false}' >"$OUT/soak.json"

echo
jq -r '"samples \(.samples // 0); checks \(.checks // {} | to_entries | map("\(.key) \(.value)") | join(", "))",
       "chaos \(.chaos // {} | to_entries | map("\(.key) \(.value)") | join(", "))",
       (.rss_kb // {} | to_entries[] | "rss \(.key): VmRSS \(.value.min_kb // 0) .. \(.value.max_kb // 0) kB, outside DPDK memory \(.value.own_min_kb // 0) .. \(.value.own_max_kb // 0) kB"),
       (.failures // [] | .[:20][] | "  at \(.t) s: \(.what)")' "$OUT/soak.json"
echo "report: $OUT/soak.json"
if [ ${#FAILED[@]} -gt 0 ]; then
  echo "soak: FAILED (${#FAILED[@]}):"
  printf '  %s\n' "${FAILED[@]}"
  exit 1
fi
echo "soak: every check held"
