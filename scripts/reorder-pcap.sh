#!/usr/bin/env bash
# Runs the real nic_emu as the receiving NIC: OUTDIR/uplink*.pcap (as scripts/spray-pcap.sh
# wrote them) are its uplinks, and what it delivers to its host port is written to OUT.pcap:
# each QP in PSN order, UDP checksum restored to 0. Then prints its counters.
#   scripts/reorder-pcap.sh OUTDIR OUT.pcap [--layout ts-high|path-high] [--no-reorder]
#                           [--hold-us US] [--window N]
# Uplink k has path id k+1, as spray-pcap.sh gives them. A pcap replays as fast as it can be
# read, not at its capture's pace, so the hold timeout defaults to 100 ms here (a live NIC's is
# 100 us). Writes OUTDIR/nic-rx.yaml and OUTDIR/reorder-stats.json.
set -euo pipefail
usage() {
  sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}
[ $# -ge 2 ] || usage
DIR=$1
OUTPCAP=$2
shift 2
LAYOUT=ts-high REORDER=true HOLD_US=100000 WINDOW=256
while [ $# -gt 0 ]; do
  case "$1" in
    --layout) LAYOUT=$2; shift 2 ;;
    --no-reorder) REORDER=false; shift ;;
    --hold-us) HOLD_US=$2; shift 2 ;;
    --window) WINDOW=$2; shift 2 ;;
    -h|--help) usage ;;
    *) echo "reorder-pcap.sh: unknown option $1" >&2; usage ;;
  esac
done
[ -d "$DIR" ] || { echo "reorder-pcap.sh: $DIR is not a directory" >&2; exit 2; }
DIR_ABS=$(cd "$DIR" && pwd)
UPLINKS=0
while [ -r "$DIR_ABS/uplink$UPLINKS.pcap" ]; do UPLINKS=$((UPLINKS + 1)); done
[ "$UPLINKS" -ge 1 ] || { echo "reorder-pcap.sh: no $DIR/uplink0.pcap" >&2; exit 2; }
[ "$UPLINKS" -le 16 ] || { echo "reorder-pcap.sh: more than 16 uplink pcaps" >&2; exit 2; }

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${NIC_EMU:-$ROOT/build/nic_emu/nic_emu}
if [ ! -x "$BIN" ]; then
  # shellcheck disable=SC1091  # scripts/build_dir.sh, checked on its own
  . "$ROOT/scripts/build_dir.sh" && ensure_build_dir "$ROOT/build"
  ninja -C "$ROOT/build" nic_emu/nic_emu >/dev/null
fi
mkdir -p "$(dirname "$OUTPCAP")"
OUT_ABS=$(cd "$(dirname "$OUTPCAP")" && pwd)/$(basename "$OUTPCAP")

{
  echo "nic:"
  echo "  name: reorder-pcap"
  echo "  host: {name: host, device: \"net_pcap0,tx_pcap=$OUT_ABS\"}"
  echo "  uplinks:"
  for ((i = 0; i < UPLINKS; i++)); do
    echo "    - {name: uplink$i, device: \"net_pcap$((i + 1)),rx_pcap=$DIR_ABS/uplink$i.pcap,tx_pcap=/dev/null\", path_id: $((i + 1))}"
  done
  echo "  spray: {mode: rr, ppcid_layout: $LAYOUT}"
  if [ "$REORDER" = true ]; then
    echo "  receive: reorder-buffer"
    echo "  reorder: {window: $WINDOW, hold_timeout_us: $HOLD_US}"
  else
    echo "  receive: none"
  fi
} >"$DIR/nic-rx.yaml"

PREFIX="reorder-pcap-$$"
trap 'rm -rf "/var/run/dpdk/$PREFIX"' EXIT
"$BIN" --no-huge -m 1024 --no-pci --file-prefix "$PREFIX" --log-level lib.eal:error \
  -- --config "$DIR/nic-rx.yaml" --idle-exit-ms 500 --stats "$DIR/reorder-stats.json" --log-level warn
