#!/usr/bin/env bash
# Latency and jitter through a running switch_emu, measured by Pktgen-DPDK's own latency mode
# and by spraynet's built-in probe on the same path, printed side by side (root only).
#   scripts/pktgen.sh [--tarball FILE] [--duration S (5)] [--rate PCT (2)] [--latency-us US (200)]
#                     [--threshold-us US (10)] [--out DIR (out/pktgen)] [--builtin-only]
# Builds Pktgen-DPDK 23.06.1 from its source tarball (default ../shared/vendor/ beside the
# repo, or SPRAYNET_PKTGEN_TARBALL) into SPRAYNET_PKTGEN_DIR (default ~/.cache/spraynet/pktgen;
# a finished build is reused), cables two veth pairs between a generator namespace and a
# switch namespace, runs switch_emu on af_packet ports, then
#   1. Pktgen: port 0 replays a roce_pcap capture (RoCEv2 RC WRITEs) at PCT% of 10 Gbit/s with
#      a latency packet every US us; port 1 measures them (latency page and sampler);
#   2. nic_emu on the same two veth ends: RoCEv2 WRITEs from its RC engine at the same rate,
#      with the built-in probe at the same rate and threshold.
# Writes DIR/pktgen.json (both sets of figures), the Pktgen log and both reports. Exits 77 with
# one line saying why when Pktgen cannot be built or run here (no tarball, not root, no tools).
# --builtin-only runs step 2 alone (no tarball needed).
set -euo pipefail
usage() {
  sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}
skip() {
  echo "pktgen.sh: skipped: $*" >&2
  exit 77
}
die() {
  echo "pktgen.sh: $*" >&2
  exit 1
}

ROOT=$(cd "$(dirname "$0")/.." && pwd)
TARBALL=${SPRAYNET_PKTGEN_TARBALL:-$ROOT/../shared/vendor/pktgen-dpdk-23.06.1.tar.gz}
DURATION=5 RATE=2 LAT_US=200 THRESHOLD_US=10 OUT=$ROOT/out/pktgen WITH_PKTGEN=1
while [ $# -gt 0 ]; do
  case "$1" in
    --tarball) TARBALL=$2; shift 2 ;;
    --duration) DURATION=$2; shift 2 ;;
    --rate) RATE=$2; shift 2 ;;
    --latency-us) LAT_US=$2; shift 2 ;;
    --threshold-us) THRESHOLD_US=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --builtin-only) WITH_PKTGEN=0; shift ;;
    -h|--help) usage ;;
    *) echo "pktgen.sh: unknown option $1" >&2; usage ;;
  esac
done
for v in DURATION RATE LAT_US THRESHOLD_US; do
  case "${!v}" in ''|*[!0-9]*) echo "pktgen.sh: $v must be a whole number, got '${!v}'" >&2; exit 2 ;; esac
done
if [ "$DURATION" -lt 1 ] || [ "$DURATION" -gt 600 ]; then echo "pktgen.sh: --duration must be 1..600 s" >&2; exit 2; fi
if [ "$RATE" -lt 1 ] || [ "$RATE" -gt 100 ]; then echo "pktgen.sh: --rate must be 1..100 (% of 10 Gbit/s)" >&2; exit 2; fi
if [ "$LAT_US" -lt 1 ] || [ "$LAT_US" -gt 1000000 ]; then echo "pktgen.sh: --latency-us must be 1..1000000" >&2; exit 2; fi

# What Pktgen needs: its source, root (namespaces, af_packet), a build chain, a terminal.
if [ "$WITH_PKTGEN" = 1 ]; then
  [ -r "$TARBALL" ] || skip "no Pktgen-DPDK source tarball at $TARBALL (give --tarball FILE or SPRAYNET_PKTGEN_TARBALL)"
  for tool in meson ninja pkg-config script sha256sum tar flock; do
    command -v "$tool" >/dev/null || skip "$tool is not installed"
  done
  pkg-config --exists libdpdk || skip "DPDK's development files (libdpdk-dev) are not installed"
fi
[ "$(id -u)" -eq 0 ] || skip "needs root (network namespaces, veth, af_packet)"
for tool in ip ethtool python3; do
  command -v "$tool" >/dev/null || skip "$tool is not installed"
done

BUILD=${SPRAYNET_BUILD_DIR:-$ROOT/build}
SWITCH_EMU=${SWITCH_EMU:-$BUILD/switch_emu/switch_emu}
NIC_EMU=${NIC_EMU:-$BUILD/nic_emu/nic_emu}
ROCE_PCAP=${ROCE_PCAP:-$BUILD/nic_emu/roce_pcap}
for b in "$SWITCH_EMU" "$NIC_EMU" "$ROCE_PCAP"; do
  [ -x "$b" ] || die "$b is not built (meson setup build && ninja -C build)"
done

# --- build Pktgen (once per tarball) ---------------------------------------------------------
if [ "$WITH_PKTGEN" = 1 ]; then
  PGDIR=${SPRAYNET_PKTGEN_DIR:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/spraynet/pktgen}
  SUM=$(sha256sum "$TARBALL" | cut -c1-16)
  SRC=$PGDIR/src-$SUM
  PKTGEN=$SRC/build/app/pktgen
  mkdir -p "$PGDIR"
  # One build at a time per cache: a second run waits for the first and then reuses its build.
  exec 9>"$PGDIR/.lock"
  flock 9
  if [ ! -x "$PKTGEN" ] || [ ! -f "$SRC/.spraynet-built" ]; then
    echo "pktgen.sh: building Pktgen-DPDK from $TARBALL in $SRC" >&2
    rm -rf "$SRC"
    mkdir -p "$SRC"
    tar -xzf "$TARBALL" -C "$SRC" --strip-components=1 || skip "cannot unpack $TARBALL"
    if ! { meson setup "$SRC/build" "$SRC" && ninja -C "$SRC/build"; } >"$PGDIR/build.log" 2>&1; then
      tail -n 5 "$PGDIR/build.log" >&2
      skip "Pktgen-DPDK does not build against this DPDK ($(pkg-config --modversion libdpdk)); log: $PGDIR/build.log"
    fi
    touch "$SRC/.spraynet-built"
  fi
  exec 9>&-
fi

# --- the path: gen netns (g0, g1) == veth == dut netns (s0, s1), switch_emu on s0/s1 ----------
P=sppg$$  # veth names stay within 15 characters: sppgPID-g0
GEN=$P-gen DUT=$P-dut
PIDS=()
cleanup() {
  local pid
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  ip netns del "$GEN" 2>/dev/null || true
  ip netns del "$DUT" 2>/dev/null || true  # takes the veth pairs with it
  rm -rf "/var/run/dpdk/${P}sw" "/var/run/dpdk/${P}pg" "/var/run/dpdk/${P}nic"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ip netns add "$GEN"
ip netns add "$DUT"
for i in 0 1; do
  ip link add "$P-g$i" netns "$GEN" type veth peer name "$P-s$i" netns "$DUT"
  for ns in "$GEN:$P-g$i" "$DUT:$P-s$i"; do
    ip netns exec "${ns%%:*}" ip link set "${ns#*:}" up
    # The kernel must hand DPDK whole checksums and keep the wire quiet (no IPv6 chatter).
    ip netns exec "${ns%%:*}" ethtool -K "${ns#*:}" tx off rx off >/dev/null 2>&1 || true
  done
done
for ns in "$GEN" "$DUT"; do ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 || true; done

mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
# framecnt: room in af_packet's rings for bursts while an lcore is descheduled (2 cores).
AFP=qdisc_bypass=1,framecnt=2048
cat >"$OUT/switch.yaml" <<EOF
# switch_emu between the generator's two veth ends: 10.0.0.0/24 to p0 (g0), 10.0.1.0/24 to p1.
name: pktgen-dut
ports:
  - {name: p0, device: "net_af_packet0,iface=$P-s0,$AFP"}
  - {name: p1, device: "net_af_packet1,iface=$P-s1,$AFP"}
routes:
  - {prefix: 10.0.0.0/24, port: p0}
  - {prefix: 10.0.1.0/24, port: p1}
EOF

# Waits (bounded) for a line in a log, and that the process is still there.
wait_for() {  # pid file pattern what
  local i
  for ((i = 0; i < 300; i++)); do
    grep -q "$3" "$2" 2>/dev/null && return 0
    kill -0 "$1" 2>/dev/null || { cat "$2" >&2; die "$4 exited early"; }
    sleep 0.1
  done
  cat "$2" >&2
  die "$4 did not start within 30 s"
}

start_switch() {  # log
  ip netns exec "$DUT" "$SWITCH_EMU" -l 0 --no-huge -m 512 --no-pci --file-prefix "${P}sw" \
    --log-level lib.eal:error -- --config "$OUT/switch.yaml" --stats "$1.json" >"$1.log" 2>&1 &
  SW_PID=$!
  PIDS+=("$SW_PID")
  wait_for "$SW_PID" "$1.log" "running" "switch_emu"
}

stop_switch() {  # log
  kill -INT "$SW_PID"
  wait "$SW_PID" || die "switch_emu failed, see $1.log"
  grep -q "mempool: 0 mbufs in use at exit" "$1.log" || die "switch_emu leaked mbufs, see $1.log"
}

# --- 1. Pktgen --------------------------------------------------------------------------------
run_pktgen() {
# Pktgen's pcap reader opens only classic microsecond pcaps.
"$ROCE_PCAP" --out "$OUT/roce.pcap" --timestamps us --qps 8 --messages 8 --msg-bytes 65536 \
  --mtu 1024 --src-ip 10.0.0.1 --dst-ip 10.0.1.1 --gbps 10 >/dev/null
MAX_SAMPLES=50000  # Pktgen 23.06 keeps at most ~50,000 sampler entries per port
# Latency packets: port 0 -> switch -> port 1, which measures them on its own TSC (the sampler
# records every one: a sampling rate of 1 per us is above any probe rate here).
cat >"$OUT/pktgen.pkt" <<EOF
set 0 src ip 10.0.0.254/24
set 0 dst ip 10.0.1.254
set 1 src ip 10.0.1.254/24
set 1 dst ip 10.0.0.254
set 0 rate $RATE
set 1 jitter $THRESHOLD_US
enable 0 pcap
enable 0,1 latency
latency 0 rate $LAT_US
set 1 latsampler simple $MAX_SAMPLES 1000000 $OUT/pktgen-samples.txt
start 1 latsampler
start 0
delay $((DURATION * 1000))
stop 0
delay 500
stop 1 latsampler
page latency
delay 2500
quit
EOF
rm -f "$OUT/pktgen-samples.txt"
start_switch "$OUT/switch-pktgen"
# Pktgen's main lcore (0) runs its screen and CLI, lcore 1 both ports; switch_emu polls on 0.
ip netns exec "$GEN" script -qfec "$PKTGEN --lcores 0@1,1@1 --no-huge -m 4096 --no-pci --file-prefix ${P}pg \
  --log-level lib.eal:error \
  --vdev net_af_packet0,iface=$P-g0,$AFP --vdev net_af_packet1,iface=$P-g1,$AFP \
  -- -P -m 1.[0-1] -s 0:$OUT/roce.pcap -f $OUT/pktgen.pkt" "$OUT/pktgen.typescript" \
  </dev/null >/dev/null 2>&1 &
PG_PID=$!
PIDS+=("$PG_PID")
for ((i = 0; i < (DURATION + 60) * 10; i++)); do
  kill -0 "$PG_PID" 2>/dev/null || break
  sleep 0.1
done
kill -0 "$PG_PID" 2>/dev/null && { kill "$PG_PID"; die "Pktgen did not quit within $((DURATION + 60)) s, see $OUT/pktgen.typescript"; }
wait "$PG_PID" || true
stop_switch "$OUT/switch-pktgen"
[ -s "$OUT/pktgen-samples.txt" ] || {
  tr -d '\033' <"$OUT/pktgen.typescript" | grep -a -i -m 5 "error\|panic\|cannot" >&2 || true
  die "Pktgen measured no latency packet (no $OUT/pktgen-samples.txt), see $OUT/pktgen.typescript"
}
}
if [ "$WITH_PKTGEN" = 1 ]; then run_pktgen; fi

# --- 2. the built-in probe on the same two veth ends ----------------------------------------
# nic_emu's RC engine sends RoCEv2 WRITEs on g0 at Pktgen's rate (its uplink's emulated line
# rate); g1 is an uplink that only receives (link down: nothing is sprayed onto it). WRITEs, ACKs
# and probes are all routed to p1, so everything crosses g0 -> switch -> g1 as Pktgen's did.
# Two QPs of 66 packets in flight at most: where the path forwards less than the shaped rate
# (a busy 2-core machine), a window is what queues in it, and a small one keeps that short.
cat >"$OUT/nic.yaml" <<EOF
nic:
  name: pktgen-probe
  uplinks:
    - {name: g0, device: "net_af_packet0,iface=$P-g0,$AFP", link: {rate_gbps: $((RATE * 10))e-2}}
    - {name: g1, device: "net_af_packet1,iface=$P-g1,$AFP", link: {up: false}}
  spray: {mode: flow}
  rc_engine: {qps: 2, max_in_flight: 66, messages: 0, message_bytes: 65536, local_ip: 10.0.1.1,
              peer_ip: 10.0.1.2}
  probe: {uplink: g0, rate_pps: $((1000000 / LAT_US)), dst_ip: 10.0.1.254, dscp: 0,
          change_threshold_us: $THRESHOLD_US, max_samples: 1000000}
EOF
start_switch "$OUT/switch-probe"
ip netns exec "$GEN" "$NIC_EMU" -l 1 --no-huge -m 1024 --no-pci --file-prefix "${P}nic" \
  --log-level lib.eal:error -- --config "$OUT/nic.yaml" --duration-ms $((DURATION * 1000)) \
  --stats "$OUT/nic.json" >"$OUT/nic.log" 2>&1 &
NIC_PID=$!
PIDS+=("$NIC_PID")
wait "$NIC_PID" || { cat "$OUT/nic.log" >&2; die "nic_emu failed, see $OUT/nic.log"; }
stop_switch "$OUT/switch-probe"

# --- 3. side by side --------------------------------------------------------------------------
python3 - "$OUT" "$DURATION" "$RATE" "$LAT_US" "$THRESHOLD_US" "$WITH_PKTGEN" <<'PY'
import json, re, sys

out, duration, rate, lat_us, threshold_us, with_pktgen = sys.argv[1], *map(int, sys.argv[2:])


def screen(path):
    """The last screen Pktgen drew: a small VT100 interpreter (cursor moves, erase, text)."""
    rows = {}
    r = c = 1
    saved = (1, 1)
    data = open(path, "rb").read().decode("latin-1")
    i = 0
    seq = re.compile(r"\x1b\[([0-9;?]*)([A-Za-z])")
    while i < len(data):
        ch = data[i]
        if ch == "\x1b":
            m = seq.match(data, i)
            if m:
                args = [int(a) if a.isdigit() else 0 for a in m.group(1).split(";")] if m.group(1) else []
                op = m.group(2)
                if op in "Hf":
                    r = args[0] if args and args[0] else 1
                    c = args[1] if len(args) > 1 and args[1] else 1
                elif op == "J" and args and args[0] == 2:
                    rows = {}
                elif op == "K":
                    line = rows.get(r, "")
                    rows[r] = line[: c - 1]
                elif op == "C":
                    c += args[0] if args else 1
                i = m.end()
                continue
            if data[i + 1: i + 2] == "7":
                saved = (r, c)
            elif data[i + 1: i + 2] == "8":
                r, c = saved
            i += 2
            continue
        if ch == "\r":
            c = 1
        elif ch == "\n":
            r += 1
        elif ch >= " ":
            line = rows.get(r, "").ljust(c - 1)
            rows[r] = line[: c - 1] + ch + line[c:]
            c += 1
        i += 1
    return rows


def page_figures(rows):
    """Port 1's column of the latency page (where port 0's latency packets are measured)."""
    page = {}
    for line in rows.values():
        label = line[:20].strip()  # the label, without the colon Pktgen puts at column 21
        vals = line[21:]
        cols = [vals[k: k + 22] for k in range(0, 44, 22)]
        if len(cols) < 2:
            continue
        v = cols[1].replace(",", "").strip()
        if label == "Total Pkts":
            page["count"] = int(v)
        elif label == "Skipped Pkts":
            page["skipped"] = int(v)
        elif label.startswith("Cycles/Minimum"):
            page["min_us"] = float(v.split("/")[1])
        elif label.startswith("Cycles/Average"):
            page["avg_us"] = float(v.split("/")[1])
        elif label.startswith("Cycles/Maximum"):
            page["max_us"] = float(v.split("/")[1])
        elif label == "Count/Percent":
            page["changes_over_threshold"] = int(v.split("/")[0])
    return page


def stats_of(lat_ns):
    """The built-in probe's statistics over Pktgen's own samples (arrival order): nearest-rank
    percentiles, RFC 3550 jitter (D is the difference of consecutive transit times, i.e. of
    latencies), changes over the threshold."""
    s = sorted(lat_ns)
    n = len(s)
    rank = lambda p: s[max(0, -(-int(p * 1000) * n // 1000) - 1)]
    j, changes = 0.0, 0
    for a, b in zip(lat_ns, lat_ns[1:]):
        j += (abs(b - a) - j) / 16
        changes += abs(b - a) > threshold_us * 1000
    return {"count": n, "min_us": s[0] / 1e3, "avg_us": sum(s) / n / 1e3, "p50_us": rank(0.5) / 1e3,
            "p99_us": rank(0.99) / 1e3, "p999_us": rank(0.999) / 1e3, "max_us": s[-1] / 1e3,
            "jitter_us": j / 1e3, "changes_over_threshold": changes}


# "Latency", then one latency in ns a line, in arrival order (one rx queue).
if with_pktgen:
    samples = [int(x) for x in open(f"{out}/pktgen-samples.txt").read().split() if x.isdigit()]
    page = page_figures(screen(f"{out}/pktgen.typescript"))
nic = json.load(open(f"{out}/nic.json"))
p = nic["probe"]
# due: what the probe's rate asks for over the run; sent: what it sent (an mbuf short or an egress
# full sends fewer); count: the distinct probes received and measured; lost = sent - count.
probe = {"due": int(duration * 1_000_000 // lat_us), "sent": p["sent"],
         "count": p["count"], "lost": p["lost"], "out_of_order": p["out_of_order"],
         "duplicates": p["duplicates"], "min_us": p["min_ns"] / 1e3, "p50_us": p["p50_ns"] / 1e3,
         "p99_us": p["p99_ns"] / 1e3, "p999_us": p["p999_ns"] / 1e3, "max_us": p["max_ns"] / 1e3,
         "jitter_us": p["jitter_ns"] / 1e3, "changes_over_threshold": p["changes_over_threshold"]}


def switch_of(name):
    """What switch_emu forwarded from g0 to g1 during one run (load and probes)."""
    sw = json.load(open(f"{out}/{name}.json"))
    return {"p0_rx_packets": sw["ports"][0]["rx_packets"],
            "p1_tx_packets": sw["ports"][1]["tx_packets"], "pipeline_drops": sw["drops"]["total"]}


switches = {"builtin": switch_of("switch-probe")}
probe["switch_kpps"] = switches["builtin"]["p1_tx_packets"] / duration / 1e3
if with_pktgen:
    switches["pktgen"] = switch_of("switch-pktgen")
    page["switch_kpps"] = switches["pktgen"]["p1_tx_packets"] / duration / 1e3
result = {"path": "veth (af_packet) -> switch_emu -> veth", "duration_s": duration,
          "load_gbps": rate / 10, "probe_rate_pps": 1_000_000 // lat_us,
          "threshold_us": threshold_us, "builtin_probe": probe, "switch": switches,
          "builtin_load": {"rc_messages": nic["rc_engine"]["requester"]["messages_completed"],
                           "tx_packets": nic["ports"][0]["tx_packets"]}}
if with_pktgen:
    result["pktgen_page"] = page
    result["pktgen_samples"] = stats_of(samples)
json.dump(result, open(f"{out}/pktgen.json", "w"), indent=2)

print(f"latency through switch_emu, veth (af_packet) both sides, {duration} s, RoCEv2 load at "
      f"{rate / 10:g} Gbit/s, a probe every {lat_us} us, threshold {threshold_us} us")
rows = [("switch_emu g0->g1 kpps (load + probes)", "switch_kpps", "{:.1f}"),
        ("probes due (rate x duration)", "due", "{:d}"), ("probes sent", "sent", "{:d}"),
        ("probes received, measured", "count", "{:d}"), ("lost", "lost", "{:d}"),
        ("skipped (Pktgen: out of sequence)", "skipped", "{:d}"),
        ("out of order", "out_of_order", "{:d}"),
        ("min us", "min_us", "{:.1f}"), ("avg us", "avg_us", "{:.1f}"), ("p50 us", "p50_us", "{:.1f}"),
        ("p99 us", "p99_us", "{:.1f}"), ("p99.9 us", "p999_us", "{:.1f}"), ("max us", "max_us", "{:.1f}"),
        ("jitter us (RFC 3550)", "jitter_us", "{:.2f}"),
        (f"changes > {threshold_us} us", "changes_over_threshold", "{:d}")]
cols = [("Pktgen page", page), ("Pktgen samples", result["pktgen_samples"])] if with_pktgen else []
cols.append(("built-in probe", probe))
print(f"{'':38}" + "".join(f"{name:>16}" for name, _ in cols))
for label, key, fmt in rows:
    if not any(key in c for _, c in cols):
        continue  # a row only Pktgen fills, without Pktgen
    cells = [fmt.format(c[key]) if key in c else "-" for _, c in cols]
    print(f"{label:38}" + "".join(f"{x:>16}" for x in cells))
note = ("(Pktgen: a roce_pcap capture replayed open loop on port 0, latency measured on port 1; "
        "'samples' are its latency sampler's raw values through the built-in probe's statistics. "
        if with_pktgen else "(")
print(note + "Built-in: nic_emu's RC engine, RoCEv2 WRITEs closed loop (each QP's window) shaped "
      f"to the same rate; nic_emu's latency probe beside it. JSON: {out}/pktgen.json)")
PY
