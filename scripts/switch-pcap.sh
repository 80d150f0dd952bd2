#!/usr/bin/env bash
# Runs the real switch_emu with IN.pcap as its input port and N net_pcap output ports
# (OUTDIR/port0.pcap ...) in one ECMP group, then prints its counters: how a user checks
# hashing and drops on their own capture.
#   scripts/switch-pcap.sh IN.pcap OUTDIR [--ports N] [--mode ecmp|weighted|dlb|drill|letflow]
#                          [--seed S] [--hash crc32c|crc32] [--dest-qp] [--flowlet-gap-ns N]
#                          [--flowlet-entries N]
# Writes OUTDIR/switch.yaml (the config it ran), OUTDIR/stats.json (the full report) and
# OUTDIR/portK.pcap. Every destination routes to the group; links are 100 Gbit/s.
set -euo pipefail
usage() {
  sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}
[ $# -ge 2 ] || usage
IN=$1
OUT=$2
shift 2
PORTS=8 MODE=ecmp SEED=0 HASH=crc32c DESTQP=false GAP=100000 ENTRIES=4096
while [ $# -gt 0 ]; do
  case "$1" in
    --ports) PORTS=$2; shift 2 ;;
    --mode) MODE=$2; shift 2 ;;
    --seed) SEED=$2; shift 2 ;;
    --hash) HASH=$2; shift 2 ;;
    --dest-qp) DESTQP=true; shift ;;
    --flowlet-gap-ns) GAP=$2; shift 2 ;;
    --flowlet-entries) ENTRIES=$2; shift 2 ;;
    -h|--help) usage ;;
    *) echo "switch-pcap.sh: unknown option $1" >&2; usage ;;
  esac
done
[ -r "$IN" ] || { echo "switch-pcap.sh: cannot read $IN" >&2; exit 2; }
case "$PORTS" in ''|*[!0-9]*) echo "switch-pcap.sh: --ports must be 1..63" >&2; exit 2 ;; esac
if [ "$PORTS" -lt 1 ] || [ "$PORTS" -gt 63 ]; then echo "switch-pcap.sh: --ports must be 1..63" >&2; exit 2; fi

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${SWITCH_EMU:-$ROOT/build/switch_emu/switch_emu}
if [ ! -x "$BIN" ]; then
  # shellcheck disable=SC1091  # scripts/build_dir.sh, checked on its own
  . "$ROOT/scripts/build_dir.sh" && ensure_build_dir "$ROOT/build"
  ninja -C "$ROOT/build" switch_emu/switch_emu >/dev/null
fi
mkdir -p "$OUT"
IN_ABS=$(cd "$(dirname "$IN")" && pwd)/$(basename "$IN")
OUT_ABS=$(cd "$OUT" && pwd)

{
  echo "name: switch-pcap"
  echo "ports:"
  echo "  - {name: in, device: \"net_pcap0,rx_pcap=$IN_ABS,tx_pcap=$OUT_ABS/in-tx.pcap\"}"
  for ((i = 0; i < PORTS; i++)); do
    echo "  - {name: port$i, device: \"net_pcap$((i + 1)),tx_pcap=$OUT_ABS/port$i.pcap\", queue_bytes: 67108864}"
  done
  echo "groups:"
  printf "  - {name: out, mode: %s, dlb_gap_ns: %s, flowlet_entries: %s, ports: [" "$MODE" "$GAP" "$ENTRIES"
  for ((i = 0; i < PORTS; i++)); do printf "%sport%d" "$([ $i -gt 0 ] && echo ', ')" "$i"; done
  echo "]}"
  echo "routes:"
  echo "  - {prefix: 0.0.0.0/0, group: out}"
  echo "hash: {algorithm: $HASH, seed: $SEED, dest_qp: $DESTQP}"
} >"$OUT/switch.yaml"

PREFIX="switch-pcap-$$"
trap 'rm -rf "/var/run/dpdk/$PREFIX"' EXIT  # EAL leaves its runtime directory behind
"$BIN" --no-huge -m 1024 --no-pci --file-prefix "$PREFIX" --log-level lib.eal:error \
  -- --config "$OUT/switch.yaml" --idle-exit-ms 300 --stats "$OUT/stats.json" --log-level warn
