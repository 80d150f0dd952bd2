#!/usr/bin/env bash
# perftest across scripts/topo.sh's fabric (root): on a host with Soft-RoCE (the rdma_rxe
# module) or real RNICs, brings the topology up with namespace hosts (traffic = hosts), puts an
# rxe device on each host's veth, and runs ib_write_bw and ib_write_lat from host 0 to host 1
# with the NICs spraying by flow and then per packet (rr), reading each RDMA device's
# retransmission and out-of-sequence counters before and after.
#   scripts/perftest.sh [--config FILE] [--set KEY=VALUE]... [--size BYTES] [--iters N]
#                       [--modes flow,rr] [--out DIR]
# Where no RDMA device can exist (no rdma_rxe module and no RNIC) it says so in one line and
# exits 77 (the usual "skipped"); 0 when every run completed, 1 when one did not, 2 on bad use.
set -Eeuo pipefail

ME=perftest.sh
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TOPO=$ROOT/scripts/topo.sh
CONFIG=$ROOT/configs/topo.conf
SETS=()
SIZE=65536
ITERS=2000
MODES=flow,rr
OUT=$ROOT/out/perftest
usage() {
  sed -n '7,8p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}
die() { echo "$ME: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --config) [ $# -ge 2 ] || usage; CONFIG=$2; shift 2 ;;
    --set) [ $# -ge 2 ] || usage; SETS+=(--set "$2"); shift 2 ;;
    --size) [ $# -ge 2 ] || usage; SIZE=$2; shift 2 ;;
    --iters) [ $# -ge 2 ] || usage; ITERS=$2; shift 2 ;;
    --modes) [ $# -ge 2 ] || usage; MODES=$2; shift 2 ;;
    --out) [ $# -ge 2 ] || usage; OUT=$2; shift 2 ;;
    -h|--help) usage ;;
    *) echo "$ME: unknown argument '$1'" >&2; usage ;;
  esac
done
if ! [[ $SIZE =~ ^[1-9][0-9]{0,6}$ ]] || [ "$SIZE" -gt 8388608 ]; then die "--size: 1..8388608 bytes"; fi
[[ $ITERS =~ ^[1-9][0-9]{0,8}$ ]] || die "--iters: 1..999999999"
IFS=, read -r -a MODE_LIST <<<"$MODES"
for m in "${MODE_LIST[@]}"; do
  [[ $m =~ ^(flow|rr|weighted|adaptive)$ ]] || die "--modes: '$m' is not one of flow, rr, weighted, adaptive"
done
[ "$(id -u)" = 0 ] || die "needs root (network namespaces, veth, RDMA devices)"
# The topology's config must hold before anything else is asked of the machine.
"$TOPO" check --config "$CONFIG" "${SETS[@]+"${SETS[@]}"}" >/dev/null

# Can an RDMA device exist here? A real RNIC shows in /sys/class/infiniband; Soft-RoCE needs
# the rdma_rxe module (loaded, or one modprobe would load: looked for, not loaded yet).
RNICS=0
[ -d /sys/class/infiniband ] && RNICS=$(find /sys/class/infiniband -mindepth 1 -maxdepth 1 | wc -l)
rxe_module() {  # loaded or built in, or loadable
  [ -d /sys/module/rdma_rxe ] && return 0
  modprobe -n rdma_rxe >/dev/null 2>&1 && return 0
  [ -n "$(find "/lib/modules/$(uname -r)" -name 'rdma_rxe.ko*' 2>/dev/null | head -n 1)" ]
}
if [ "$RNICS" -eq 0 ] && ! rxe_module; then
  echo "$ME: skipped: no RDMA device can exist here (no rdma_rxe kernel module for Soft-RoCE and no RNIC in /sys/class/infiniband)"
  exit 77
fi
for tool in ib_write_bw ib_write_lat rdma; do
  command -v "$tool" >/dev/null || die "$tool is not installed (Debian: perftest, iproute2)"
done
modprobe rdma_rxe 2>/dev/null || true

P=$("$TOPO" check --config "$CONFIG" "${SETS[@]+"${SETS[@]}"}" | awk -F' = ' '$1 == "prefix" {print $2}')
UP=0
# shellcheck disable=SC2317  # run by the traps
cleanup() {
  trap - EXIT INT TERM
  local i
  for i in 0 1; do rdma link delete "${P}rxe$i" >/dev/null 2>&1 || true; done
  if [ "$UP" = 1 ]; then "$TOPO" down --config "$CONFIG" "${SETS[@]+"${SETS[@]}"}" >/dev/null 2>&1 || true; fi
}
trap cleanup EXIT
trap 'echo "$ME: interrupted" >&2; cleanup; exit 130' INT TERM

# The RoCEv2 GID of the device for the host's IPv4 address (an IPv4-mapped IPv6 GID), as
# libibverbs numbers them: the index to give perftest's -x.
gid_index() {  # device ipv4
  local dev=$1 ip=$2 f n hex a b c d
  IFS=. read -r a b c d <<<"$ip"
  hex=$(printf '%02x%02x:%02x%02x' "$a" "$b" "$c" "$d")
  for f in /sys/class/infiniband/"$dev"/ports/1/gid_attrs/types/*; do
    n=${f##*/}
    [ "$(cat "$f" 2>/dev/null)" = "RoCE v2" ] || continue
    grep -q "0000:0000:0000:0000:0000:ffff:$hex" "/sys/class/infiniband/$dev/ports/1/gids/$n" &&
      { echo "$n"; return 0; }
  done
  return 1
}
# Retransmission and out-of-sequence counters: rxe's names, and mlx5's for real RNICs.
COUNTERS="rcvd_seq_err out_of_seq_request duplicate_request retry_exceeded_err completer_retry_err
  out_of_sequence packet_seq_err local_ack_timeout_err implied_nak_seq_err"
read_counters() {  # device -> "name=value ..."
  local c f out=
  for c in $COUNTERS; do
    f=/sys/class/infiniband/$1/ports/1/hw_counters/$c
    [ -r "$f" ] && out+="$c=$(cat "$f") "
  done
  echo "$out"
}
delta() {  # "before" "after"
  local b=$1 a=$2 kv k v0
  for kv in $a; do
    k=${kv%%=*}
    v0=$(tr ' ' '\n' <<<"$b" | awk -F= -v k="$k" '$1 == k {print $2}')
    printf '%s +%s  ' "$k" $((${kv#*=} - ${v0:-0}))
  done
  echo
}

mkdir -p "$OUT"
FAILED=0
for mode in "${MODE_LIST[@]}"; do
  echo "== ib_write_bw / ib_write_lat, host0 -> host1, nic_emu spray $mode =="
  UP=1
  "$TOPO" up --config "$CONFIG" "${SETS[@]+"${SETS[@]}"}" --set traffic=hosts --set "spray=$mode"
  for i in 0 1; do
    ip netns exec "$P-h$i" rdma link add "${P}rxe$i" type rxe netdev eth0
  done
  g0=$(gid_index "${P}rxe0" 10.0.1.1) || { echo "$ME: ${P}rxe0 has no RoCEv2 GID for 10.0.1.1" >&2; exit 1; }
  g1=$(gid_index "${P}rxe1" 10.0.2.1) || { echo "$ME: ${P}rxe1 has no RoCEv2 GID for 10.0.2.1" >&2; exit 1; }
  before0=$(read_counters "${P}rxe0")
  before1=$(read_counters "${P}rxe1")
  for test in ib_write_bw ib_write_lat; do
    ip netns exec "$P-h1" "$test" -d "${P}rxe1" -x "$g1" -s "$SIZE" -n "$ITERS" -F \
      >"$OUT/$mode-$test-server.txt" 2>&1 &
    server=$!
    sleep 1  # perftest's server has no readiness signal; its client retries for a while
    if ! ip netns exec "$P-h0" "$test" -d "${P}rxe0" -x "$g0" -s "$SIZE" -n "$ITERS" -F \
      10.0.2.1 >"$OUT/$mode-$test.txt" 2>&1; then
      echo "  $test failed ($OUT/$mode-$test.txt)"
      FAILED=1
    fi
    wait "$server" || true
    sed -n '/#bytes/,$p' "$OUT/$mode-$test.txt" | sed 's/^/  /'
  done
  echo "  rxe0 (requester) counters: $(delta "$before0" "$(read_counters "${P}rxe0")")"
  echo "  rxe1 (responder) counters: $(delta "$before1" "$(read_counters "${P}rxe1")")"
  for i in 0 1; do rdma link delete "${P}rxe$i" >/dev/null 2>&1 || true; done
  "$TOPO" down --config "$CONFIG" "${SETS[@]+"${SETS[@]}"}" >/dev/null
  UP=0
done
exit "$FAILED"
