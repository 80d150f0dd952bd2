#!/usr/bin/env bash
# End to end on real processes (root): brings scripts/topo.sh's fabric up (2 hosts, each
# behind a nic_emu with 4 uplinks, a switch_emu spine per uplink, all on net_af_packet/veth),
# runs the nic_emu RC traffic engine across it (nic0's requesters RDMA-WRITE to nic1's
# responders) with flow spraying and then per-packet (rr) spraying, captures spine0 with
# dpdk-dumpcap during the spray run and checks the capture with tshark (nic0 also runs its
# latency probe through spine1 then), then (unless --cc none)
# a congestion-control run: rr spraying with spine0's port towards nic1 slowed to the config's
# congest_gbps, where spine0 marks CE, nic1 sends CNPs and nic0's DCQCN cuts its QPs' rates
# (counters checked in the reports and over telemetry while the processes run); takes
# everything down, and prints goodput, retransmissions, reorder depth, the CC counters and
# the spraying heat map.
#   scripts/e2e.sh [--out DIR] [--config FILE] [--prefix P] [--messages N] [--no-capture]
#                  [--cc dcqcn|dcqcn-paper|none]
# --cc (default dcqcn) is the spines' ecn: and the NICs' cc: blocks in every run; none: neither,
# and no congestion-control run. Exits 0 when everything held, 1 when something did not (each
# failure named), 2 on bad use; on any exit, SIGINT or SIGTERM it takes the topology down first.
set -Eeuo pipefail

ME=e2e.sh
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TOPO=$ROOT/scripts/topo.sh
OUT=$ROOT/out/e2e
CONFIG=$ROOT/configs/topo.conf
PREFIX=spne
MESSAGES=50
CAPTURE=1
CC=dcqcn
CONGESTED=spine0  # the cc run's congestion point: this spine's port p1, towards nic1
usage() {
  sed -n '13,17p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}
while [ $# -gt 0 ]; do
  case "$1" in
    --out) [ $# -ge 2 ] || usage; OUT=$2; shift 2 ;;
    --config) [ $# -ge 2 ] || usage; CONFIG=$2; shift 2 ;;
    --prefix) [ $# -ge 2 ] || usage; PREFIX=$2; shift 2 ;;
    --messages) [ $# -ge 2 ] || usage; MESSAGES=$2; shift 2 ;;
    --no-capture) CAPTURE=0; shift ;;
    --cc) [ $# -ge 2 ] || usage; CC=$2; shift 2 ;;
    -h|--help) usage ;;
    *) echo "$ME: unknown argument '$1'" >&2; usage ;;
  esac
done
[ "$(id -u)" = 0 ] || { echo "$ME: needs root (network namespaces, veth, hugepages)" >&2; exit 2; }
[[ $MESSAGES =~ ^[1-9][0-9]{0,5}$ ]] || { echo "$ME: --messages: 1..999999" >&2; exit 2; }
[[ $CC =~ ^(dcqcn|dcqcn-paper|none)$ ]] || { echo "$ME: --cc: dcqcn, dcqcn-paper or none" >&2; exit 2; }
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

one_run() {  # phase spray [KEY=VALUE...]: flow and rr, then cc (rr with a congested port)
  local phase=$1 mode=$2 dir=$OUT/$1 sets=() capture=0 name kv
  rm -rf "$dir"
  mkdir -p "$dir"
  # The requester is held back until the watcher (and dumpcap) are attached.
  sets=(--set "spray=$mode" --set traffic=rc --set "rc_messages=$MESSAGES" --set "dir=$dir"
    --set hold=nic0 --set "cc=$CC")
  for kv in "${@:3}"; do sets+=(--set "$kv"); done
  if [ "$phase" = rr ] && [ "$CAPTURE" = 1 ]; then
    capture=1
    sets+=(--set capture=spine0)
  fi
  if [ "$phase" = cc ]; then
    echo "== cc $CC: $MESSAGES WRITEs per QP, spray $mode, $CONGESTED's port p1 (to nic1) congested =="
  else
    echo "== spray $mode: $MESSAGES WRITEs per QP, nic0 -> 4 spines -> nic1 (cc $CC) =="
  fi
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
  local watch_rc=0 tele_rc=0
  run python3 "$ROOT/scripts/rc_watch.py" "$PREFIX-nic0" --timeout 90 >"$dir/watch.json" ||
    watch_rc=$?
  if [ "$phase" = cc ]; then
    # The CC counters as an operator reads them, while every process still runs.
    run telemetry "$CONGESTED:/spraynet/port,p1" nic0:/spraynet/rc nic1:/spraynet/rc \
      nic0:/spraynet/cc nic1:/spraynet/cc \
      >"$dir/telemetry.json" 2>"$dir/telemetry.err" || tele_rc=$?
  fi
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
    check "$phase: every QP arrived on all 4 uplinks (heat map $spread)" \
      test "$(jq '[.heat_map.qps[] | [.per_uplink[] | select(. > 0)] | length] | all(. == 4)' "$dir/nic1.json")" = true
    check "$phase: every PPCID read ok, none on the wrong uplink" \
      test "$(jq '.ppcid | .ok > 0 and .bad_check == 0 and .wrong_uplink == 0 and .layout_mismatch == 0 and .unknown_path == 0' "$dir/nic1.json")" = true
  fi
  if [[ " ${*:3} " == *" probe=nic0 "* ]]; then
    # The latency probe rode along (nic0 -> spine1 -> nic0, behind the WRITEs): sent and came
    # back; the ones in flight when the topology went down may count as lost, none as more.
    local probe
    probe=$(jq -c '.probe | {sent, count, lost, p50_ns, max_ns}' "$dir/nic0.json" 2>/dev/null ||
      echo "no report")
    check "$phase: nic0's latency probe went through spine1 and back ($probe)" \
      test "$(jq '.probe | .sent > 0 and .count > 0 and .count <= .sent and .min_ns > 0' "$dir/nic0.json" 2>/dev/null)" = true
  fi
  if [ "$capture" = 1 ]; then check_capture "$dir/spine0.pcapng" "$qps"; fi
  if [ "$phase" = cc ]; then check_cc "$dir" "$tele_rc"; fi
}

# Replies of running processes' telemetry, as one JSON object {NAME: {COMMAND: reply}}, over
# DPDK's telemetry v2 socket (as scripts/rc_watch.py reads it): NAME:COMMAND[,PARAMS]...
telemetry() {
  python3 -c 'import json, socket, sys
prefix, out = sys.argv[1], {}
for arg in sys.argv[2:]:
    name, cmd = arg.split(":", 1)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.settimeout(10)
    s.connect(f"/var/run/dpdk/{prefix}-{name}/dpdk_telemetry.v2")
    size = json.loads(s.recv(1024).decode())["max_output_len"]
    s.send(cmd.encode())
    out.setdefault(name, {})[cmd] = json.loads(s.recv(size).decode())[cmd.split(",")[0]]
    s.close()
print(json.dumps(out))' "$PREFIX" "$@"
}

check_cc() {  # dir telemetry-status: the congestion-control run's counters, at both ends
  local dir=$1 tele_rc=$2 t=$1/telemetry.json
  # From the reports (written at exit): marks on the congested port's class 3, and everywhere.
  # shellcheck disable=SC2016  # jq programs, not shell expansions
  jq -n --arg congested "$CONGESTED" --arg port p1 --arg cc "$CC" \
    --slurpfile s0 "$dir/spine0.json" --slurpfile s1 "$dir/spine1.json" \
    --slurpfile s2 "$dir/spine2.json" --slurpfile s3 "$dir/spine3.json" \
    --slurpfile n0 "$dir/nic0.json" --slurpfile n1 "$dir/nic1.json" --slurpfile t "$t" '
    def drops: .drops_queue_full + .drops_link_down + .drops_watchdog + .drops_headroom_overflow
      + .drops_bit_error + .drops_loss + .drops_delay_line_full;
    ($s0 + $s1 + $s2 + $s3) as $spines
    | ($spines | map(select(.switch == $congested))[0]) as $c
    | {cc: $cc, congested: "\($congested)/\($port)",
       congest_gbps: ($c.ports[] | select(.name == $port) | .rate_gbps),
       report: {
         ecn_marked: ($c.ports[] | select(.name == $port) | .classes[3].ecn_marked),
         ecn_marked_by_spine: ($spines | map({(.switch): ([.ports[].classes[].ecn_marked] | add)}) | add),
         ecn_not_ect: ([$spines[].ports[].classes[].ecn_not_ect] | add),
         class3_drops: ([$spines[].ports[].classes[3] | drops] | add),
         nic_egress_drops: ([$n0[0], $n1[0] | .ports[].egress_drops] | add),
         ce_received: $n1[0].counters.ce_received,
         cnps_sent: $n1[0].counters.cnps_sent,
         cnps_suppressed: $n1[0].counters.cnps_suppressed,
         cnps_received: $n0[0].counters.cnps_received,
         rp_cnps: $n0[0].rc_engine.cc.cnps,
         rate_cuts: $n0[0].rc_engine.cc.rate_cuts,
         cuts_deferred: $n0[0].rc_engine.cc.cuts_deferred,
         qps_at_min_rate: $n0[0].rc_engine.cc.qps_at_min_rate,
         line_rate_gbps: $n0[0].rc_engine.cc.line_rate_gbps,
         rate_mbps: $n0[0].rc_engine.cc.rate_mbps},
       telemetry: ($t[0] // {} | {
         ecn_marked: .[$congested]["/spraynet/port,p1"]["classes/3/ecn_marked"],
         rp_cnps: .nic0["/spraynet/rc"]["cc/cnps"],
         rate_cuts: .nic0["/spraynet/rc"]["cc/rate_cuts"],
         cc_mode: .nic0["/spraynet/rc"]["cc/mode"],
         ce_received: .nic1["/spraynet/cc"]["ce_received"],
         cnps_sent: .nic1["/spraynet/cc"]["cnps_sent"],
         cnps_received: .nic0["/spraynet/cc"]["cnps_received"]})}' >"$dir/cc.json" 2>"$dir/cc.err" ||
    echo '{"report": {}, "telemetry": {}}' >"$dir/cc.json"
  local c=$dir/cc.json
  gt0() { test "$(jq "$1 > 0" "$c")" = true; }
  check "cc: $CONGESTED marked CE on its congested port p1 (ecn_marked $(jqv "$c" .report.ecn_marked))" \
    gt0 .report.ecn_marked
  check "cc: nic1 received CE-marked packets (ce_received $(jqv "$c" .report.ce_received))" \
    gt0 .report.ce_received
  check "cc: nic1 sent CNPs (cnps_sent $(jqv "$c" .report.cnps_sent))" gt0 .report.cnps_sent
  check "cc: nic0 received CNPs (cnps_received $(jqv "$c" .report.cnps_received))" \
    gt0 .report.cnps_received
  check "cc: nic0's DCQCN cut its QPs' rates (rate_cuts $(jqv "$c" .report.rate_cuts))" \
    gt0 .report.rate_cuts
  check "cc: no class-3 (RoCE) packet dropped at any spine, nor at a NIC's egress" \
    test "$(jq '.report.class3_drops == 0 and .report.nic_egress_drops == 0' "$c")" = true
  check "cc: telemetry answered while the processes ran $(tail -n 1 "$dir/telemetry.err")" \
    test "$tele_rc" = 0
  # Read while running, so at most what the reports say at exit.
  local k
  for k in ecn_marked rp_cnps rate_cuts ce_received cnps_sent cnps_received; do
    check "cc: telemetry $k $(jqv "$c" ".telemetry.$k") > 0, at most the report's" \
      test "$(jq --arg k "$k" '.telemetry[$k] > 0 and .telemetry[$k] <= .report[$k]' "$c")" = true
  done
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
  check "every packet carries a PPCID naming path 1 in its UDP checksum" \
    python3 -c 'import sys
bad = [l for l in open(sys.argv[1]) if (int(l.split(",")[3], 16) >> 4) & 0xF != 1
       or int(l.split(",")[3], 16) == 0]
sys.exit(1 if bad else 0)' "$file.csv"
}

START=$(date +%s)
PHASES=(flow rr)
one_run flow flow
one_run rr rr probe=nic0 probe_uplink=1
if [ "$CC" != none ]; then
  PHASES+=(cc)
  # The congested path queues for milliseconds: the reorder engine holds its gaps that long
  # (still below the RC retransmit timeout, 67 ms).
  one_run cc rr "congest=$CONGESTED" reorder_hold_us=50000
fi

summary() {
  local mode=$1 j=$OUT/$1/nic0.json r=$OUT/$1/nic1.json marked=- cuts=- k
  if [ "$CC" != none ]; then
    marked=0
    for k in 0 1 2 3; do
      marked=$((marked + $(jqv "$OUT/$mode/spine$k.json" '[.ports[].classes[].ecn_marked] | add' 2>/dev/null || echo 0)))
    done
    cuts=$(jqv "$j" .rc_engine.cc.rate_cuts)
  fi
  printf '%-6s %9s %8s %8s %6s %6s %16s %15s %11s %8s %6s\n' "$mode" \
    "$(jqv "$j" .rc_engine.requester.messages_completed)" \
    "$(jqv "$j" '.rc_engine.goodput_gbps * 1000 | floor / 1000')" \
    "$(jqv "$j" .rc_engine.requester.packets_sent)" \
    "$(jqv "$j" .rc_engine.requester.packets_retransmitted)" \
    "$(jqv "$j" .rc_engine.requester.naks_received)" \
    "$(jqv "$r" '"\(.reorder.p99_depth) / \(.reorder.max_depth)"')" \
    "$(jqv "$r" .reorder.gap_timeouts)" \
    "$(jqv "$j" '.rc_engine.completion_ns.p99 / 1000 | floor')" "$marked" "$cuts"
}
echo
echo "== results (nic0 the requester, nic1 the responder; $OUT/MODE/*.json) =="
printf '%-6s %9s %8s %8s %6s %6s %16s %15s %11s %8s %6s\n' mode messages "Gbit/s" sent retx naks \
  "reorder p99/max" "gaps timed out" "fct p99 us" "CE marks" cuts
for mode in "${PHASES[@]}"; do summary "$mode"; done
if [ "$CC" != none ]; then
  c=$OUT/cc/cc.json
  echo
  echo "congestion control ($c): cc $CC, $CONGESTED port p1 at $(jqv "$c" .congest_gbps) Gbit/s" \
    "(the others at the config's link_gbps), nic0's line rate $(jqv "$c" .report.line_rate_gbps) Gbit/s a QP"
  printf '  %-38s %10s %10s\n' "counter" report telemetry
  cc_row() { printf '  %-38s %10s %10s\n' "$1" "$(jqv "$c" ".report.$2")" "${3:-not read}"; }
  cc_row "$CONGESTED p1 class 3 ecn_marked" ecn_marked "$(jqv "$c" .telemetry.ecn_marked)"
  cc_row "nic1 ce_received" ce_received "$(jqv "$c" .telemetry.ce_received)"
  cc_row "nic1 cnps_sent" cnps_sent "$(jqv "$c" .telemetry.cnps_sent)"
  cc_row "nic1 cnps_suppressed" cnps_suppressed
  cc_row "nic0 cnps_received" cnps_received "$(jqv "$c" .telemetry.cnps_received)"
  cc_row "nic0 rc_engine.cc.cnps" rp_cnps "$(jqv "$c" .telemetry.rp_cnps)"
  cc_row "nic0 rc_engine.cc.rate_cuts" rate_cuts "$(jqv "$c" .telemetry.rate_cuts)"
  cc_row "nic0 rc_engine.cc.qps_at_min_rate" qps_at_min_rate
  cc_row "spines' class 3 drops" class3_drops
  cc_row "NICs' egress drops" nic_egress_drops
  echo "  CE marks by spine: $(jq -c .report.ecn_marked_by_spine "$c");" \
    "nic0's QP rates at exit (Mbit/s): $(jq -c '.report.rate_mbps' "$c")"
fi
echo
echo "heat map: packets of each QP per uplink, as nic1 received them"
for mode in "${PHASES[@]}"; do
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
