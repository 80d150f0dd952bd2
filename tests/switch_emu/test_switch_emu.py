#!/usr/bin/python3
"""Integration tests of the switch_emu PROGRAM: pcap in / pcaps out through scripts/switch-pcap.sh,
malformed input, RoCEv2 through the switch, the command line and every example config, SIGTERM
with telemetry queried over DPDK's socket and dpdk-telemetry.py, and two hosts in network
namespaces talking through the switch on veth (net_af_packet).

Run by meson (tests/switch_emu/meson.build) with SWITCH_EMU and ROCE_PCAP pointing at the built
programs; uses Debian's /usr/bin/python3, where scapy lives. Each test has its own temporary
directory and DPDK --file-prefix; network namespaces are removed whatever happens. Nothing here
waits by sleeping: every wait is on a condition, with a bound."""
import glob
import json
import os
import random
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import unittest
from collections import Counter, defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from switch_paths import DPDK_RUN_DIR, PYTHON, ROCE_PCAP, ROOT, SWITCH_EMU  # noqa: E402
import pcaplib as P  # noqa: E402
from waiting import wait_for  # noqa: E402  (re-exported: other suites import it from here)

from scapy.all import IP, UDP, Ether, raw  # noqa: E402
from scapy.contrib.roce import BTH  # noqa: E402

SWITCH_PCAP = os.path.join(ROOT, "scripts", "switch-pcap.sh")
TOPOLOGY = os.path.join(ROOT, "scripts", "topology.sh")
TELEMETRY_PY = "/usr/bin/dpdk-telemetry.py"

# Bounds, not sleeps: how long a condition may take before the test gives up on it. Generous,
# because the machine is shared and slow; a healthy run meets each in a fraction.
PROGRAM_TIMEOUT_S = 120     # one switch_emu run on pcap input, start to exit
TELEMETRY_READY_S = 20      # EAL up, ports up, /spraynet/ commands registered
EXIT_AFTER_SIGTERM_S = 20

_prefix_counter = 0


def unique_prefix(tag):
    """A DPDK --file-prefix no other process uses: the pid, a counter and the test's tag."""
    global _prefix_counter
    _prefix_counter += 1
    return f"swemu-{os.getpid()}-{_prefix_counter}-{tag}"


def eal_args(prefix):
    return ["--no-huge", "-m", "1024", "--no-pci", "--file-prefix", prefix,
            "--log-level", "lib.eal:error"]


def remove_runtime_dir(prefix):
    shutil.rmtree(os.path.join(DPDK_RUN_DIR, prefix), ignore_errors=True)


def run_switch(prefix, config, *args, cwd=None, timeout=PROGRAM_TIMEOUT_S):
    try:
        return subprocess.run([SWITCH_EMU, *eal_args(prefix), "--", "--config", config, *args],
                              capture_output=True, text=True, cwd=cwd, timeout=timeout)
    finally:
        remove_runtime_dir(prefix)


class Telemetry:
    """DPDK's telemetry v2 protocol, spoken directly: SOCK_SEQPACKET, the server greets with
    JSON (max_output_len), each command string gets one JSON reply."""

    def __init__(self, prefix):
        self.path = os.path.join(DPDK_RUN_DIR, prefix, "dpdk_telemetry.v2")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock.settimeout(10)
        self.sock.connect(self.path)
        greeting = json.loads(self.sock.recv(1024).decode())
        self.max_len = greeting["max_output_len"]
        self.pid = greeting["pid"]

    def query(self, command):
        self.sock.send(command.encode())
        reply = json.loads(self.sock.recv(self.max_len).decode())
        return reply[command.split(",")[0]]

    def close(self):
        self.sock.close()


def telemetry_py(prefix, *commands):
    """The stock client, non-interactive: one JSON line per command on stdout."""
    r = subprocess.run([PYTHON, TELEMETRY_PY, "-f", prefix], input="\n".join(commands) + "\n",
                       capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        raise AssertionError(f"dpdk-telemetry.py failed ({r.returncode}): {r.stderr}")
    lines = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    if len(lines) != len(commands):
        raise AssertionError(f"dpdk-telemetry.py: {len(commands)} commands, output:\n{r.stdout}")
    return [line[c.split(",")[0]] for line, c in zip(lines, commands)]


class SwitchProcess:
    """switch_emu running in the background until stopped with a signal."""

    def __init__(self, prefix, config, tmp, *args, eal=None):
        self.prefix = prefix
        self.stdout_path = os.path.join(tmp, f"{prefix}.stdout")
        self.stderr_path = os.path.join(tmp, f"{prefix}.stderr")
        self.stats_path = os.path.join(tmp, f"{prefix}.stats.json")
        self._out = open(self.stdout_path, "w")
        self._err = open(self.stderr_path, "w")
        remove_runtime_dir(prefix)
        self.proc = subprocess.Popen(
            [SWITCH_EMU, *(eal or eal_args(prefix)), "--", "--config", config, "--stats",
             self.stats_path, *args], stdout=self._out, stderr=self._err)

    def telemetry(self):
        """Connects once the socket exists and /spraynet/ commands answer (bounded)."""
        path = os.path.join(DPDK_RUN_DIR, self.prefix, "dpdk_telemetry.v2")

        def ready():
            if self.proc.poll() is not None:
                raise AssertionError(f"switch_emu exited ({self.proc.returncode}) before its "
                                     f"telemetry was ready:\n{self.stderr()}")
            if not os.path.exists(path):
                return None
            try:
                t = Telemetry(self.prefix)
            except (OSError, ValueError):
                return None
            try:
                # Before main() registers its commands the server answers null.
                if t.query("/spraynet/ports"):
                    return t
            except (OSError, ValueError):
                pass
            t.close()
            return None
        return wait_for(ready, TELEMETRY_READY_S, f"{path} and /spraynet/ports")

    def stop(self, sig=signal.SIGTERM, bound_s=EXIT_AFTER_SIGTERM_S):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout=bound_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"switch_emu did not exit within {bound_s} s of signal {sig}")
        finally:
            self._out.close()
            self._err.close()
            remove_runtime_dir(self.prefix)
        return rc

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._out.close()
        self._err.close()
        remove_runtime_dir(self.prefix)

    def stdout(self):
        with open(self.stdout_path) as f:
            return f.read()

    def stderr(self):
        with open(self.stderr_path) as f:
            return f.read()

    def stats(self):
        with open(self.stats_path) as f:
            return json.load(f)


def switch_pcap(in_pcap, outdir, *args):
    env = dict(os.environ, SWITCH_EMU=SWITCH_EMU)
    proc = subprocess.Popen([SWITCH_PCAP, in_pcap, outdir, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=PROGRAM_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the script and the switch_emu it started
        proc.communicate()
        raise
    finally:
        # The script runs switch_emu with --file-prefix switch-pcap-$$ and leaves it behind.
        remove_runtime_dir(f"switch-pcap-{proc.pid}")
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def read_outputs(outdir, ports):
    return [P.read_pcap(os.path.join(outdir, f"port{k}.pcap")) for k in range(ports)]


def nonzero_drops(stats):
    return {k: v for k, v in stats["drops"].items() if v and k != "total"}


class TempDirTest(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="switch_emu_test_")
        self.tmp = self._tmp.name

    def tearDown(self):
        self._tmp.cleanup()


class Checkers(unittest.TestCase):
    """The independent checkers, checked first: if these fail nothing else means anything."""

    def test_hash_and_checksum_reference_vectors(self):
        P.self_test()

    def test_pcap_round_trip(self):
        with tempfile.TemporaryDirectory() as tmp:
            frames = [bytes([i]) * (14 + i) for i in range(1, 40)]
            for nsec in (False, True):
                path = os.path.join(tmp, "x.pcap")
                P.write_pcap(path, frames, nsec=nsec)
                self.assertEqual(P.read_pcap(path), frames)

    def test_routed_matches_scapy(self):
        f = P.udp_frame(P.ip_bytes("1.2.3.4"), P.ip_bytes("5.6.7.8"), 1, 2, b"x" * 30, ttl=9)
        out = Ether(P.routed(f))
        self.assertEqual(out[IP].ttl, 8)
        fresh = out[IP].copy()
        del fresh.chksum
        self.assertEqual(out[IP].chksum, IP(raw(fresh)).chksum)


# ---------------------------------------------------------------------------------------------
# 1. ECMP on pcap

def random_udp_flows(rng, n):
    """n distinct random UDP 5-tuples (never to port 4791: that is RoCEv2, which would need a
    BTH; the malformed test covers it)."""
    flows, seen = [], set()
    while len(flows) < n:
        t = (rng.getrandbits(32).to_bytes(4, "big"), rng.getrandbits(32).to_bytes(4, "big"),
             rng.randrange(1, 65536), rng.randrange(1, 65536))
        if t[3] == 4791 or t in seen:
            continue
        seen.add(t)
        flows.append(t)
    return flows


def flow_traffic(rng, flows, packets):
    """`packets` frames: every flow once, the rest repeats of random flows, shuffled. The payload
    is (sequence number, flow index) so that every output packet can be traced to its input."""
    order = list(range(len(flows))) + [rng.randrange(len(flows))
                                       for _ in range(packets - len(flows))]
    rng.shuffle(order)
    frames = []
    for seq, fi in enumerate(order):
        s, d, sp, dp = flows[fi]
        frames.append(P.udp_frame(s, d, sp, dp, struct.pack("!QI", seq, fi) + bytes(6),
                                  ttl=rng.choice((2, 64, 255)), ident=seq & 0xFFFF))
    return frames, order


class EcmpPcap(unittest.TestCase):
    """100,000 UDP packets with random 5-tuples (80,000 flows, 20,000 repeats) through
    switch-pcap.sh --ports 8 --mode ecmp --seed 0x5eed1 (crc32c)."""
    PACKETS = 100_000
    FLOWS = 80_000
    PORTS = 8
    SEED = 388817  # 0x5eed1

    @classmethod
    def setUpClass(cls):
        cls._tmp = tempfile.TemporaryDirectory(prefix="switch_emu_ecmp_")
        cls.addClassCleanup(cls._tmp.cleanup)  # also when setUpClass fails
        tmp = cls._tmp.name
        rng = random.Random(20240901)
        cls.flows = random_udp_flows(rng, cls.FLOWS)
        cls.frames, cls.order = flow_traffic(rng, cls.flows, cls.PACKETS)
        cls.in_pcap = os.path.join(tmp, "in.pcap")
        P.write_pcap(cls.in_pcap, cls.frames)
        cls.outdir = os.path.join(tmp, "out")
        cls.pcap_run = switch_pcap(cls.in_pcap, cls.outdir, "--ports", str(cls.PORTS),
                                   "--mode", "ecmp", "--seed", str(cls.SEED))
        if cls.pcap_run.returncode != 0:
            raise AssertionError(f"switch-pcap.sh exited {cls.pcap_run.returncode}:\n"
                                 f"{cls.pcap_run.stdout}\n{cls.pcap_run.stderr}")
        cls.outputs = read_outputs(cls.outdir, cls.PORTS)
        with open(os.path.join(cls.outdir, "stats.json")) as f:
            cls.stats = json.load(f)

    def seq_of(self, frame):
        return struct.unpack_from("!QI", frame, 14 + 20 + 8)

    def test_every_packet_accounted_for(self):
        counts = [len(o) for o in self.outputs]
        self.assertEqual(sum(counts), self.PACKETS, f"per port: {counts}")
        seqs = sorted(self.seq_of(f)[0] for o in self.outputs for f in o)
        self.assertEqual(seqs, list(range(self.PACKETS)), "each input packet exactly once")

    def test_spread_within_3_percent_of_even(self):
        even = self.PACKETS / self.PORTS
        for k, o in enumerate(self.outputs):
            self.assertLessEqual(abs(len(o) - even) / even, 0.03,
                                 f"port {k}: {len(o)} packets, even is {even:.0f}; all: "
                                 f"{[len(x) for x in self.outputs]}")

    def test_each_flow_on_one_port_in_order_and_on_the_hashed_port(self):
        port_of_flow = {}
        mismatches = []
        for k, o in enumerate(self.outputs):
            last_seq = -1
            for f in o:
                seq, fi = self.seq_of(f)
                self.assertGreater(seq, last_seq, f"port {k}: packets reordered")
                last_seq = seq
                prev = port_of_flow.setdefault(fi, k)
                self.assertEqual(prev, k, f"flow {fi} on ports {prev} and {k}")
                s, d, sp, dp, proto = P.five_tuple(f)
                self.assertEqual((s, d, sp, dp), self.flows[fi])
        self.assertEqual(len(port_of_flow), self.FLOWS)
        repeated = sum(1 for c in Counter(self.order).values() if c > 1)
        self.assertGreater(repeated, 10_000, "the traffic does have multi-packet flows")
        for fi, k in port_of_flow.items():
            s, d, sp, dp = self.flows[fi]
            h = P.flow_hash(P.flow_key(s, d, sp, dp, P.PROTO_UDP), self.SEED, "crc32c")
            if h % self.PORTS != k:
                mismatches.append((fi, k, h % self.PORTS, hex(h)))
        self.assertEqual(mismatches[:10], [], f"{len(mismatches)} flows not on CRC32C % 8")

    def test_ttl_decremented_and_checksum_valid_in_every_packet(self):
        for k, o in enumerate(self.outputs):
            for f in o:
                seq, _ = self.seq_of(f)
                expected = P.routed(self.frames[seq])
                if f != expected:
                    self.fail(f"port {k} packet seq {seq}:\n got {f.hex()}\nwant {expected.hex()}")
                self.assertTrue(P.ipv4_header_ok(f))

    def test_scapy_agrees_on_a_sample(self):
        rng = random.Random(5)
        sample = [f for o in self.outputs for f in rng.sample(o, 100)]
        for f in sample:
            p = Ether(f)
            seq, _ = self.seq_of(f)
            self.assertEqual(p[IP].ttl, Ether(self.frames[seq])[IP].ttl - 1)
            fresh = p[IP].copy()
            del fresh.chksum
            del fresh[UDP].chksum
            rebuilt = IP(raw(fresh))
            self.assertEqual(p[IP].chksum, rebuilt.chksum, "IPv4 header checksum")
            self.assertEqual(p[UDP].chksum, rebuilt[UDP].chksum, "UDP checksum still valid")

    def test_stats_json_totals(self):
        st = self.stats
        self.assertEqual(st["mempool_in_use_at_exit"], 0)
        self.assertEqual(st["tx_dropped"], 0)
        self.assertEqual(st["drops"]["total"], 0, nonzero_drops(st))
        ports = {p["name"]: p for p in st["ports"]}
        self.assertEqual(ports["in"]["rx_packets"], self.PACKETS)
        self.assertEqual(ports["in"]["rx_bytes"], sum(len(f) for f in self.frames))
        counts = [len(o) for o in self.outputs]
        for k in range(self.PORTS):
            p = ports[f"port{k}"]
            self.assertEqual(p["tx_packets"], counts[k], f"port{k}")
            self.assertEqual(p["forwarded_packets"], counts[k], f"port{k}")
            self.assertEqual(p["tx_bytes"], sum(len(f) for f in self.outputs[k]), f"port{k}")
        (group,) = st["groups"]
        self.assertEqual(group["mode"], "ecmp")
        self.assertEqual(group["members"], [f"port{k}" for k in range(self.PORTS)])
        self.assertEqual(group["member_packets"], counts)
        # The table the program prints agrees with the files.
        for k in range(self.PORTS):
            self.assertRegex(self.pcap_run.stdout, rf"(?m)^port{k}\s+0\s+{counts[k]}\s+0\s+0$")
        self.assertIn("mempool: 0 mbufs in use at exit", self.pcap_run.stdout)


class EcmpCrc32Pcap(TempDirTest):
    def test_crc32_hash_over_five_ports(self):
        """--hash crc32 (zlib's crc32(seed, key)), five ports so that % 5 is not a mask."""
        rng = random.Random(77)
        flows = random_udp_flows(rng, 4000)
        frames, order = flow_traffic(rng, flows, 6000)
        in_pcap = os.path.join(self.tmp, "in.pcap")
        P.write_pcap(in_pcap, frames)
        outdir = os.path.join(self.tmp, "out")
        seed = 2718281828
        r = switch_pcap(in_pcap, outdir, "--ports", "5", "--hash", "crc32", "--seed", str(seed))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        outputs = read_outputs(outdir, 5)
        self.assertEqual(sum(len(o) for o in outputs), len(frames))
        wrong = []
        for k, o in enumerate(outputs):
            for f in o:
                s, d, sp, dp, proto = P.five_tuple(f)
                h = P.flow_hash(P.flow_key(s, d, sp, dp, proto), seed, "crc32")
                if h % 5 != k:
                    wrong.append((k, h % 5))
                seq = struct.unpack_from("!Q", f, 42)[0]
                self.assertEqual(f, P.routed(frames[seq]))
        self.assertEqual(len(wrong), 0, f"{len(wrong)} packets not on crc32 % 5: {wrong[:5]}")
        with open(os.path.join(outdir, "stats.json")) as f:
            st = json.load(f)
        self.assertEqual(st["groups"][0]["member_packets"], [len(o) for o in outputs])
        self.assertEqual(st["drops"]["total"], 0)


# ---------------------------------------------------------------------------------------------
# 2. Malformed input

class LetflowPcap(TempDirTest):
    """LetFlow on real net_pcap ports (issue 42): 4,000 UDP flows in 20,000 packets through
    switch-pcap.sh --mode letflow with a flowlet gap of 10 s, so that no flowlet ends: each
    flow's first packet draws a port at random and every later packet follows it. The flowlet
    table (2^16 entries) is shared by the flows whose hashes meet in an entry, as in hardware:
    the test computes each flow's entry itself (CRC32C & 0xFFFF) and checks that every flow
    sharing an entry leaves where the entry's first flow went, and that the switch counted one
    flowlet per entry used and the rest as collisions."""
    FLOWS = 4000
    PACKETS = 20_000
    PORTS = 8
    ENTRIES = 1 << 16

    def test_flows_stay_on_one_random_port_and_the_flowlets_are_counted(self):
        rng = random.Random(42)
        flows = random_udp_flows(rng, self.FLOWS)
        frames, order = flow_traffic(rng, flows, self.PACKETS)
        in_pcap = os.path.join(self.tmp, "in.pcap")
        P.write_pcap(in_pcap, frames)
        outdir = os.path.join(self.tmp, "out")
        r = switch_pcap(in_pcap, outdir, "--ports", str(self.PORTS), "--mode", "letflow",
                        "--flowlet-gap-ns", "10000000000", "--flowlet-entries",
                        str(self.ENTRIES))
        self.assertEqual(r.returncode, 0, r.stderr)
        outputs = read_outputs(outdir, self.PORTS)
        self.assertEqual(sum(len(o) for o in outputs), self.PACKETS)
        port_of_flow = {}
        for k, o in enumerate(outputs):
            last = -1
            for f in o:
                seq, fi = struct.unpack_from("!QI", f, 14 + 20 + 8)
                self.assertGreater(seq, last, f"port {k}: packets reordered")
                last = seq
                self.assertEqual(port_of_flow.setdefault(fi, k), k, f"flow {fi} moved")
        self.assertEqual(len(port_of_flow), self.FLOWS)
        # The entries, as the switch indexes them; the first packet of each entry chose.
        entry_of = {}
        for fi, (s, d, sp, dp) in enumerate(flows):
            h = P.flow_hash(P.flow_key(s, d, sp, dp, P.PROTO_UDP), 0, "crc32c")
            entry_of[fi] = h & (self.ENTRIES - 1)
        first_port = {}
        for fi in order:
            first_port.setdefault(entry_of[fi], port_of_flow[fi])
        for fi, k in port_of_flow.items():
            self.assertEqual(k, first_port[entry_of[fi]], f"flow {fi} left its entry's port")
        # The draws are uniform over the ports: chi-square over the entries' ports, 7 degrees
        # of freedom, below the 99% quantile 18.475.
        counts = Counter(first_port.values())
        even = len(first_port) / self.PORTS
        x2 = sum((counts.get(k, 0) - even) ** 2 / even for k in range(self.PORTS))
        self.assertLess(x2, 18.475, counts)
        with open(os.path.join(outdir, "stats.json")) as f:
            st = json.load(f)
        self.assertEqual(st["mempool_in_use_at_exit"], 0)
        (group,) = st["groups"]
        self.assertEqual(group["mode"], "letflow")
        fl = group["flowlets"]
        self.assertEqual(fl["entries"], self.ENTRIES)
        self.assertEqual(fl["gap_ns"], 10_000_000_000)
        self.assertEqual(fl["started"], len(first_port))
        self.assertEqual(fl["expired"], 0)
        self.assertEqual(group["member_packets"], [len(o) for o in outputs])


class CongaPcap(TempDirTest):
    """CONGA on real net_pcap ports (issue 42): the example chain configs/conga-leaf0-pcap.yaml
    -> conga-spine-pcap.yaml -> conga-leaf1-pcap.yaml, three switch_emu runs, pcap to pcap. Between
    the leaves every frame carries the overlay (VXLAN, flags I|C, outer 10.0.0.255 -> 10.0.1.255,
    LBTag the uplink it left by, source leaf 0), read here with scapy and with tshark and the
    project's dissector; at leaf 1's host the overlay is gone and the RoCEv2 packets are leaf 0's
    host's with TTL two less and a valid ICRC. Every mbuf back in all three."""
    QPS = 8
    MESSAGES = 4

    def run_config(self, name, cwd):
        stats = os.path.join(cwd, f"{name}.json")
        r = run_switch(unique_prefix("conga"), os.path.join(ROOT, "configs", f"conga-{name}-pcap.yaml"),
                       "--idle-exit-ms", "300", "--stats", stats, cwd=cwd)
        self.assertEqual(r.returncode, 0, f"{name}:\n{r.stdout}\n{r.stderr}")
        self.assertIn("mempool: 0 mbufs in use at exit", r.stdout, name)
        with open(stats) as f:
            st = json.load(f)
        self.assertEqual(st["mempool_in_use_at_exit"], 0)
        self.assertEqual(st["drops"]["total"], 0, st["drops"])
        return st

    @staticmethod
    def overlay_of(frame):
        """(outer IPv4 src, dst, UDP dst port, VXLAN word) of an overlay frame, and its inner."""
        self_ip = frame[14:34]
        udp = frame[34:42]
        vx = frame[42:50]
        return (socket.inet_ntoa(self_ip[12:16]), socket.inet_ntoa(self_ip[16:20]),
                struct.unpack("!H", udp[2:4])[0], vx), frame[50:]

    def test_overlay_between_the_leaves_gone_at_the_host_icrc_valid(self):
        cwd = self.tmp
        os.makedirs(os.path.join(cwd, "out", "conga"))
        host0 = os.path.join(cwd, "out/conga/host0.pcap")
        g = subprocess.run([ROCE_PCAP, "--out", host0, "--qps", str(self.QPS), "--messages",
                            str(self.MESSAGES), "--msg-bytes", "3000", "--mtu", "1024",
                            "--dst-ip", "10.0.1.2", "--tos", str(26 << 2 | 2), "--seed", "5"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(g.returncode, 0, g.stderr)
        sent = P.read_pcap(host0)
        self.assertEqual(len(sent), self.QPS * self.MESSAGES * 3)

        leaf0 = self.run_config("leaf0", cwd)
        uplinks = [P.read_pcap(os.path.join(cwd, f"out/conga/leaf0-up{k}.pcap")) for k in range(4)]
        self.assertEqual(sum(len(u) for u in uplinks), len(sent))
        routed = {bytes(P.routed(f)) for f in sent}
        lbtag_of_qp = {}
        for k, frames in enumerate(uplinks):
            for f in frames:
                (src, dst, dport, vx), inner = self.overlay_of(f)
                self.assertEqual((src, dst, dport), ("10.0.0.255", "10.0.1.255", 4789))
                self.assertEqual(vx[0], 0x48, "VXLAN flags I|C")
                self.assertEqual(vx[1] >> 4, k, "LBTag: the uplink the frame left by")
                self.assertEqual(vx[7], 0, "source leaf 0")
                self.assertEqual(vx[4:7], b"\x00\x00\x01", "VNI 1")
                outer = Ether(f)
                self.assertEqual(outer[IP].tos, 26 << 2 | 2, "the inner DSCP and ECN, copied")
                fresh = outer[IP].copy()
                del fresh.chksum
                self.assertEqual(outer[IP].chksum, IP(raw(fresh)).chksum)
                self.assertEqual(len(f), len(inner) + 50)
                self.assertIn(inner, routed, "the inner frame: the host's, routed once")
                p = Ether(inner)
                self.assertEqual(p[BTH].compute_icrc(None), inner[-4:], "inner ICRC")
                self.assertEqual(lbtag_of_qp.setdefault(p[BTH].dqpn, k), k, "a QP on one uplink")
        self.assertEqual(len(lbtag_of_qp), self.QPS)
        c = leaf0["conga"]
        self.assertEqual((c["role"], c["leaf"]), ("leaf", 0))
        self.assertEqual(c["encapsulated"], len(sent))
        self.assertEqual(c["decapsulated"], 0)

        # The project's dissector reads the same fields out of the uplink captures.
        if shutil.which("tshark"):
            for k in range(4):
                if not uplinks[k]:
                    continue
                t = subprocess.run(
                    ["tshark", "-r", os.path.join(cwd, f"out/conga/leaf0-up{k}.pcap"), "-X",
                     "lua_script:" + os.path.join(ROOT, "tools/wireshark/spraynet.lua"), "-T",
                     "fields", "-e", "spraynet.conga.lbtag", "-e", "spraynet.conga.src_leaf"],
                    capture_output=True, text=True, timeout=60)
                self.assertEqual(t.returncode, 0, t.stderr)
                self.assertEqual(t.stdout.split("\n")[:-1], [f"{k}\t0"] * len(uplinks[k]))

        spine = self.run_config("spine", cwd)
        to1 = P.read_pcap(os.path.join(cwd, "out/conga/spine-to-leaf1.pcap"))
        self.assertEqual(len(to1), len(sent))
        before = {}
        for frames in uplinks:
            for f in frames:
                before[bytes(f[50:])] = f[43]
        for f in to1:
            (src, dst, dport, vx), inner = self.overlay_of(f)
            self.assertEqual((src, dst, dport, vx[0]), ("10.0.0.255", "10.0.1.255", 4789, 0x48))
            was = before[bytes(inner)]  # the inner frame is untouched across the spine
            self.assertEqual(vx[1] >> 4, was >> 4, "LBTag kept")
            self.assertGreaterEqual((vx[1] >> 1) & 7, (was >> 1) & 7, "CE only rises")
            self.assertEqual(Ether(f)[IP].ttl, 63, "the spine routes the outer header")
        c = spine["conga"]
        self.assertEqual(c["role"], "spine")
        self.assertEqual(c["transit"], len(sent))
        self.assertEqual(c["encapsulated"], 0)

        leaf1 = self.run_config("leaf1", cwd)
        got = P.read_pcap(os.path.join(cwd, "out/conga/host1.pcap"))
        self.assertEqual(len(got), len(sent))
        twice = sorted(bytes(P.routed(P.routed(f))) for f in sent)
        self.assertEqual(sorted(bytes(f) for f in got), twice,
                         "the host's packets, overlay gone, routed at both leaves")
        for f in got:
            p = Ether(f)
            self.assertNotIn(4789, (p[UDP].sport, p[UDP].dport))
            self.assertEqual(p[IP].ttl, 62)
            self.assertEqual(p[BTH].compute_icrc(None), f[-4:], "ICRC at the host")
        c = leaf1["conga"]
        self.assertEqual((c["role"], c["leaf"]), ("leaf", 1))
        self.assertEqual(c["decapsulated"], len(sent))
        self.assertEqual(c["from_leaf_updates"], len(sent))
        self.assertEqual(c["bad_leaf"], 0)
        self.assertGreaterEqual(c["table_entries"], 0)


class ConweavePcap(TempDirTest):
    """ConWeave on real net_pcap ports (issue 43): configs/conweave-leaf0-pcap.yaml, whose
    deadline is nothing (every epoch's second packet is its TAIL, the rest of the epoch rerouted),
    then configs/conweave-leaf1-pcap.yaml fed leaf 0's uplink captures with each epoch's new-path
    packets put first. Checked: every frame between the leaves carries the overlay (flags I|W,
    leaf 0, the uplink it left by, send times, the TAIL's time on the new path's packets), the
    inner frame is the host's routed once with a valid ICRC; leaf 1 holds the early packets and
    lets them out behind their TAIL, so its host sees every QP in PSN order without the overlay;
    it answers each INIT and TAIL towards leaf 0; every mbuf back in both runs. What leaf 0 does
    depends on how fast the capture is replayed (a slow replay expires epochs); what the test
    checks holds either way."""
    QPS = 8
    MESSAGES = 4

    def run_config(self, name, cwd):
        stats = os.path.join(cwd, f"{name}.json")
        r = run_switch(unique_prefix("weave"),
                       os.path.join(ROOT, "configs", f"conweave-{name}-pcap.yaml"),
                       "--idle-exit-ms", "300", "--stats", stats, cwd=cwd)
        self.assertEqual(r.returncode, 0, f"{name}:\n{r.stdout}\n{r.stderr}")
        self.assertIn("mempool: 0 mbufs in use at exit", r.stdout, name)
        with open(stats) as f:
            st = json.load(f)
        self.assertEqual(st["drops"]["total"], 0, st["drops"])
        return st

    @staticmethod
    def fields(frame):
        v = frame[42:58]
        return {"flags": v[0], "message": v[1] >> 6, "flag": (v[1] >> 4) & 3,
                "phase": (v[1] >> 3) & 1, "epoch": v[2], "uplink": v[3] & 0xF,
                "vni": int.from_bytes(v[4:7], "big"), "leaf": v[7],
                "ts_tx": int.from_bytes(v[8:12], "big"), "ts_tail": int.from_bytes(v[12:16], "big"),
                "dst": socket.inet_ntoa(frame[30:34]), "dport": struct.unpack("!H", frame[36:38])[0]}

    def test_overlay_holds_and_order_at_the_host(self):
        cwd = self.tmp
        os.makedirs(os.path.join(cwd, "out", "conweave"))
        g = subprocess.run([ROCE_PCAP, "--out", os.path.join(cwd, "out/conweave/host0.pcap"),
                            "--qps", str(self.QPS), "--messages", str(self.MESSAGES),
                            "--msg-bytes", "3000", "--mtu", "1024", "--dst-ip", "10.0.1.2",
                            "--tos", str(26 << 2 | 2), "--seed", "7"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(g.returncode, 0, g.stderr)
        sent = P.read_pcap(os.path.join(cwd, "out/conweave/host0.pcap"))
        routed = {bytes(P.routed(f)) for f in sent}

        leaf0 = self.run_config("leaf0", cwd)
        frames = []  # (qp, psn, fields, frame)
        for k in range(2):
            for f in P.read_pcap(os.path.join(cwd, f"out/conweave/leaf0-up{k}.pcap")):
                w = self.fields(f)
                self.assertEqual((w["flags"], w["message"], w["leaf"], w["vni"], w["dst"],
                                  w["dport"]), (0x28, 0, 0, 1, "10.0.1.255", 4789))
                self.assertEqual(w["uplink"], k, "the uplink field names the port it left by")
                inner = f[58:]
                self.assertIn(inner, routed)
                p = Ether(inner)
                self.assertEqual(p[BTH].compute_icrc(None), inner[-4:], "inner ICRC")
                frames.append((p[BTH].dqpn, p[BTH].psn, w, f))
        self.assertEqual(len(frames), len(sent))
        by_qp = defaultdict(list)
        for qp, psn, w, f in frames:
            by_qp[qp].append((psn, w, f))
        tails = inits = 0
        for qp, fs in by_qp.items():
            fs.sort(key=lambda x: x[0])
            self.assertEqual(fs[0][1]["flag"], 2, f"QP {qp:#x}: its first packet is an INIT")
            self.assertEqual(fs[0][1]["epoch"], 1)
            epoch_tail = {}
            for psn, w, f in fs:
                inits += w["flag"] == 2
                if w["flag"] == 3:
                    tails += 1
                    self.assertEqual(w["phase"], 0, "the TAIL is the old path's last")
                    epoch_tail[w["epoch"]] = (w["ts_tx"], w["uplink"])
                if w["phase"] == 1:
                    self.assertIn(w["epoch"], epoch_tail, "phase 1 only after its epoch's TAIL")
                    self.assertEqual(w["ts_tail"], epoch_tail[w["epoch"]][0])
                elif w["flag"] != 3 and w["epoch"] in epoch_tail:
                    self.fail(f"QP {qp:#x}: phase 0 after the TAIL of epoch {w['epoch']}")
        src = leaf0["conweave"]["source"]
        self.assertEqual(src["epochs"], inits)
        self.assertEqual(src["rtt_timeouts"], tails)
        self.assertGreater(tails, 0, "a zero deadline makes TAILs")

        # Leaf 1 gets each QP's epochs in order, each epoch's phase-1 packets first.
        merged = []
        for qp, fs in sorted(by_qp.items()):
            for epoch in dict.fromkeys(w["epoch"] for _, w, _ in fs):
                mine = [x for x in fs if x[1]["epoch"] == epoch]
                merged += [f for _, w, f in mine if w["phase"] == 1]
                merged += [f for _, w, f in mine if w["phase"] == 0]
        P.write_pcap(os.path.join(cwd, "out/conweave/to-leaf1.pcap"), merged)
        early = sum(1 for _, _, w, _ in frames if w["phase"] == 1)
        self.assertGreater(early, 0, "rerouted packets to hold")
        leaf1 = self.run_config("leaf1", cwd)
        got = P.read_pcap(os.path.join(cwd, "out/conweave/host1.pcap"))
        self.assertEqual(len(got), len(sent))
        twice = {bytes(P.routed(P.routed(f))) for f in sent}
        last = {}
        for f in got:
            self.assertIn(f, twice, "the host's packet, overlay gone, routed at both leaves")
            p = Ether(f)
            qp, psn = p[BTH].dqpn, p[BTH].psn
            if qp in last:
                self.assertEqual(psn, (last[qp] + 1) % (1 << 24), f"QP {qp:#x} in PSN order")
            last[qp] = psn
            self.assertEqual(p[BTH].compute_icrc(None), f[-4:])
        dst = leaf1["conweave"]["destination"]
        self.assertEqual(dst["held"], early)
        self.assertEqual(dst["held_now"], 0)
        self.assertEqual(dst["released_by_timeout"], 0)
        self.assertEqual(dst["rtt_replies"], inits)
        self.assertEqual(dst["clears"], tails)
        # Its answers left for leaf 0: an RTT reply per INIT, a CLEAR per TAIL, 60 bytes each.
        back = P.read_pcap(os.path.join(cwd, "out/conweave/leaf1-up0.pcap"))
        kinds = Counter(self.fields(f)["message"] for f in back)
        self.assertEqual(kinds, Counter({1: inits, 2: tails}))
        for f in back:
            self.assertEqual(len(f), 60)
            self.assertEqual(self.fields(f)["dst"], "10.0.0.255")
            self.assertEqual(Ether(f)[IP].tos, 48 << 2, "the control class, DSCP 48")
        self.assertEqual(leaf1["counters"]["conweave_control_sent"], inits + tails)


class MalformedInput(TempDirTest):
    def build(self):
        """(frames, good frames, expected drop counts by stats.json name)."""
        rng = random.Random(99)
        A, B = P.ip_bytes("10.1.0.1"), P.ip_bytes("10.2.0.2")
        ident = iter(range(1, 1 << 16))
        good, bad = [], defaultdict(list)

        def udp(payload=b"good packet payload", ttl=64, sport=1000, dport=2000, **ip_kw):
            seg = P.udp_segment(A, B, sport, dport, payload)
            return P.ipv4_header(A, B, P.PROTO_UDP, len(seg), ttl=ttl, ident=next(ident),
                                 **ip_kw) + seg

        def frame(l3, ethertype=P.ETH_IPV4, pad_to=60):
            return P.ether(P.MAC_DST, P.MAC_SRC, ethertype, l3, pad_to=pad_to)

        # Good: plain UDP, short UDP in a padded 60-byte frame, IP options, TCP, ICMP, a first
        # fragment (no L4 header is read), TTL 2 (leaves with TTL 1).
        for i in range(20):
            good.append(frame(udp(payload=bytes([i]) * (20 + 7 * i), sport=1000 + i)))
        for i in range(5):
            good.append(frame(udp(payload=bytes([i, 0xAA]), sport=2000 + i)))
            self.assertEqual(len(good[-1]), 60)
        for i in range(3):
            good.append(frame(udp(options=b"\x01\x01\x01\x00", sport=3000 + i)))
        for i in range(3):
            tcp = struct.pack("!HHIIBBHHH", 4000 + i, 80, i, 0, 5 << 4, 0x10, 1024, 0, 0)
            good.append(frame(P.ipv4_header(A, B, P.PROTO_TCP, len(tcp), ident=next(ident)) + tcp))
        for i in range(3):
            icmp = bytearray(struct.pack("!BBHHH", 8, 0, 0, 7, i) + b"ping")
            icmp[2:4] = struct.pack("!H", P.inet_checksum(bytes(icmp)))
            good.append(frame(P.ipv4_header(A, B, P.PROTO_ICMP, len(icmp), ident=next(ident))
                              + bytes(icmp)))
        for i in range(2):
            good.append(frame(P.ipv4_header(A, B, P.PROTO_UDP, 48, ident=next(ident),
                                            flags_frag=0x2000) + bytes([i]) * 48))
        for i in range(2):
            good.append(frame(udp(ttl=2, sport=5000 + i)))

        # Bad, one list per drop counter.
        for i in range(3):  # shorter than an Ethernet header
            bad["parse_truncated_ethernet"].append(bytes([0x02] * (6 + 3 * i)))
        for i in range(4):  # Ethernet header plus part of an IPv4 header, unpadded
            cut = 14 + 4 * i + 4
            bad["parse_truncated_ipv4"].append(frame(udp(sport=6000 + i), pad_to=0)[:cut])
        for i in range(5):  # a good 200-byte datagram cut short in flight
            bad["parse_bad_total_length"].append(frame(udp(payload=bytes(172))[:90 + i], pad_to=0))
        for i in range(6):
            bad["parse_bad_ip_checksum"].append(frame(udp(checksum=0x1234 + i, sport=7000 + i)))
        for ihl in (0, 1, 2, 3, 4):  # below the minimum
            bad["parse_bad_ihl"].append(frame(udp(ihl=ihl, sport=8000 + ihl)))
        for ihl in (14, 15):  # options claimed beyond the (unpadded) frame
            bad["parse_bad_ihl"].append(frame(udp(ihl=ihl, payload=b"x" * 8), pad_to=0))
        for v in (6, 0):
            bad["parse_bad_ip_version"].append(frame(udp(version=v, sport=9000 + v)))
        for i, delta in enumerate((+1, +4, -1, -4, +100, -8, +2, -2)):  # UDP length != IP's
            l3 = bytearray(udp(sport=10000 + i))
            struct.pack_into("!H", l3, 24, struct.unpack_from("!H", l3, 24)[0] + delta)
            bad["parse_udp_length_mismatch"].append(frame(bytes(l3)))
        for i in range(10):  # protocol UDP but fewer than 8 bytes of it
            bad["parse_truncated_udp"].append(
                frame(P.ipv4_header(A, B, P.PROTO_UDP, i % 8, ident=next(ident)) + bytes(i % 8)))
        for i in range(4):
            arp = struct.pack("!HHBBH6s4s6s4s", 1, 0x0800, 6, 4, 1, P.MAC_SRC, A, bytes(6), B)
            bad["parse_not_ipv4"].append(frame(arp, P.ETH_ARP))
        for i in range(5):
            ip6 = struct.pack("!IHBB16s16s", 6 << 28, 8, 17, 64, bytes(15) + b"\1",
                              bytes(15) + bytes([2 + i])) + struct.pack("!HHHH", 1, 2, 8, 0)
            bad["parse_not_ipv4"].append(frame(ip6, P.ETH_IPV6))
        for i in range(10):
            bad["ttl_expired"].append(frame(udp(ttl=1, sport=11000 + i)))
        bad["ttl_expired"].append(frame(udp(ttl=0, sport=11999)))
        # UDP to the RoCEv2 port without room for a BTH: malformed RoCE.
        bad["parse_truncated_bth"].append(frame(udp(dport=4791, payload=b"\x0a\0\xff\xff")))
        # A 6000-byte frame does not fit one mbuf: net_pcap chains it. Its headers are all in
        # the first segment, so it is forwarded like any other (jumbo frames cross RoCE
        # fabrics), whole.
        good.append(frame(udp(payload=bytes(6000 - 42), sport=12000)))

        tagged = [(f, True) for f in good] + [(f, False) for fs in bad.values() for f in fs]
        rng.shuffle(tagged)
        return [f for f, _ in tagged], good, {k: len(v) for k, v in bad.items()}

    def test_only_good_packets_come_out_unmodified_but_for_ttl(self):
        frames, good, expected_drops = self.build()
        in_pcap = os.path.join(self.tmp, "in.pcap")
        P.write_pcap(in_pcap, frames)
        outdir = os.path.join(self.tmp, "out")
        r = switch_pcap(in_pcap, outdir, "--ports", "2")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        outputs = [f for o in read_outputs(outdir, 2) for f in o]
        self.assertEqual(sorted(outputs), sorted(P.routed(f) for f in good),
                         "exactly the good packets, with TTL - 1 and the checksum updated")
        for f in outputs:
            p = Ether(f)
            fresh = p[IP].copy()
            del fresh.chksum
            self.assertEqual(p[IP].chksum, IP(raw(fresh)).chksum, f"{p.summary()}")
        with open(os.path.join(outdir, "stats.json")) as f:
            st = json.load(f)
        self.assertEqual(nonzero_drops(st), expected_drops)
        self.assertEqual(st["drops"]["total"], len(frames) - len(good))
        self.assertEqual(st["ports"][0]["rx_packets"], len(frames))
        self.assertEqual(sum(p["tx_packets"] for p in st["ports"][1:]), len(good))
        self.assertEqual(st["mempool_in_use_at_exit"], 0)
        self.assertIn("mempool: 0 mbufs in use at exit", r.stdout)
        self.assertIn(f"pipeline drops: {len(frames) - len(good)}", r.stdout)


# ---------------------------------------------------------------------------------------------
# 3. RoCE through the switch

class RoceThroughSwitch(TempDirTest):
    def test_qps_stay_on_one_port_in_psn_order_with_valid_icrc(self):
        in_pcap = os.path.join(self.tmp, "roce.pcap")
        r = subprocess.run([ROCE_PCAP, "--out", in_pcap, "--qps", "16", "--messages", "6",
                            "--msg-bytes", "3000", "--mtu", "1024", "--psn-start",
                            str(0xFFFFF9), "--seed", "11", "--tos", str(26 << 2)],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        frames = P.read_pcap(in_pcap)
        self.assertEqual(len(frames), 16 * 6 * 3)
        outdir = os.path.join(self.tmp, "out")
        seed = 4242
        r = switch_pcap(in_pcap, outdir, "--ports", "4", "--seed", str(seed), "--dest-qp")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        outputs = read_outputs(outdir, 4)
        self.assertEqual(sum(len(o) for o in outputs), len(frames))

        def qp_psn(frame):
            b = Ether(frame)[BTH]
            return b.dqpn, b.psn

        expected_by_qp = defaultdict(list)  # in input order
        for f in frames:
            expected_by_qp[qp_psn(f)[0]].append(P.routed(f))
        self.assertEqual(len(expected_by_qp), 16)
        port_of_qp = {}
        got_by_qp = defaultdict(list)
        for k, o in enumerate(outputs):
            for f in o:
                p = Ether(f)
                qp, psn = p[BTH].dqpn, p[BTH].psn
                self.assertEqual(port_of_qp.setdefault(qp, k), k, f"QP {qp:#x} on two ports")
                got_by_qp[qp].append(f)
                self.assertEqual(p[BTH].compute_icrc(None), f[-4:],
                                 f"ICRC after the switch, QP {qp:#x} PSN {psn:#x}")
                fresh = p[IP].copy()
                del fresh.chksum
                self.assertEqual(p[IP].chksum, IP(raw(fresh)).chksum)
                self.assertEqual(p[IP].ttl, 63)
                self.assertEqual(p[IP].tos, 26 << 2, "DSCP untouched")
                self.assertEqual(p[UDP].chksum, 0, "UDP checksum stays 0")
        for qp, fs in got_by_qp.items():
            psns = [Ether(f)[BTH].psn for f in fs]
            for a, b in zip(psns, psns[1:]):
                self.assertEqual(b, (a + 1) % (1 << 24), f"QP {qp:#x}: PSN order {psns}")
            self.assertEqual(fs, expected_by_qp[qp], f"QP {qp:#x}: the same packets, in order")
            s, d, sp, dp, proto = P.five_tuple(fs[0])
            h = P.flow_hash(P.flow_key(s, d, sp, dp, proto, dest_qp=qp), seed, "crc32c")
            self.assertEqual(port_of_qp[qp], h % 4, f"QP {qp:#x}: CRC32C with DestQP % 4")
        self.assertGreater(len(set(port_of_qp.values())), 1, "16 QPs use more than one port")
        with open(os.path.join(outdir, "stats.json")) as f:
            st = json.load(f)
        self.assertEqual(st["drops"]["total"], 0, nonzero_drops(st))
        self.assertEqual(st["mempool_in_use_at_exit"], 0)
        # DSCP 26 -> class 3 (dscp >> 3): every packet left on traffic class 3.
        for k in range(4):
            classes = st["ports"][k + 1]["classes"]
            self.assertEqual(classes[3]["transmitted_packets"], len(outputs[k]))


# ---------------------------------------------------------------------------------------------
# 4. Program behaviour

class ProgramBehaviour(TempDirTest):
    def test_help_without_eal(self):
        for args in (["--help"], ["-h"], ["--no-huge", "--", "--help"]):
            r = subprocess.run([SWITCH_EMU, *args], capture_output=True, text=True, timeout=30)
            self.assertEqual(r.returncode, 0, f"{args}: {r.stderr}")
            for opt in ("--config", "--stats", "--idle-exit-ms", "--duration-ms", "--log-level"):
                self.assertIn(opt, r.stdout, f"{args}: --help documents {opt}")

    def test_file_prefix_in_use_is_named(self):
        # A second primary on a prefix in use: EAL leaves rte_errno at 0, which used to print
        # "rte_eal_init failed: Success".
        path = os.path.join(self.tmp, "null.yaml")
        with open(path, "w") as f:
            f.write("ports:\n  - {name: a, device: 'net_null0,no-rx=1'}\n"
                    "  - {name: b, device: 'net_null1,no-rx=1'}\nroutes:\n"
                    "  - {prefix: 0.0.0.0/0, port: b}\n")
        prefix = unique_prefix("dup")
        first = subprocess.Popen([SWITCH_EMU, *eal_args(prefix), "--", "--config", path,
                                  "--duration-ms", "20000"], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
        try:
            lock = os.path.join(DPDK_RUN_DIR, prefix, "config")
            wait_for(lambda: os.path.exists(lock), TELEMETRY_READY_S, "the first primary's lock")
            r = subprocess.run([SWITCH_EMU, *eal_args(prefix), "--", "--config", path,
                                "--duration-ms", "100"], capture_output=True, text=True, timeout=60)
            self.assertNotEqual(r.returncode, 0)
            self.assertNotIn("Success", r.stderr)
            self.assertIn("in use by another primary DPDK process", r.stderr)
            self.assertIn("--file-prefix", r.stderr)
        finally:
            first.terminate()
            first.wait(timeout=30)
            remove_runtime_dir(prefix)

    def test_config_errors_exit_2_with_file_key_reason(self):
        base = "ports:\n  - {name: a, device: net_null0}\n  - {name: b, device: net_null1}\n"
        cases = [
            ("mode.yaml", base + "groups:\n  - {name: g, mode: fastest, ports: [a, b]}\n",
             "groups[0].mode", "fastest"),
            ("route.yaml", base + "routes:\n  - {prefix: 10.0.0.0/8, port: c}\n",
             "routes[0].port", "c"),
            ("typo.yaml", base + "hash: {algorithm: crc32c, sead: 3}\n", "hash.sead", "unknown"),
        ]
        for name, text, key, word in cases:
            path = os.path.join(self.tmp, name)
            with open(path, "w") as f:
                f.write(text)
            r = run_switch(unique_prefix("cfgerr"), path, timeout=60)
            self.assertEqual(r.returncode, 2, f"{name}: {r.stdout}\n{r.stderr}")
            line = [ln for ln in r.stderr.splitlines() if ln.startswith("switch_emu: ")]
            self.assertEqual(len(line), 1, r.stderr)
            m = re.fullmatch(r"switch_emu: (.+?): (\S+): (.+)", line[0])
            self.assertIsNotNone(m, line[0])
            self.assertEqual(m.group(1), path)
            self.assertEqual(m.group(2), key)
            self.assertIn(word, m.group(3))

    def test_every_example_config_starts_and_stops_cleanly(self):
        # nic-*.yaml are nic_emu's (tests/nic_emu/test_nic_emu.py runs them), fabric-*.yaml
        # fabric_emu's (tests/fabric/test_fabric_emu.py).
        configs = sorted(p for p in glob.glob(os.path.join(ROOT, "configs", "*.yaml"))
                         if not os.path.basename(p).startswith(("nic-", "fabric-")))
        ran, skipped = [], []
        for path in configs:
            with open(path) as f:
                text = f.read()
            devices = re.findall(r"device:\s*\"?([A-Za-z_]+?)\d*[,\"}\s]", text)
            self.assertTrue(devices, f"{path}: no devices found")
            if not all(d in ("net_pcap", "net_ring", "net_null") for d in devices):
                skipped.append((os.path.basename(path), sorted(set(devices))))
                continue
            cwd = os.path.join(self.tmp, os.path.basename(path))
            os.makedirs(cwd)
            for rx in re.findall(r"rx_pcap=(out/[\w./-]+)", text):
                # Inputs the config reads that no test writes here (the CONGA chain's): empty.
                os.makedirs(os.path.join(cwd, os.path.dirname(rx)), exist_ok=True)
                if "out/fanout/in.pcap" not in rx:
                    P.write_pcap(os.path.join(cwd, rx), [])
            if "out/fanout/in.pcap" in text:
                g = subprocess.run([ROCE_PCAP, "--out", os.path.join(cwd, "out/fanout/in.pcap"),
                                    "--qps", "8", "--messages", "4"], capture_output=True,
                                   text=True, timeout=60)
                self.assertEqual(g.returncode, 0, g.stderr)
            stats = os.path.join(cwd, "stats.json")
            r = run_switch(unique_prefix("cfg"), path, "--duration-ms", "300", "--stats", stats,
                           cwd=cwd)
            name = os.path.basename(path)
            self.assertEqual(r.returncode, 0, f"{name}:\n{r.stdout}\n{r.stderr}")
            self.assertIn("mempool: 0 mbufs in use at exit", r.stdout, name)
            with open(stats) as f:
                st = json.load(f)
            names = re.findall(r"\{\s*name:\s*([\w-]+),\s*device:", text)
            self.assertEqual([p["name"] for p in st["ports"]], names, name)
            self.assertEqual(st["mempool_in_use_at_exit"], 0)
            ran.append(name)
        self.assertIn("fanout-pcap.yaml", ran)
        self.assertIn("leaf-spray-pfc.yaml", ran)
        print(f"\n  configs run: {ran}; need interfaces (VethNamespaces runs veth.yaml): "
              f"{skipped}",
              file=sys.stderr)


# ---------------------------------------------------------------------------------------------
# 4b. dpdk-dumpcap captures a running switch (rte_pdump). Secondary processes cannot attach to
# a --no-huge primary, so this test reserves 2 MiB hugepages for itself (root) and gives them
# back; where the kernel refuses, it says so and skips.

class DumpcapCapture(TempDirTest):
    PAGES = 160

    def setUp(self):
        super().setUp()
        if os.geteuid() != 0:
            self.skipTest("hugepages need root")
        self.nr_path = "/proc/sys/vm/nr_hugepages"
        with open(self.nr_path) as f:
            self.old_pages = int(f.read())
        self.huge_dir = os.path.join(self.tmp, "huge")
        os.mkdir(self.huge_dir)
        self.mounted = False
        try:
            with open(self.nr_path, "w") as f:
                f.write(str(self.old_pages + self.PAGES))
            subprocess.run(["mount", "-t", "hugetlbfs", "-o", "pagesize=2M", "nodev",
                            self.huge_dir], check=True, capture_output=True, timeout=30)
            self.mounted = True
        except (OSError, subprocess.CalledProcessError) as e:
            self.restore()
            self.skipTest(f"cannot reserve hugepages here: {e}")
        with open("/proc/meminfo") as f:
            free = int(re.search(r"HugePages_Free:\s+(\d+)", f.read()).group(1))
        if free < self.PAGES:
            self.restore()
            self.skipTest(f"only {free} free 2 MiB hugepages")

    def restore(self):
        if self.mounted:
            subprocess.run(["umount", self.huge_dir], capture_output=True, timeout=30)
            self.mounted = False
        with open(self.nr_path, "w") as f:
            f.write(str(self.old_pages))

    def tearDown(self):
        self.restore()
        super().tearDown()

    def test_dumpcap_captures_roce_from_a_running_switch(self):
        roce = os.path.join(self.tmp, "roce.pcap")
        subprocess.run([ROCE_PCAP, "--out", roce, "--qps", "2", "--messages", "4",
                        "--msg-bytes", "4096", "--mtu", "1024"], check=True, capture_output=True)
        config = os.path.join(self.tmp, "dump.yaml")
        # dumpcap captures what leaves `out`, a 1 Mbit/s emulated link (~120 frames a second).
        # DPDK 22.11's pdump removes its callbacks without waiting for the lcore to leave them,
        # and dumpcap frees its mempool as it exits: a callback copying a packet at that moment
        # writes into freed memory and the switch crashes (seen as SIGSEGV in rte_pcapng_copy,
        # about every other run at full rate). At this rate the lcore is almost never inside the
        # callback; `out` has no rx side (tx_pcap only), so its rx callback sees no packets.
        with open(config, "w") as f:
            f.write(f"""ports:
  - {{name: in, device: "net_pcap0,rx_pcap={roce},infinite_rx=1"}}
  - {{name: out, device: "net_pcap1,tx_pcap={os.path.join(self.tmp, 'out.pcap')}",
     link: {{rate_gbps: 0.001}}}}
routes:
  - {{prefix: 10.0.0.0/8, port: out}}
""")
        prefix = unique_prefix("dump")
        eal = ["-m", "256", "--no-pci", "--huge-dir", self.huge_dir, "--file-prefix", prefix,
               "--log-level", "lib.eal:error"]
        sw = SwitchProcess(prefix, config, self.tmp, eal=eal)
        try:
            sw.telemetry().close()
            out = os.path.join(self.tmp, "capture.pcapng")
            r = subprocess.run(["dpdk-dumpcap", f"--file-prefix={prefix}", "-i", "1", "-c", "20",
                                "-w", out, "-q"], capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            fields = subprocess.run(["tshark", "-r", out, "-T", "fields", "-e",
                                     "infiniband.bth.opcode", "-e", "infiniband.bth.destqp"],
                                    capture_output=True, text=True, timeout=60).stdout.split("\n")
            rows = [line.split("\t") for line in fields if line]
            # dumpcap stops at the end of the burst in which it reached 20.
            self.assertGreaterEqual(len(rows), 20, "dpdk-dumpcap -c 20 captured 20 packets")
            self.assertTrue(all(op in ("6", "7", "8") for op, _ in rows), rows)
            self.assertEqual({qp for _, qp in rows} <= {"0x000011", "0x000012"}, True, rows)
        finally:
            rc = sw.stop(signal.SIGTERM)
        self.assertEqual(rc, 0, sw.stderr())
        self.assertIn("mempool: 0 mbufs in use at exit", sw.stdout())


# 5. SIGTERM with telemetry

class SigtermWithTelemetry(TempDirTest):
    def test_net_null_counters_grow_and_sigterm_exits_whole(self):
        config = os.path.join(self.tmp, "null.yaml")
        with open(config, "w") as f:
            f.write("name: null-switch\n"
                    "ports:\n"
                    "  - {name: in, device: \"net_null0,size=64\"}\n"
                    "  - {name: out, device: \"net_null1\"}\n"
                    "routes:\n"
                    "  - {prefix: 0.0.0.0/0, port: out}\n")
        prefix = unique_prefix("sigterm")
        sw = SwitchProcess(prefix, config, self.tmp)
        try:
            t = sw.telemetry()
            try:
                self.assertEqual(t.pid, sw.proc.pid)
                self.assertEqual(t.query("/spraynet/ports"), ["in", "out"])
                first = t.query("/spraynet/port,0")
                self.assertEqual(first["name"], "in")
                drops0 = t.query("/spraynet/drops")["parse_not_ipv4"]
                # Frames of zeros are not IPv4: every one is counted, none forwarded.
                grown = wait_for(
                    lambda: (lambda p, d: (p, d) if p["rx_packets"] > first["rx_packets"]
                             and d["parse_not_ipv4"] > drops0 else None)(
                        t.query("/spraynet/port,in"), t.query("/spraynet/drops")),
                    TELEMETRY_READY_S, "rx_packets and parse_not_ipv4 to grow")
                port, drops = grown
                self.assertGreater(port["rx_packets"], 0)
                self.assertEqual(port["forwarded_packets"], 0)
                self.assertEqual(drops["total"], drops["parse_not_ipv4"])
                self.assertIn("error", t.query("/spraynet/port,7"))
                # Acting commands are off unless enabled: each is refused, saying how to enable
                # it, and nothing changes.
                for cmd in ("link_set,out,down", "link_rate,out,10", "link_ber,out,0.1",
                            "link_loss,out,0.5", "tcam_add,{id: 1, action: drop}",
                            "tcam_remove,1", "group_mode,g,dlb"):
                    reply = t.query("/spraynet/" + cmd)
                    self.assertIn("acting commands are disabled", reply.get("error", ""), cmd)
                self.assertTrue(t.query("/spraynet/port,out")["link_up"])
            finally:
                t.close()
            # Only the user that ran switch_emu may connect to its socket.
            sock = os.path.join(DPDK_RUN_DIR, prefix, "dpdk_telemetry.v2")
            self.assertEqual(os.stat(sock).st_mode & 0o777, 0o600)
            via_py = telemetry_py(prefix, "/spraynet/port,0", "/spraynet/drops")
            self.assertEqual(via_py[0]["name"], "in")
            # Growth was shown above; the stock client must read the same, monotonic counters.
            self.assertGreaterEqual(via_py[0]["rx_packets"], port["rx_packets"])
            self.assertGreaterEqual(via_py[1]["parse_not_ipv4"], drops["parse_not_ipv4"])
            rc = sw.stop(signal.SIGTERM)
        except BaseException:
            sw.kill()
            raise
        out = sw.stdout()
        self.assertEqual(rc, 0, out + sw.stderr())
        self.assertIn("mempool: 0 mbufs in use at exit", out)
        st = sw.stats()
        self.assertEqual(st["mempool_in_use_at_exit"], 0)
        rx = sum(p["rx_packets"] for p in st["ports"])
        self.assertGreaterEqual(st["ports"][0]["rx_packets"], via_py[0]["rx_packets"])
        self.assertEqual(st["drops"]["parse_not_ipv4"], rx, "every frame received is counted")
        self.assertEqual(st["drops"]["total"], rx)
        self.assertEqual(sum(p["tx_packets"] for p in st["ports"]), 0)
        self.assertIn("refused /spraynet/link_set,out,down: acting commands are disabled",
                      sw.stderr())

    def test_telemetry_acting_flag_enables_acting_commands_and_logs_them(self):
        config = os.path.join(self.tmp, "null-acting.yaml")
        with open(config, "w") as f:
            f.write("ports:\n"
                    "  - {name: in, device: \"net_null0,size=64\"}\n"
                    "  - {name: out, device: \"net_null1,no-rx=1\"}\n"
                    "routes:\n"
                    "  - {prefix: 0.0.0.0/0, port: out}\n"
                    "telemetry: {socket_mode: 660}\n")
        prefix = unique_prefix("acting")
        sw = SwitchProcess(prefix, config, self.tmp, "--telemetry-acting")
        try:
            t = sw.telemetry()
            try:
                self.assertEqual(t.query("/spraynet/link_set,out,down")["ok"], True)
                self.assertFalse(t.query("/spraynet/port,out")["link_up"])
            finally:
                t.close()
            sock = os.path.join(DPDK_RUN_DIR, prefix, "dpdk_telemetry.v2")
            self.assertEqual(os.stat(sock).st_mode & 0o777, 0o660)
            rc = sw.stop(signal.SIGTERM)
        except BaseException:
            sw.kill()
            raise
        self.assertEqual(rc, 0, sw.stderr())
        self.assertIn("/spraynet/link_set,out,down -> ", sw.stderr())
        self.assertIn("acting commands enabled", sw.stderr())


# 5b. Run-time control over telemetry: the link-state table, link down obeyed at once

class RuntimeControl(TempDirTest):
    """RoCE from an endless pcap (net_pcap infinite_rx) through a weighted group of four
    net_null uplinks; telemetry reads the link-state and bucket tables, takes an uplink down,
    changes links, TCAM rules and the group mode, and every change is acknowledged or refused."""

    def test_link_state_table_and_link_down_obeyed(self):
        in_pcap = os.path.join(self.tmp, "in.pcap")
        g = subprocess.run([ROCE_PCAP, "--out", in_pcap, "--qps", "64", "--messages", "2",
                            "--msg-bytes", "4096"], capture_output=True, text=True, timeout=60)
        self.assertEqual(g.returncode, 0, g.stderr)
        config = os.path.join(self.tmp, "ctl.yaml")
        with open(config, "w") as f:
            f.write("name: ctl-switch\n"
                    "ports:\n"
                    f"  - {{name: in, device: \"net_pcap0,rx_pcap={in_pcap},infinite_rx=1\"}}\n"
                    + "".join(f"  - {{name: up{i}, device: \"net_null{i + 1}\"}}\n"
                              for i in range(4)) +
                    "groups:\n"
                    "  - {name: g, mode: weighted, ports: [up0, up1, up2, up3]}\n"
                    "routes:\n"
                    "  - {prefix: 0.0.0.0/0, group: g}\n"
                    "control: {period_ms: 100}\n"
                    "telemetry: {acting_commands: true}\n")
        prefix = unique_prefix("ctl")
        sw = SwitchProcess(prefix, config, self.tmp)
        try:
            t = sw.telemetry()
            try:
                self._exercise(t, prefix)
            finally:
                t.close()
            rc = sw.stop(signal.SIGTERM)
        except BaseException:
            sw.kill()
            raise
        self.assertEqual(rc, 0, sw.stdout() + sw.stderr())
        self.assertIn("mempool: 0 mbufs in use at exit", sw.stdout())
        st = sw.stats()
        self.assertGreaterEqual(st["control"]["immediate_publications"], 1)
        self.assertGreater(st["control"]["ticks"], 0)
        self.assertEqual(st["mempool_in_use_at_exit"], 0)

    def tx(self, t):
        return [t.query(f"/spraynet/port,up{i}")["tx_packets"] for i in range(4)]

    @staticmethod
    def links(reply):
        """Telemetry's model is one level deep: the table's rows come as links/<i>/<field>."""
        rows = defaultdict(dict)
        for key, value in reply.items():
            m = re.fullmatch(r"links/(\d+)/(\w+)", key)
            if m:
                rows[int(m.group(1))][m.group(2)] = value
        return [rows[i] for i in sorted(rows)]

    def _exercise(self, t, prefix):
        # The link-state table, through the stock client too.
        ls = self.links(telemetry_py(prefix, "/spraynet/link_state")[0])
        self.assertEqual(len(ls), 5)
        self.assertEqual([link["port"] for link in ls], ["in", "up0", "up1", "up2", "up3"])
        for link in ls:
            self.assertTrue(link["up"])
            self.assertEqual(link["health"] > 0, True)
            self.assertIn("utilisation_ppm", link)
            self.assertIn("ber_ppq", link)
            self.assertEqual(link["rate_mbps"], 100000)  # the default link, a JSON number
        self.assertEqual(len({link["path_id"] for link in ls}), 5, "distinct path ids")
        # Traffic reaches all four uplinks.
        wait_for(lambda: all(v > 100 for v in self.tx(t)), TELEMETRY_READY_S,
                 "traffic on every uplink")
        # A tick publishes (period 100 ms): the sequence grows.
        seq0 = t.query("/spraynet/link_state")["sequence"]
        wait_for(lambda: t.query("/spraynet/link_state")["sequence"] > seq0, TELEMETRY_READY_S,
                 "a periodic publication")

        # Refusals, each with its reason; nothing changes.
        self.assertIn("error", t.query("/spraynet/link_set,up9,down"))
        self.assertIn("up or down", t.query("/spraynet/link_set,up1,sideways")["error"])
        self.assertIn("rate_gbps", t.query("/spraynet/link_rate,up1,-5")["error"])
        # The config's limits hold at run time too ([0.001, 10000] Gbit/s, BER and loss [0, 1]).
        for cmd in ("link_rate,up1,0.0001", "link_rate,up1,20000", "link_ber,up1,1.5",
                    "link_loss,up1,-0.1"):
            self.assertIn("must be a number in", t.query("/spraynet/" + cmd).get("error", ""), cmd)
        self.assertIn("number", t.query("/spraynet/link_ber,up1,lots")["error"])
        self.assertIn("ecmp", t.query("/spraynet/group_mode,g,random")["error"])
        self.assertIn("error", t.query("/spraynet/tcam_add,{id: 1, action: teleport}"))
        self.assertIn("error", t.query("/spraynet/tcam_remove,999"))

        # Link down: acknowledged, published at once, obeyed.
        ack = t.query("/spraynet/link_set,up2,down")
        self.assertEqual(ack["ok"], True, ack)
        self.assertEqual(ack["published"], "now")
        b = t.query("/spraynet/buckets,g")
        self.assertEqual(b["member_buckets"][2], 0, b)
        self.assertTrue(all(b["member_buckets"][i] > 0 for i in (0, 1, 3)), b)
        down = self.links(t.query("/spraynet/link_state"))[3]
        self.assertEqual(down["up"], False)
        self.assertEqual(down["health"], 0)
        before = self.tx(t)
        wait_for(lambda: (lambda now: all(now[i] - before[i] > 2000 for i in (0, 1, 3)))(
            self.tx(t)), TELEMETRY_READY_S, "traffic on the three links still up")
        after = self.tx(t)
        self.assertEqual(after[2], before[2], "nothing leaves a link that is down")

        # Other run-time changes, each acknowledged with the new value.
        # Numbers are JSON numbers: a float as a whole number in the unit its key names.
        r = t.query("/spraynet/link_rate,up1,25")
        self.assertEqual((r["ok"], r["rate_mbps"]), (True, 25000), r)
        self.assertEqual(t.query("/spraynet/port,up1")["rate_mbps"], 25000)
        r = t.query("/spraynet/link_ber,up1,1e-9")
        self.assertEqual((r["ok"], r["ber_ppq"]), (True, 1_000_000), r)
        r = t.query("/spraynet/link_loss,up1,0.25")
        self.assertEqual((r["ok"], r["loss_rate_ppq"]), (True, 250_000_000_000_000), r)
        self.assertEqual(t.query("/spraynet/link_loss,up1,0")["loss_rate_ppq"], 0)
        r = t.query("/spraynet/group_mode,g,dlb")
        self.assertEqual((r["ok"], r["mode"]), (True, "dlb"), r)
        self.assertEqual(t.query("/spraynet/group,g")["mode"], "dlb")
        self.assertEqual(t.query("/spraynet/group_mode,g,weighted")["ok"], True)
        r = t.query("/spraynet/tcam_add,{id: 7, priority: 5, match: {dst: 10.9.0.0/16}, "
                    "action: drop}")
        self.assertEqual((r["ok"], r["admitted"]), (True, True), r)
        self.assertEqual(t.query("/spraynet/tcam")["admitted_rules"], 1)
        self.assertEqual(t.query("/spraynet/tcam_add,{id: 7, action: drop}")["refused"],
                         "duplicate_id")
        self.assertEqual(t.query("/spraynet/tcam_remove,7")["ok"], True)
        self.assertEqual(t.query("/spraynet/tcam")["admitted_rules"], 0)

        # Link up: published at the next tick, then the link carries traffic again.
        self.assertEqual(t.query("/spraynet/link_set,up2,up")["published"], "next tick")
        wait_for(lambda: t.query("/spraynet/buckets,g")["member_buckets"][2] > 0,
                 TELEMETRY_READY_S, "buckets back on up2 after the next tick")
        back = self.tx(t)[2]
        wait_for(lambda: self.tx(t)[2] > back, TELEMETRY_READY_S, "traffic on up2 again")


# ---------------------------------------------------------------------------------------------
# 6. veth: two hosts in network namespaces

LISTENER = r"""
import json, socket, struct, sys
n, bound_s = int(sys.argv[1]), float(sys.argv[2])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, 33, 8 << 20)  # SO_RCVBUFFORCE: the test is not about us
IP_RECVTTL = getattr(socket, "IP_RECVTTL", 12)  # <linux/in.h>; Python 3.11 lacks the name
s.setsockopt(socket.IPPROTO_IP, IP_RECVTTL, 1)
s.bind(("10.0.2.1", 9000))
s.settimeout(bound_s)
print("ready", flush=True)
seqs, ttls, src = [], {}, set()
while len(seqs) < n:
    try:
        data, anc, flags, addr = s.recvmsg(2048, socket.CMSG_SPACE(4))
    except socket.timeout:
        break
    seqs.append(struct.unpack_from("!I", data)[0])
    src.add(addr[0])
    for level, kind, value in anc:
        if level == socket.IPPROTO_IP and kind == socket.IP_TTL:
            t = struct.unpack("i", value[:4])[0]
            ttls[t] = ttls.get(t, 0) + 1
print(json.dumps({"seqs": seqs, "ttls": ttls, "src": sorted(src)}), flush=True)
"""

SENDER = r"""
import socket, struct, sys
n = int(sys.argv[1])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("10.0.1.1", 0))
for i in range(n):
    s.sendto(struct.pack("!I", i) + b"spraynet" * 8, ("10.0.2.1", 9000))
print("sent", n, flush=True)
"""


class VethNamespaces(TempDirTest):
    DATAGRAMS = 1000

    def free_netns_prefix(self):
        for i in range(100):
            p = f"swt{os.getpid() % 10000}{i}"
            if not any(os.path.exists(x) for x in (f"/var/run/netns/{p}-a", f"/var/run/netns/{p}-b",
                                                   f"/sys/class/net/{p}-sw-a",
                                                   f"/sys/class/net/{p}-sw-b")):
                return p
        raise AssertionError("no free netns prefix")

    def test_udp_between_namespaces_through_the_switch(self):
        if os.geteuid() != 0:
            self.skipTest("network namespaces need root")
        netns = self.free_netns_prefix()
        self.assertLessEqual(len(f"{netns}-sw-a"), 15, "interface names fit IFNAMSIZ")
        try:
            up = subprocess.run([TOPOLOGY, "up", netns], capture_output=True, text=True,
                                timeout=60)
            self.assertEqual(up.returncode, 0, up.stderr)
            macs = subprocess.run([TOPOLOGY, "macs", netns], capture_output=True, text=True,
                                  timeout=30, check=True).stdout.split()
            a_host, _, b_host, _ = macs
            self.check_switch_between_hosts(netns, a_host, b_host)
            with self.subTest("configs/veth.yaml carries traffic between the topology's hosts"):
                self.check_example_config(netns)
        finally:
            subprocess.run([TOPOLOGY, "down", netns], capture_output=True, timeout=60)
            self.assertFalse(os.path.exists(f"/var/run/netns/{netns}-a"))
            self.assertFalse(os.path.exists(f"/sys/class/net/{netns}-sw-b"))

    def check_switch_between_hosts(self, netns, a_host, b_host):
        # framecnt: the af_packet rx ring holds the whole burst (the default 512 frames does
        # not: while this 2-core machine deschedules the switch, the sender fills it and the
        # kernel drops the rest, which would make the result depend on scheduling).
        r = self.switch_and_traffic(netns, f"""name: veth-test
ports:
  - {{name: a, device: "net_af_packet0,iface={netns}-sw-a,qdisc_bypass=1,framecnt=2048",
     peer_mac: "{a_host}", link: {{rate_gbps: 10, delay_ns: 2000}}}}
  - {{name: b, device: "net_af_packet1,iface={netns}-sw-b,qdisc_bypass=1,framecnt=2048",
     peer_mac: "{b_host}", link: {{rate_gbps: 10, delay_ns: 2000}}}}
routes:
  - {{prefix: 10.0.1.0/24, port: a}}
  - {{prefix: 10.0.2.0/24, port: b}}
""", self.DATAGRAMS, 10)
        seqs, port_a, port_b = r["seqs"], r["port_a"], r["port_b"]
        report = (f"listener got {len(seqs)} of {self.DATAGRAMS}; TTLs {r['ttls']}; switch port "
                  f"a {port_a['rx_packets']} rx, port b {port_b['tx_packets']} tx; "
                  f"drops {nonzero_drops({'drops': r['drops']})}\n{r['stdout']}")
        self.assertEqual(sorted(seqs), list(range(self.DATAGRAMS)), report)
        self.assertEqual(r["ttls"], {"63": self.DATAGRAMS}, report)
        self.assertEqual(r["src"], ["10.0.1.1"])
        self.assertGreaterEqual(port_a["rx_packets"], self.DATAGRAMS)
        self.assertGreaterEqual(port_b["tx_packets"], self.DATAGRAMS)
        self.assertEqual(r["rc"], 0, r["stdout"] + r["stderr"])
        self.assertIn("mempool: 0 mbufs in use at exit", r["stdout"])
        ports = {p["name"]: p for p in r["stats"]["ports"]}
        self.assertGreaterEqual(ports["b"]["forwarded_packets"], self.DATAGRAMS)
        self.assertEqual(r["stats"]["mempool_in_use_at_exit"], 0)
        with self.subTest("telemetry shows per-class egress counters"):
            # /spraynet/port carries per-class counters (enqueued, transmitted, drops, paused
            # time) in --stats; over telemetry they must not be flattened to zeros.
            # Telemetry's one-level data model carries them as "classes/<tc>/<counter>".
            classes = {k: v for k, v in port_b.items() if k.startswith("classes/")}
            self.assertEqual(classes.get("classes/0/transmitted_packets"),
                             ports["b"]["classes"][0]["transmitted_packets"],
                             f"port b sent {port_b['tx_packets']} packets on class 0; telemetry "
                             f"shows {classes}; --stats has {ports['b']['classes'][0]}")
            self.assertGreaterEqual(classes.get("classes/0/enqueued", 0), self.DATAGRAMS)
            self.assertIn("dpdk/ipackets", port_b, "ethdev counters are in /spraynet/port")

    def check_example_config(self, netns):
        """configs/veth.yaml, on this topology (its interface prefix spn- made ours)."""
        with open(os.path.join(ROOT, "configs", "veth.yaml")) as f:
            text = f.read()
        self.assertIn("iface=spn-sw-a", text)
        n = 20
        r = self.switch_and_traffic(netns, text.replace("iface=spn-sw-", f"iface={netns}-sw-"),
                                    n, 5)
        self.assertEqual(r["rc"], 0, r["stdout"] + r["stderr"])
        self.assertIn("mempool: 0 mbufs in use at exit", r["stdout"])
        self.assertEqual(len(r["seqs"]), n,
                         f"host b received {len(r['seqs'])} of {n}; the switch sent "
                         f"{r['port_b']['tx_packets']} on port b")

    def switch_and_traffic(self, netns, config_text, n, bound_s):
        """Starts switch_emu on config_text, sends n datagrams from host a to a listener on
        host b (which waits at most bound_s for each), reads telemetry, stops the switch with
        SIGTERM. Returns what the listener saw, the telemetry, the exit and the report."""
        config = os.path.join(self.tmp, f"veth-{unique_prefix('cfg')}.yaml")
        with open(config, "w") as f:
            f.write(config_text)
        prefix = unique_prefix("veth")
        sw = SwitchProcess(prefix, config, self.tmp)
        listener = None
        t = None
        r = {}
        try:
            t = sw.telemetry()
            listener = subprocess.Popen(
                ["ip", "netns", "exec", f"{netns}-b", PYTHON, "-c", LISTENER, str(n),
                 str(bound_s)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            if listener.stdout.readline().strip() != "ready":
                listener.wait(timeout=30)
                self.fail(f"listener in {netns}-b did not start: {listener.stderr.read()}")
            sent = subprocess.run(["ip", "netns", "exec", f"{netns}-a", PYTHON, "-c", SENDER,
                                   str(n)], capture_output=True, text=True, timeout=60)
            self.assertEqual(sent.returncode, 0, sent.stderr)
            out, err = listener.communicate(timeout=60 + bound_s)
            self.assertEqual(listener.returncode, 0, err)
            r.update(json.loads(out))
            r["port_a"] = t.query("/spraynet/port,a")
            r["port_b"] = t.query("/spraynet/port,b")
            r["drops"] = t.query("/spraynet/drops")
            t.close()
            t = None
            r["rc"] = sw.stop(signal.SIGTERM)
        except BaseException:
            sw.kill()
            raise
        finally:
            if t is not None:
                t.close()
            if listener is not None:
                if listener.poll() is None:
                    listener.kill()
                listener.communicate()
        r["stdout"], r["stderr"], r["stats"] = sw.stdout(), sw.stderr(), sw.stats()
        return r


if __name__ == "__main__":
    res = unittest.main(exit=False, verbosity=2).result
    sys.exit(0 if res.wasSuccessful() else 1)
