#!/usr/bin/env bash
# End to end on real processes (root): brings scripts/topo.sh's fabric up (2 hosts, each
# behind a nic_emu with 4 uplinks, a switch_emu spine per uplink, all on net_af_packet/veth),
# runs the nic_emu RC traffic engine across it (nic0's requesters RDMA-WRITE to nic1's
# responders) with flow spraying and then per-packet (rr) spraying, captures spine0 with
# dpdk-dumpcap during the spray run and checks the capture with tshark, takes everything down,
# and prints goodput, retransmissions, reorder depth and the spraying heat map.
#   scripts/e2e.sh [--out DIR] [--config FILE] [--prefix P] [--messages N] [--no-capture]
# Exits 0 when everything held, 1 when something did not (each failure named), 2 on bad use;
# on any exit, SIGINT or SIGTERM it takes the topology down first.
set -Eeuo pipefail

ME=e2e.sh
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TOPO=$ROOT/scripts/topo.sh
OUT=$ROOT/out/e2e
CONFIG=$ROOT/configs/topo.conf
PREFIX=spne
MESSAGES=50
CAPTURE=1
usage() {
  sed -n '8,10p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}
while [ $# -gt 0 ]; do
  case "$1" in
    --out) [ $# -ge 2 ] || usage; OUT=$2; shift 2 ;;
    --config) [ $# -ge 2 ] || usage; CONFIG=$2; shift 2 ;;
    --prefix) [ $# -ge 2 ] || usage; PREFIX=$2; shift 2 ;;
    --messages) [ $# -ge 2 ] || usage; MESSAGES=$2; shift 2 ;;
    --no-capture) CAPTURE=0; shift ;;
    -h|--help) usage ;;
    *) echo "$ME: unknown argument '$1'" >&2; usage ;;
  esac
done
[ "$(id -u)" = 0 ] || { echo "$ME: needs root (network namespaces, veth, hugepages)" >&2; exit 2; }
[[ $MESSAGES =~ ^[1-9][0-9]{0,5}$ ]] || { echo "$ME: --messages: 1..999999" >&2; exit 2; }
for tool in tshark dpdk-dumpcap jq python3; do
  command -v "$tool" >/dev/null || { echo "$ME: $tool is not installed (scripts/setup.sh)" >&2; exit 2; }
done
case "$OUT" in /*) ;; *) OUT=$PWD/$OUT ;; esac
mkdir -p "$OUT"

CHILD=   # the foreground step, run in the background so that a signal is handled at once
DUMPCAP=
UP=0
topo() { "$TOPO" "$1" --config "$CONFIG" --set "prefix=$PREFIX" "${@:2}"; }
stop_bg() {  # pid signal: signal it, wait up to 20 s for it to end, then SIGKILL
  local pid=$1 sig=$2 i
  kill "-$sig" "$pid" 2>/dev/null || return 0
  for ((i = 0; i < 200; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}
# shellcheck disable=SC2317  # run by the traps
cleanup() {
  trap - EXIT INT TERM
  # A topo.sh up that is running takes down what it made when told to stop; then down.
  if [ -n "$CHILD" ]; then stop_bg "$CHILD" TERM; fi
  # Before down: a secondary still mapping the hugepages would keep them from the kernel.
  if [ -n "$DUMPCAP" ]; then stop_bg "$DUMPCAP" INT; fi
  if [ "$UP" = 1 ] || ip netns list | grep -q "^$PREFIX-"; then
    topo down >/dev/null 2>&1 || true
  fi
}
trap cleanup EXIT
trap 'echo "$ME: interrupted: taking the topology down" >&2; cleanup; exit 130' INT TERM
run() { "$@" & CHILD=$!; wait "$CHILD"; local rc=$?; CHILD=; return $rc; }

FAILED=()
check() {  # description, then the command that must succeed
  local what=$1
  shift
  if "$@"; then echo "  ok: $what"; else echo "  FAILED: $what"; FAILED+=("$what"); fi
}
jqv() { jq -r "$2" "$1"; }

one_run() {  # mode (flow|rr)
  local mode=$1 dir=$OUT/$1 sets=() capture=0 name
  rm -rf "$dir"
  mkdir -p "$dir"
  # The requester is held back until the watcher (and dumpcap) are attached.
  sets=(--set "spray=$mode" --set traffic=rc --set "rc_messages=$MESSAGES" --set "dir=$dir"
    --set hold=nic0)
  if [ "$mode" != flow ] && [ "$CAPTURE" = 1 ]; then
    capture=1
    sets+=(--set capture=spine0)
  fi
  echo "== spray $mode: $MESSAGES WRITEs per QP, nic0 -> 4 spines -> nic1 =="
  UP=1
  run topo up "${sets[@]}"
  if [ "$capture" = 1 ]; then
    # dpdk-dumpcap attaches as a secondary process; it is stopped only once the traffic is done:
    # DPDK 22.11's pdump can crash the primary when a capture ends under load.
    dpdk-dumpcap "--file-prefix=$PREFIX-spine0" -i 0 -w "$dir/spine0.pcapng" \
      >"$dir/dumpcap.log" 2>&1 </dev/null &
    DUMPCAP=$!
    local i
    # Its progress line (stderr, unbuffered) starts once the capture is enabled.
    for ((i = 0; i < 300; i++)); do
      grep -q "Packets captured" "$dir/dumpcap.log" && break
      kill -0 "$DUMPCAP" 2>/dev/null || break
      sleep 0.1
    done
  fi
  run topo start "${sets[@]}"
  local watch_rc=0
  run python3 "$ROOT/scripts/rc_watch.py" "$PREFIX-nic0" --timeout 90 >"$dir/watch.json" ||
    watch_rc=$?
  if [ -n "$DUMPCAP" ]; then
    stop_bg "$DUMPCAP" INT  # its capture file is checked below
    DUMPCAP=
  fi
  run topo down >/dev/null
  UP=0

  check "the RC engine finished every message (rc_watch)" test "$watch_rc" = 0
  for name in nic0 nic1 spine0 spine1 spine2 spine3; do
    check "$name exited with status 0 and every mbuf back in its pool" \
      test "$(cat "$dir/$name.rc" 2>/dev/null)/$(jqv "$dir/$name.json" .mempool_in_use_at_exit 2>/dev/null)" = 0/0
  done
  local qps done_msgs
  # A process that died wrote no report: then the checks above failed and these read 0.
  qps=$(jqv "$dir/nic0.json" .rc_engine.qps 2>/dev/null || echo 0)
  done_msgs=$(jqv "$dir/nic0.json" .rc_engine.requester.messages_completed 2>/dev/null || echo 0)
  check "$((qps * MESSAGES)) messages completed" test "$done_msgs" = "$((qps * MESSAGES))"
  # Heat map at the receiver: which uplinks each QP's packets arrived on.
  local spread
  spread=$(jq -c '[.heat_map.qps[] | [.per_uplink[] | select(. > 0)] | length]' "$dir/nic1.json" 2>/dev/null ||
    echo "no report")
  if [ "$mode" = flow ]; then
    check "flow: each QP arrived on exactly one uplink (heat map $spread)" \
      test "$(jq '[.heat_map.qps[] | [.per_uplink[] | select(. > 0)] | length] | all(. == 1)' "$dir/nic1.json")" = true
  else
    check "$mode: every QP arrived on all 4 uplinks (heat map $spread)" \
      test "$(jq '[.heat_map.qps[] | [.per_uplink[] | select(. > 0)] | length] | all(. == 4)' "$dir/nic1.json")" = true
    check "$mode: every PPCID read ok, none on the wrong uplink" \
      test "$(jq '.ppcid | .ok > 0 and .bad_check == 0 and .wrong_uplink == 0 and .layout_mismatch == 0 and .unknown_path == 0' "$dir/nic1.json")" = true
  fi
  if [ "$capture" = 1 ]; then check_capture "$dir/spine0.pcapng" "$qps"; fi
}

check_capture() {  # file qps: what spine0 carried in the spray run, read back by tshark
  local file=$1 qps=$2 rows
  if [ ! -s "$file" ]; then
    check "dpdk-dumpcap wrote a capture of spine0 ($file)" false
    return
  fi
  tshark -r "$file" -T fields -E separator=, -e udp.dstport -e infiniband.bth.opcode \
    -e infiniband.bth.destqp -e udp.checksum -e ip.src >"$file.csv" 2>/dev/null || true
  rows=$(wc -l <"$file.csv")
  echo "  capture: $rows frames on spine0 port p0 ($file)"
  check "the capture holds at least 100 frames" test "$rows" -ge 100
  # shellcheck disable=SC2016  # awk programs, not shell expansions
  check "tshark decodes every frame as RoCEv2 (UDP 4791, a BTH)" \
    awk -F, '$1 != 4791 || $2 == "" {bad++} END {exit bad > 0}' "$file.csv"
  # shellcheck disable=SC2016
  check "WRITEs from 10.0.1.1 and ACKs (opcode 17) from 10.0.2.1" \
    awk -F, '$5 == "10.0.1.1" && ($2 >= 6 && $2 <= 10) {w++} $5 == "10.0.2.1" && $2 == 17 {a++}
             END {exit !(w > 0 && a > 0)}' "$file.csv"
  check "every QP's WRITEs crossed spine0 ($qps QPs)" \
    test "$(awk -F, '$5 == "10.0.1.1" {print $3}' "$file.csv" | sort -u | wc -l)" = "$qps"
  # PPCID ts-high: bits 7-4 the path id; spine0 is plane 0, path id 1. Never 0 (no PPCID).
  # PPCID ts-high: bits 7-4 the path id; spine0 is plane 0, path id 1. Never 0 (no PPCID).
  check "every packet carries a PPCID naming path 1 in its UDP checksum" \
    python3 -c 'import sys
bad = [l for l in open(sys.argv[1]) if (int(l.split(",")[3], 16) >> 4) & 0xF != 1
       or int(l.split(",")[3], 16) == 0]
sys.exit(1 if bad else 0)' "$file.csv"
}

START=$(date +%s)
one_run flow
one_run rr

summary() {
  local mode=$1 j=$OUT/$1/nic0.json r=$OUT/$1/nic1.json
  printf '%-6s %9s %8s %8s %6s %6s %16s %15s %11s\n' "$mode" \
    "$(jqv "$j" .rc_engine.requester.messages_completed)" \
    "$(jqv "$j" '.rc_engine.goodput_gbps * 1000 | floor / 1000')" \
    "$(jqv "$j" .rc_engine.requester.packets_sent)" \
    "$(jqv "$j" .rc_engine.requester.packets_retransmitted)" \
    "$(jqv "$j" .rc_engine.requester.naks_received)" \
    "$(jqv "$r" '"\(.reorder.p99_depth) / \(.reorder.max_depth)"')" \
    "$(jqv "$r" .reorder.gap_timeouts)" \
    "$(jqv "$j" '.rc_engine.completion_ns.p99 / 1000 | floor')"
}
echo
echo "== results (nic0 the requester, nic1 the responder; $OUT/MODE/*.json) =="
printf '%-6s %9s %8s %8s %6s %6s %16s %15s %11s\n' mode messages "Gbit/s" sent retx naks \
  "reorder p99/max" "gaps timed out" "fct p99 us"
summary flow
summary rr
echo
echo "heat map: packets of each QP per uplink, as nic1 received them"
for mode in flow rr; do
  jq -r --arg m "$mode" '.heat_map.qps | sort_by(.dest_qp)[] |
    "\($m)\t\(.src_ip)\t\(.dest_qp)\t" + (.per_uplink | map(tostring) | join("\t"))' \
    "$OUT/$mode/nic1.json" |
    awk -F'\t' '{printf "  %-5s %-9s QP 0x%06x", $1, $2, $3; for (i = 4; i <= NF; i++) printf " %7s", $i; print ""}'
done
echo
echo "e2e: $(($(date +%s) - START)) s"
if [ ${#FAILED[@]} -gt 0 ]; then
  echo "e2e: FAILED (${#FAILED[@]}):"
  printf '  %s\n' "${FAILED[@]}"
  exit 1
fi
echo "e2e: every check held"
