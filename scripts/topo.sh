#!/usr/bin/env bash
# A one-machine fabric of real DPDK processes on veth pairs in network namespaces (root only):
# two hosts, each behind its own nic_emu with U uplinks (4 by default), one switch_emu spine per
# uplink (plane k: nic0's uplink k -- spine k -- nic1's uplink k).
#   scripts/topo.sh up     [--config FILE] [--set KEY=VALUE]...   create and start
#   scripts/topo.sh down   [--config FILE] [--set KEY=VALUE]...   stop and remove everything
#   scripts/topo.sh status [--config FILE] [--set KEY=VALUE]...   what is up; exit 0 if all is
#   scripts/topo.sh start  [--config FILE] [--set KEY=VALUE]...   start what `hold` kept back
#   scripts/topo.sh check  [--config FILE] [--set KEY=VALUE]...   print the configuration
# FILE has KEY = VALUE lines (# comments); configs/topo.conf lists every key with its default.
# --pmd af_packet|af_xdp is --set pmd=...: the DPDK driver of every port.
# --set probe=nic0 runs nic_emu's latency probe there (nic0 -> spine K -> nic0); status shows it.
# `down` leaves no namespace, veth, process, hugepage or DPDK runtime directory behind, also
# after a failed or interrupted `up` (which runs it itself).
#
#   PREFIX-h0         PREFIX-nic0             PREFIX-spineK          PREFIX-nic1        PREFIX-h1
#   eth0 10.0.1.1 -- h0nic [nic_emu] n0u0 -- s0p0 [switch_emu] s0p1 -- n1u0 [nic_emu] h1nic -- eth0 10.0.2.1
#                                    n0u1 -- s1p0 [switch_emu] s1p1 -- n1u1
#                                    ...      (one spine per uplink; each name a network namespace)
#
# Every DPDK port is net_af_packet with qdisc_bypass (or, with pmd = af_xdp, net_af_xdp on
# queue 0: rc_mtu 1024 then, an AF_XDP mbuf holds at most a page) on a veth end whose checksum
# offload is off; every process has its own --file-prefix (PREFIX-spineK, PREFIX-nicI) and one lcore, on
# the cores in turn, with the poll loops' idle back-off (idle_backoff_us) so that they share
# them. traffic = hosts puts the host namespaces behind the NICs (ping, iperf, Soft-RoCE);
# traffic = rc lets each nic_emu's RC traffic engine play its host (nic0 requester, nic1
# responder), with --run-until-signal: /spraynet/rc says when the messages are done.
# cc = dcqcn (or dcqcn-paper) gives every spine an ecn: block (CE marking of class 3 between
# ecn_kmin_bytes and ecn_kmax_bytes) and every NIC a cc: block (CNPs, DCQCN rates); congest =
# spineK makes that spine's port towards nic1 a congestion point at congest_gbps.
set -Eeuo pipefail  # -E: the ERR trap of `up` also fires inside its functions

ME=topo.sh
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SWITCH_EMU=${SWITCH_EMU:-$ROOT/build/switch_emu/switch_emu}
NIC_EMU=${NIC_EMU:-$ROOT/build/nic_emu/nic_emu}

die() { echo "$ME: $*" >&2; exit 2; }
usage() {
  sed -n '3,12p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

# ---- configuration: defaults, then the file, then --set --------------------------------------
declare -A CFG=(
  [prefix]=spn [uplinks]=4 [traffic]=rc [spray]=rr [receive]=reorder-buffer
  [reorder_hold_us]=5000 [rc_qps]=4 [rc_messages]=50 [rc_message_bytes]=65536 [rc_mtu]=1024
  [link_gbps]=10 [link_delay_ns]=2000 [idle_backoff_us]=100 [capture]=none [cores]=auto
  [hold]=none [dir]='' [spine_extra]='' [cc]=none [ecn_kmin_bytes]=20000
  [ecn_kmax_bytes]=200000 [ecn_pmax]=0.2 [congest]=none [congest_gbps]=0.05 [pmd]=af_packet
  [probe]=none [probe_uplink]=0 [probe_rate_pps]=1000 [probe_threshold_us]=10
)
# What each key allows, for the error message: KEY -> "regex@@description".
declare -A RULE=(
  [prefix]='^[a-z][a-z0-9]{0,7}$@@1-8 lower-case letters or digits, starting with a letter'
  [uplinks]='^[1-8]$@@1..8'
  [traffic]='^(rc|hosts)$@@rc or hosts'
  [spray]='^(flow|rr|weighted|adaptive)$@@flow, rr, weighted or adaptive'
  [receive]='^(reorder-buffer|ooo-placement|none)$@@reorder-buffer, ooo-placement or none'
  [reorder_hold_us]='^[0-9]{1,6}$@@1..1000000'
  [rc_qps]='^[0-9]{1,3}$@@1..256'
  [rc_messages]='^[0-9]{1,9}$@@0..999999999 (0: unlimited)'
  [rc_message_bytes]='^[0-9]{1,9}$@@1..16777216'
  [rc_mtu]='^(1024|4096)$@@1024 or 4096'
  [link_gbps]='^[0-9]+(\.[0-9]+)?$@@a rate in Gbit/s, e.g. 10 or 0.5'
  [link_delay_ns]='^[0-9]{1,9}$@@0..999999999'
  [idle_backoff_us]='^[0-9]{1,7}$@@0..1000000 (0: busy polling)'
  [capture]='^(none|spine[0-7])$@@none or spineK (that spine runs on hugepages for dpdk-dumpcap)'
  [cores]='^(auto|[0-9]+(,[0-9]+)*)$@@auto or a list of CPUs, e.g. 0,1'
  [hold]='^(none|nic0)$@@none or nic0 (up leaves the requester to topo.sh start)'
  [dir]='^(/[^ ]*)?$@@an absolute path (default /run/spraynet/PREFIX)'
  [spine_extra]='^(/[^ ]*)?$@@an absolute path to YAML appended to every spine config (empty: none)'
  [cc]='^(none|dcqcn|dcqcn-paper)$@@none, dcqcn or dcqcn-paper'
  [ecn_kmin_bytes]='^(0|[1-9][0-9]{0,9})$@@0..9999999999, at most ecn_kmax_bytes'
  [ecn_kmax_bytes]='^(0|[1-9][0-9]{0,9})$@@0..9999999999'
  [ecn_pmax]='^(0\.[0-9]*[1-9][0-9]*|1|1\.0*)$@@(0, 1], e.g. 0.2'
  [congest]='^(none|spine[0-7])$@@none or spineK (its port p1, towards nic1, runs at congest_gbps)'
  [congest_gbps]='^[0-9]+(\.[0-9]+)?$@@a rate in Gbit/s, e.g. 0.05'
  [pmd]='^(af_packet|af_xdp)$@@af_packet or af_xdp'
  [probe]='^(none|nic[01])$@@none, nic0 or nic1 (that nic_emu runs the latency probe)'
  [probe_uplink]='^[0-7]$@@0..uplinks-1 (the uplink, so the spine, the probes go through)'
  [probe_rate_pps]='^[1-9][0-9]{0,6}$@@1..9999999 probes per second'
  [probe_threshold_us]='^[0-9]{1,7}(\.[0-9]+)?$@@0..9999999 (a latency change over it is counted)'
)
CONFIG_FILE=
set_key() {  # where key value
  local where=$1 key=$2 value=$3 rule
  [ -n "${RULE[$key]+x}" ] ||
    die "$where: unknown key '$key' (keys: $(printf '%s ' "${!RULE[@]}" | tr ' ' '\n' | sort | tr '\n' ' '))"
  rule=${RULE[$key]}
  [[ $value =~ ${rule%%@@*} ]] || die "$where: $key: '$value' is not allowed: ${rule#*@@}"
  CFG[$key]=$value
}
CMD=${1:-}
[ $# -gt 0 ] && shift
SETS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --config) [ $# -ge 2 ] || die "--config needs a file"; CONFIG_FILE=$2; shift 2 ;;
    --set) [ $# -ge 2 ] || die "--set needs KEY=VALUE"; SETS+=("$2"); shift 2 ;;
    --pmd) [ $# -ge 2 ] || die "--pmd needs af_packet or af_xdp"; SETS+=("pmd=$2"); shift 2 ;;
    -h|--help) usage ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
if [ -n "$CONFIG_FILE" ]; then
  [ -r "$CONFIG_FILE" ] || die "$CONFIG_FILE: cannot read"
  n=0
  while IFS= read -r line || [ -n "$line" ]; do
    n=$((n + 1))
    line=${line%%#*}
    [[ $line =~ ^[[:space:]]*$ ]] && continue
    [[ $line =~ ^[[:space:]]*([a-z_]+)[[:space:]]*=[[:space:]]*([^[:space:]]*)[[:space:]]*$ ]] ||
      die "$CONFIG_FILE:$n: expected KEY = VALUE, got '$line'"
    set_key "$CONFIG_FILE:$n" "${BASH_REMATCH[1]}" "${BASH_REMATCH[2]}"
  done <"$CONFIG_FILE"
fi
for kv in "${SETS[@]+"${SETS[@]}"}"; do
  [[ $kv == *=* ]] || die "--set $kv: expected KEY=VALUE"
  set_key "--set" "${kv%%=*}" "${kv#*=}"
done
for k in reorder_hold_us rc_qps rc_message_bytes; do
  [ "${CFG[$k]}" -ge 1 ] || die "$k: '${CFG[$k]}' is not allowed: ${RULE[$k]#*@@}"
done
[ "${CFG[rc_qps]}" -le 256 ] || die "rc_qps: '${CFG[rc_qps]}' is not allowed: 1..256"
if [ "${CFG[probe_uplink]}" -ge "${CFG[uplinks]}" ]; then
  die "probe_uplink: '${CFG[probe_uplink]}' is not allowed: there are uplinks 0..$((CFG[uplinks] - 1))"
fi
for k in capture congest; do
  if [ "${CFG[$k]}" != none ] && [ "${CFG[$k]#spine}" -ge "${CFG[uplinks]}" ]; then
    die "$k: '${CFG[$k]}' is not allowed: there are spine0..spine$((CFG[uplinks] - 1))"
  fi
done
# An AF_XDP mbuf is at most a page (the programs size it so): no room for a 4096-byte MTU.
if [ "${CFG[pmd]}" = af_xdp ] && [ "${CFG[rc_mtu]}" = 4096 ]; then
  die "rc_mtu: '4096' is not allowed with pmd = af_xdp: an AF_XDP frame fits one page (use 1024)"
fi
[ "${CFG[ecn_kmin_bytes]}" -le "${CFG[ecn_kmax_bytes]}" ] ||
  die "ecn_kmin_bytes: '${CFG[ecn_kmin_bytes]}' is not allowed: above ecn_kmax_bytes (${CFG[ecn_kmax_bytes]})"

P=${CFG[prefix]}
U=${CFG[uplinks]}
# The run directory of a topology that is up is remembered, so that down and status find it
# without being told again.
STATE_LINK=/run/spraynet/$P.dir
if [ -n "${CFG[dir]}" ]; then
  DIR=${CFG[dir]}
elif [ "$CMD" != up ] && [ -f "$STATE_LINK" ]; then
  DIR=$(cat "$STATE_LINK")
else
  DIR=/run/spraynet/$P
fi
HOSTNS=("$P-h0" "$P-h1")
HUGE_PAGES=160  # 320 MiB: the captured spine's -m 256 and dpdk-dumpcap's ring and mempool

procs() {  # every process name, in start order
  local k
  for ((k = 0; k < U; k++)); do echo "spine$k"; done
  echo nic1
  echo nic0
}
# Every process has a namespace of its own, as a box has its own interfaces. It also must:
# net_af_packet joins each socket to a PACKET_FANOUT group numbered (pid ^ ifindex) & 0xffff,
# and the kernel refuses (EINVAL) a group number already bound to another interface in the
# same namespace: processes started in quick succession have close pids, and their uplinks
# close ifindexes.
namespaces() { echo "${HOSTNS[@]}"; for name in $(procs); do echo "$P-$name"; done; }
# MACs are fixed so that configs can name the next hops.
host_mac() { printf '02:53:50:0%d:00:01' "$1"; }
nic_host_mac() { printf '02:53:50:0%d:00:fe' "$1"; }
nic_uplink_mac() { printf '02:53:50:1%d:0%d:01' "$1" "$2"; }
spine_port_mac() { printf '02:53:50:2%d:0%d:01' "$1" "$2"; }

in_ns() { local ns=$1; shift; ip netns exec "$ns" "$@"; }
ns_exists() { ip netns list | awk '{print $1}' | grep -qx "$1"; }
alive() { [ -f "$DIR/$1.pid" ] && kill -0 "$(cat "$DIR/$1.pid")" 2>/dev/null; }

# ---- down: safe to run at any point, any number of times ------------------------------------
stop_pids() {  # pid...: SIGTERM to each, up to 10 s for all to exit (the programs write their
  # reports), then SIGKILL to any left
  local pid i left
  for pid in "$@"; do kill -TERM "$pid" 2>/dev/null || true; done
  for ((i = 0; i < 100; i++)); do
    left=0
    for pid in "$@"; do
      if kill -0 "$pid" 2>/dev/null; then left=1; fi
    done
    if [ "$left" = 0 ]; then return 0; fi
    sleep 0.1
  done
  for pid in "$@"; do
    if kill -0 "$pid" 2>/dev/null; then
      echo "$ME: pid $pid did not stop within 10 s of SIGTERM: SIGKILL" >&2
      kill -KILL "$pid" 2>/dev/null || true
    fi
  done
}
do_down() {
  local name pid ns group pids
  if [ -d "$DIR" ]; then
    # NICs first: their RC engines stop sending before the spines go. The members of a group
    # stop together.
    for group in "nic0 nic1" "$(for ((k = 0; k < U; k++)); do echo "spine$k"; done)"; do
      pids=()
      for name in $group; do
        if [ -f "$DIR/$name.pid" ]; then pids+=("$(cat "$DIR/$name.pid")"); fi
      done
      stop_pids "${pids[@]+"${pids[@]}"}"
      for name in $group; do rm -f "$DIR/$name.pid"; done
    done
  fi
  # Anything else still running in our namespaces (a half-started process).
  for ns in $(namespaces); do
    if ns_exists "$ns"; then
      # shellcheck disable=SC2046  # one pid a word
      stop_pids $(ip netns pids "$ns")
      ip netns del "$ns" 2>/dev/null || true  # takes its veth ends with it
    fi
  done
  # The waiters record exit codes as the processes end; give them a moment.
  for name in $(procs); do
    for ((i = 0; i < 20; i++)); do
      [ ! -f "$DIR/$name.waiting" ] && break
      sleep 0.05
    done
  done
  if [ -f "$DIR/huge.mounted" ]; then
    umount "$DIR/huge" 2>/dev/null || umount -l "$DIR/huge" 2>/dev/null || true
    rm -f "$DIR/huge.mounted"
    rmdir "$DIR/huge" 2>/dev/null || true
  fi
  if [ -f "$DIR/hugepages.added" ]; then
    # Give back what up added (not a saved total: someone else may have reserved pages since).
    local now added
    now=$(cat /proc/sys/vm/nr_hugepages)
    added=$(cat "$DIR/hugepages.added")
    if [ "$now" -ge "$added" ]; then echo $((now - added)) >/proc/sys/vm/nr_hugepages || true; fi
    rm -f "$DIR/hugepages.added"
  fi
  for name in $(procs); do rm -rf "/var/run/dpdk/$P-$name"; done
  rm -f "$DIR/held" "$STATE_LINK"
}

# ---- status ------------------------------------------------------------------------------------
do_status() {
  local ok=0 name ns
  for ns in $(namespaces); do
    if ns_exists "$ns"; then echo "netns   $ns: up"; else echo "netns   $ns: absent"; ok=1; fi
  done
  for name in $(procs); do
    if alive "$name"; then
      echo "process $name: running, pid $(cat "$DIR/$name.pid"), --file-prefix $P-$name"
    elif [ -f "$DIR/held" ] && [ "$(cut -d' ' -f1 "$DIR/held")" = "$name" ]; then
      echo "process $name: held back (hold = $name): topo.sh start"; ok=1
    elif [ -f "$DIR/$name.rc" ]; then
      echo "process $name: exited with status $(cat "$DIR/$name.rc") (log $DIR/$name.log)"; ok=1
    else
      echo "process $name: not running"; ok=1
    fi
  done
  if [ "${CFG[probe]}" != none ] && alive "${CFG[probe]}"; then probe_status "${CFG[probe]}"; fi
  return $ok
}

probe_status() {  # nic: its latency probe so far, over telemetry (/spraynet/probe)
  python3 -c 'import json, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.settimeout(10)
s.connect(sys.argv[1])
size = json.loads(s.recv(1024).decode())["max_output_len"]
s.send(b"/spraynet/probe")
p = json.loads(s.recv(size).decode())["/spraynet/probe"]
if "error" in p:
    sys.exit(print("probe   %s: %s" % (sys.argv[2], p["error"])))
us = lambda k: "%.1f" % (p[k + "_ns"] / 1e3) if p["count"] else "-"
print("probe   %s: sent %d, received %d, lost %d; latency us min %s p50 %s p99 %s max %s" % (
    sys.argv[2], p["sent"], p["count"], p["lost"], us("min"), us("p50"), us("p99"), us("max")))
' "/var/run/dpdk/$P-$1/dpdk_telemetry.v2" "$1" || echo "probe   $1: telemetry did not answer"
}

# ---- up --------------------------------------------------------------------------------------
veth() {  # nsA devA macA nsB devB macB
  ip link add "$2" netns "$1" address "$3" type veth peer name "$5" netns "$4" address "$6"
  for end in "$1 $2" "$4 $5"; do
    read -r ns dev <<<"$end"
    in_ns "$ns" ip link set "$dev" up
    # The kernel must never hand af_packet a frame with a partial checksum.
    in_ns "$ns" ethtool -K "$dev" tx off rx off >/dev/null 2>&1 || true
  done
}

write_spine_config() {  # k
  local k=$1 i
  {
    echo "# generated by scripts/topo.sh: spine $k, port pI cabled to nic I's uplink u$k"
    echo "name: spine$k"
    echo "ports:"
    for i in 0 1; do
      # peer_mac: the NICs pass frames to their hosts as they are, so the next hop that the
      # frame must be addressed to is the host behind the NIC.
      local rate=${CFG[link_gbps]}
      # congest: this spine's egress towards nic1 (the responder's downlink) is the bottleneck.
      if [ "${CFG[congest]}" = "spine$k" ] && [ "$i" = 1 ]; then rate=${CFG[congest_gbps]}; fi
      echo "  - name: p$i"
      echo "    device: \"$(port_device "$i" "s${k}p$i")\""
      echo "    peer_mac: \"$(host_mac "$i")\""
      echo "    link: {rate_gbps: $rate, delay_ns: ${CFG[link_delay_ns]}}"
    done
    echo "routes:"
    echo "  - {prefix: 10.0.1.0/24, port: p0}"
    echo "  - {prefix: 10.0.2.0/24, port: p1}"
    if [ "${CFG[cc]}" != none ]; then
      # CE marking on the RC engine's class (DSCP 26: class 3), RED between kmin and kmax on
      # the depth a packet leaves behind.
      echo "ecn: {mark_at: dequeue, classes: [3], kmin_bytes: ${CFG[ecn_kmin_bytes]}," \
        "kmax_bytes: ${CFG[ecn_kmax_bytes]}, pmax: ${CFG[ecn_pmax]}}"
    fi
    if [ -n "${CFG[spine_extra]}" ]; then cat "${CFG[spine_extra]}"; fi
  } >"$DIR/spine$k.yaml"
}

port_device() {  # index iface: the DPDK vdev spec of a port on that veth end
  if [ "${CFG[pmd]}" = af_xdp ]; then
    echo "net_af_xdp$1,iface=$2,start_queue=0"
  else
    echo "net_af_packet$1,iface=$2,qdisc_bypass=1,framecnt=2048"
  fi
}

write_nic_config() {  # i
  local i=$1 k peer=$((1 - $1))
  {
    echo "# generated by scripts/topo.sh: nic $i, uplink uK cabled to spine K's port p$i"
    echo "nic:"
    echo "  name: nic$i"
    echo "  uplinks:"
    for ((k = 0; k < U; k++)); do
      echo "    - name: u$k"
      echo "      device: \"$(port_device "$k" "n${i}u$k")\""
      echo "      path_id: $((k + 1))"
      echo "      peer_mac: \"$(spine_port_mac "$k" "$i")\""
      echo "      link: {rate_gbps: ${CFG[link_gbps]}, delay_ns: ${CFG[link_delay_ns]}}"
    done
    if [ "${CFG[traffic]}" = hosts ]; then
      echo "  host: {name: host, device: \"$(port_device "$U" "h${i}nic")\"}"
    else
      local role=responder
      [ "$i" = 0 ] && role=requester
      echo "  rc_engine:"
      echo "    role: $role"
      echo "    qps: ${CFG[rc_qps]}"
      echo "    messages: ${CFG[rc_messages]}"
      echo "    message_bytes: ${CFG[rc_message_bytes]}"
      echo "    mtu: ${CFG[rc_mtu]}"
      echo "    local_ip: 10.0.$((i + 1)).1"
      echo "    peer_ip: 10.0.$((peer + 1)).1"
      echo "    local_mac: \"$(host_mac "$i")\""
      echo "    peer_mac: \"$(host_mac "$peer")\""
    fi
    if [ "${CFG[probe]}" = "nic$i" ]; then
      # The probe's address is in this NIC's own /24, which every spine routes back to it: a
      # probe leaves on uplink uK behind the load, crosses spine K and returns on the same cable.
      echo "  probe: {uplink: u${CFG[probe_uplink]}, rate_pps: ${CFG[probe_rate_pps]}," \
        "dst_ip: 10.0.$((i + 1)).254, change_threshold_us: ${CFG[probe_threshold_us]}}"
    fi
    echo "  spray: {mode: ${CFG[spray]}}"
    echo "  receive: ${CFG[receive]}"
    if [ "${CFG[cc]}" != none ]; then
      # DCQCN: CE-marked arrivals make CNPs (DSCP 48, at most one per QP per 4 us) to the
      # sending QP, whose rate is cut and paced.
      echo "  cc: {mode: ${CFG[cc]}, min_time_between_cnps_us: 4, cnp_dscp: 48}"
    fi
    if [ "${CFG[receive]}" = reorder-buffer ]; then
      # On shared cores a path's latency includes the time its processes wait for a CPU
      # (milliseconds when the machine is busy), not just the cables: the reorder engine must
      # hold a gap that long, still far below the RC retransmit timeout (67 ms).
      echo "  reorder: {hold_timeout_us: ${CFG[reorder_hold_us]}}"
    fi
  } >"$DIR/nic$i.yaml"
}

start_proc() {  # name core binary config
  local name=$1 core=$2 bin=$3 config=$4 eal extra=()
  if [ "${CFG[capture]}" = "$name" ]; then
    # dpdk-dumpcap is a secondary process and cannot attach to a --no-huge primary.
    eal=(-l "$core" -m 256 --huge-dir "$DIR/huge" --no-pci)
  else
    eal=(-l "$core" --no-huge -m 512 --no-pci)
  fi
  eal+=(--file-prefix "$P-$name" --log-level lib.eal:error)
  [ "$bin" = "$NIC_EMU" ] && extra=(--run-until-signal)
  rm -rf "/var/run/dpdk/$P-$name" "$DIR/$name.rc"
  touch "$DIR/$name.waiting"
  # A waiter per process records its exit status; ip netns exec execs the program, so $! is
  # the program's own pid.
  (
    trap - ERR INT TERM
    ip netns exec "$P-$name" "$bin" "${eal[@]}" -- --config "$config" --stats "$DIR/$name.json" \
      --idle-backoff-us "${CFG[idle_backoff_us]}" "${extra[@]+"${extra[@]}"}" \
      >"$DIR/$name.log" 2>&1 </dev/null &
    echo $! >"$DIR/$name.pid"
    rc=0
    wait $! || rc=$?
    echo "$rc" >"$DIR/$name.rc"
    rm -f "$DIR/$name.waiting"
  ) >/dev/null 2>&1 </dev/null &
  local i
  for ((i = 0; i < 50; i++)); do [ -s "$DIR/$name.pid" ] && break; sleep 0.02; done
}

wait_running() {  # name: until it logs "running" (ports up, telemetry registered), 60 s at most
  local name=$1 i
  for ((i = 0; i < 600; i++)); do
    grep -q "running" "$DIR/$name.log" 2>/dev/null && return 0
    if [ -f "$DIR/$name.rc" ]; then
      echo "$ME: $name exited with status $(cat "$DIR/$name.rc") while starting:" >&2
      tail -n 5 "$DIR/$name.log" >&2
      return 1
    fi
    sleep 0.1
  done
  echo "$ME: $name did not start within 60 s ($DIR/$name.log)" >&2
  return 1
}

do_up() {
  local i k name cores n
  for b in "$SWITCH_EMU" "$NIC_EMU"; do
    [ -x "$b" ] || die "$b is not built (ninja -C build)"
  done
  [ -z "${CFG[spine_extra]}" ] || [ -r "${CFG[spine_extra]}" ] ||
    die "spine_extra: '${CFG[spine_extra]}': cannot read"
  for ns in $(namespaces); do
    ! ns_exists "$ns" || die "netns $ns exists: the topology (prefix $P) is up; run $ME down first"
  done
  mkdir -p "$DIR" /run/spraynet
  echo "$DIR" >"$STATE_LINK"
  for name in $(procs); do rm -f "$DIR/$name".{pid,rc,json,log,waiting}; done
  rm -f "$DIR/held"
  trap 'echo "$ME: up failed; taking down what was made" >&2; do_down' ERR
  trap 'echo "$ME: interrupted; taking down what was made" >&2; do_down; exit 130' INT TERM

  # Namespaces: IPv6 off before any link exists, so nothing sends router solicitations or DAD.
  for ns in $(namespaces); do
    ip netns add "$ns"
    in_ns "$ns" sysctl -qw net.ipv6.conf.default.disable_ipv6=1 net.ipv6.conf.all.disable_ipv6=1
    in_ns "$ns" ip link set lo up
  done
  for i in 0 1; do
    veth "${HOSTNS[$i]}" eth0 "$(host_mac "$i")" "$P-nic$i" "h${i}nic" "$(nic_host_mac "$i")"
    in_ns "${HOSTNS[$i]}" ip addr add "10.0.$((i + 1)).1/24" dev eth0
    # switch_emu and nic_emu answer no ARP: a static neighbour for the gateway.
    in_ns "${HOSTNS[$i]}" ip neigh replace "10.0.$((i + 1)).254" lladdr "$(nic_host_mac "$i")" \
      dev eth0 nud permanent
    in_ns "${HOSTNS[$i]}" ip route add default via "10.0.$((i + 1)).254"
    for ((k = 0; k < U; k++)); do
      veth "$P-nic$i" "n${i}u$k" "$(nic_uplink_mac "$i" "$k")" "$P-spine$k" "s${k}p$i" \
        "$(spine_port_mac "$k" "$i")"
    done
  done

  if [ "${CFG[capture]}" != none ]; then
    echo "$HUGE_PAGES" >"$DIR/hugepages.added"
    echo $(($(cat /proc/sys/vm/nr_hugepages) + HUGE_PAGES)) >/proc/sys/vm/nr_hugepages
    n=$(awk '/HugePages_Free/ {print $2}' /proc/meminfo)
    if [ "$n" -lt "$HUGE_PAGES" ]; then
      echo "$ME: capture needs $HUGE_PAGES free 2 MiB hugepages, the kernel gave $n" >&2
      false
    fi
    mkdir -p "$DIR/huge"
    mount -t hugetlbfs -o pagesize=2M nodev "$DIR/huge"
    touch "$DIR/huge.mounted"
  fi

  for k in $(seq 0 $((U - 1))); do write_spine_config "$k"; done
  write_nic_config 0
  write_nic_config 1
  if [ "${CFG[cores]}" = auto ]; then
    cores=$(seq 0 $(($(nproc) - 1)) | paste -sd,)
  else
    cores=${CFG[cores]}
  fi
  IFS=, read -r -a CORES <<<"$cores"
  n=0
  local starting=() s
  for name in $(procs); do
    local bin=$SWITCH_EMU core=${CORES[$((n % ${#CORES[@]}))]}
    [[ $name == nic* ]] && bin=$NIC_EMU
    n=$((n + 1))
    if [ "${CFG[hold]}" = "$name" ]; then
      echo "$name $core $bin" >"$DIR/held"
      continue
    fi
    start_proc "$name" "$core" "$bin" "$DIR/$name.yaml"
    starting+=("$name")
    # The spines start together; the responder once they run, the requester last: the first
    # packets find every hop polling.
    if [[ $name == spine* ]] && [ "$name" != "spine$((U - 1))" ]; then continue; fi
    for s in "${starting[@]}"; do wait_running "$s"; done
    starting=()
  done
  trap - ERR INT TERM
  echo "$ME: up: prefix $P, 2 hosts, $U uplinks/spines, traffic ${CFG[traffic]}, spray ${CFG[spray]}, receive ${CFG[receive]}, cc ${CFG[cc]}, congest ${CFG[congest]}, idle back-off ${CFG[idle_backoff_us]} us, run dir $DIR"
}

do_start() {
  local name core bin
  [ -f "$DIR/held" ] || die "nothing held back (hold = none, or already started): prefix $P"
  read -r name core bin <"$DIR/held"
  trap 'echo "$ME: start failed; taking everything down" >&2; do_down' ERR
  start_proc "$name" "$core" "$bin" "$DIR/$name.yaml"
  wait_running "$name"
  trap - ERR
  rm -f "$DIR/held"
  echo "$ME: started $name"
}

if [ "$CMD" = check ]; then  # no root needed: the configuration was checked as it was read
  for k in $(printf '%s\n' "${!CFG[@]}" | sort); do echo "$k = ${CFG[$k]}"; done
  exit 0
fi
[ "$(id -u)" = 0 ] || die "needs root (network namespaces, veth, hugepages)"
case "$CMD" in
  up) do_up ;;
  down) do_down; echo "$ME: down: prefix $P" ;;
  status) do_status ;;
  start) do_start ;;
  ""|-h|--help) usage ;;
  *) die "unknown command '$CMD' (up, down, status, start or check)" ;;
esac
