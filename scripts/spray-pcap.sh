#!/usr/bin/env bash
# Runs the real nic_emu with IN.pcap as its host port and N net_pcap uplinks: the NIC sprays
# the host's RoCEv2 packets over the uplinks (PPCID in the UDP checksum) and writes what each
# uplink sends to OUTDIR/uplink0.pcap ... uplinkN-1.pcap; then prints its counters.
#   scripts/spray-pcap.sh IN.pcap OUTDIR [--uplinks N] [--mode flow|rr|weighted|adaptive]
#                         [--layout ts-high|path-high]
# Uplink k has path id k+1. Writes OUTDIR/nic-tx.yaml (the config it ran) and
# OUTDIR/spray-stats.json (the full report). scripts/reorder-pcap.sh takes OUTDIR back.
set -euo pipefail
usage() {
  sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}
[ $# -ge 2 ] || usage
IN=$1
OUT=$2
shift 2
UPLINKS=4 MODE=rr LAYOUT=ts-high
while [ $# -gt 0 ]; do
  case "$1" in
    --uplinks) UPLINKS=$2; shift 2 ;;
    --mode) MODE=$2; shift 2 ;;
    --layout) LAYOUT=$2; shift 2 ;;
    -h|--help) usage ;;
    *) echo "spray-pcap.sh: unknown option $1" >&2; usage ;;
  esac
done
[ -r "$IN" ] || { echo "spray-pcap.sh: cannot read $IN" >&2; exit 2; }
case "$UPLINKS" in ''|*[!0-9]*) echo "spray-pcap.sh: --uplinks must be 1..15" >&2; exit 2 ;; esac
if [ "$UPLINKS" -lt 1 ] || [ "$UPLINKS" -gt 15 ]; then echo "spray-pcap.sh: --uplinks must be 1..15" >&2; exit 2; fi

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${NIC_EMU:-$ROOT/build/nic_emu/nic_emu}
if [ ! -x "$BIN" ]; then
  # shellcheck disable=SC1091  # scripts/build_dir.sh, checked on its own
  . "$ROOT/scripts/build_dir.sh" && ensure_build_dir "$ROOT/build"
  ninja -C "$ROOT/build" nic_emu/nic_emu >/dev/null
fi
mkdir -p "$OUT"
IN_ABS=$(cd "$(dirname "$IN")" && pwd)/$(basename "$IN")
OUT_ABS=$(cd "$OUT" && pwd)

{
  echo "nic:"
  echo "  name: spray-pcap"
  echo "  host: {name: host, device: \"net_pcap0,rx_pcap=$IN_ABS,tx_pcap=$OUT_ABS/host-rx.pcap\"}"
  echo "  uplinks:"
  for ((i = 0; i < UPLINKS; i++)); do
    echo "    - {name: uplink$i, device: \"net_pcap$((i + 1)),tx_pcap=$OUT_ABS/uplink$i.pcap\", path_id: $((i + 1))}"
  done
  echo "  spray: {mode: $MODE, ppcid_layout: $LAYOUT}"
} >"$OUT/nic-tx.yaml"

PREFIX="spray-pcap-$$"
trap 'rm -rf "/var/run/dpdk/$PREFIX"' EXIT  # EAL leaves its runtime directory behind
"$BIN" --no-huge -m 1024 --no-pci --file-prefix "$PREFIX" --log-level lib.eal:error \
  -- --config "$OUT/nic-tx.yaml" --idle-exit-ms 300 --stats "$OUT/spray-stats.json" --log-level warn
