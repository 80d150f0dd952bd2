#!/usr/bin/python3
"""switch_emu on net_af_xdp ports (AF_XDP sockets on veth), with the default config: no
mbuf_data_room, so the program must size its mbufs to fit a umem chunk itself.

A network namespace of its own holds two veth pairs, host-a <-> sw-a and host-b <-> sw-b;
switch_emu runs in it on net_af_xdp ports over sw-a and sw-b. A RoCEv2 capture (roce_pcap) is
written into host-a frame by frame (an AF_PACKET socket), captured on host-b, and every frame
is accounted for: sent = switch rx on a = switch tx on b = captured. The run must end with exit
0 and no mbuf out (net_af_xdp's fill ring is not a leak). Where the kernel refuses AF_XDP (no
XDP sockets, not root) the test is skipped with the reason, and the script exits 77 (meson's
SKIP) though the other tests passed. Also: a missing interface exits 1 (a device error), an unknown
driver 2 (a config error). Nothing waits by sleeping: every wait is on a condition, with a bound.

The same kind of namespace also runs switch_emu on net_af_packet ports with two queue pairs each
(the kernel's PACKET_FANOUT hash spreads flows over the rx queues, as RSS does) and two lcores,
each polling one rx queue of both ports and sending on its own tx queue: every frame comes out
exactly once and none is handed from one lcore to the other."""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from switch_paths import DPDK_RUN_DIR, PYTHON, ROCE_PCAP, SWITCH_EMU  # noqa: E402
import pcaplib as P  # noqa: E402
from waiting import wait_for  # noqa: E402

READY_S = 60        # EAL, the AF_XDP sockets and their XDP programs up (slow on a busy machine)
CAPTURE_S = 30      # every frame through, once sent
EXIT_S = 30         # after SIGTERM

# Captures every RoCEv2 frame (UDP 4791) that leaves the switch on host-b, until it has n or
# nothing more came for `quiet` seconds; prints how many and their bytes (hex), as JSON.
SNIFFER = r"""
import json, socket, sys
iface, n, quiet = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
s.setsockopt(socket.SOL_SOCKET, 33, 8 << 20)  # SO_RCVBUFFORCE
s.bind((iface, 0))
s.settimeout(quiet)
print("ready", flush=True)
got = []
while len(got) < n:
    try:
        frame, addr = s.recvfrom(65535)
    except socket.timeout:
        break
    if addr[2] == socket.PACKET_OUTGOING:
        continue
    if len(frame) > 37 and frame[12:14] == b"\x08\x00" and frame[23] == 17 and \
            int.from_bytes(frame[36:38], "big") == 4791:
        got.append(frame.hex())
print(json.dumps(got), flush=True)
"""

# Writes every frame of a pcap into an interface, in order.
SENDER = r"""
import socket, struct, sys
iface, path = sys.argv[1], sys.argv[2]
data = open(path, "rb").read()
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind((iface, 0))
off, n = 24, 0
while off + 16 <= len(data):
    caplen = struct.unpack_from("<I", data, off + 8)[0]
    s.send(data[off + 16:off + 16 + caplen])
    off += 16 + caplen
    n += 1
print(n, flush=True)
"""


def sh(*args, check=True):
    return subprocess.run(list(args), capture_output=True, text=True, timeout=60, check=check)


def af_xdp_refused():
    """Why this machine cannot run the test, or None."""
    if os.geteuid() != 0:
        return "AF_XDP sockets and network namespaces need root"
    import socket
    try:
        socket.socket(44, socket.SOCK_RAW, 0).close()  # AF_XDP
    except OSError as e:
        return f"the kernel refuses AF_XDP sockets: {e.strerror} (CONFIG_XDP_SOCKETS?)"
    if shutil.which("ip") is None:
        return "iproute2 (ip) is not installed"
    return None


def veth_refused():
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        return "iproute2 (ip) is not installed"
    return None


class VethNamespace(unittest.TestCase):
    """A namespace with host-a <-> sw-a and host-b <-> sw-b, removed after the test."""
    refused = staticmethod(veth_refused)

    def setUp(self):
        why = self.refused()
        if why:
            self.skipTest(why)
        self.tmp = tempfile.mkdtemp(prefix="spraynet-afxdp-")
        self.netns = None
        for i in range(100):
            name = f"sxdp{os.getpid() % 10000}{i}"
            if not os.path.exists(f"/var/run/netns/{name}"):
                self.netns = name
                break
        self.assertIsNotNone(self.netns, "no free netns name")
        self.addCleanup(self.cleanup)
        sh("ip", "netns", "add", self.netns)
        for side in ("a", "b"):
            sh("ip", "-n", self.netns, "link", "add", f"host-{side}", "type", "veth", "peer",
               "name", f"sw-{side}")
        for ifc in ("host-a", "host-b", "sw-a", "sw-b"):
            # No IPv6: the kernel would send router and neighbour solicitations of its own.
            self.nsexec("sysctl", "-q", "-w", f"net.ipv6.conf.{ifc}.disable_ipv6=1")
            sh("ip", "-n", self.netns, "link", "set", ifc, "up")

    def cleanup(self):
        if self.netns:
            sh("ip", "netns", "del", self.netns, check=False)
        shutil.rmtree(self.tmp, ignore_errors=True)

    def nsexec(self, *args, check=True):
        return sh("ip", "netns", "exec", self.netns, *args, check=check)

    def roce_frames(self, qps):
        pcap = os.path.join(self.tmp, "roce.pcap")
        r = sh(ROCE_PCAP, "--out", pcap, "--qps", str(qps), "--messages", "8", "--msg-bytes",
               "3000", "--mtu", "1024", "--seed", "7")
        frames = P.read_pcap(pcap)
        self.assertEqual(len(frames), qps * 8 * 3, r.stdout)
        return pcap, frames

    def run_switch(self, config, prefix, lcores, frames, pcap, on_start_failure=None):
        """switch_emu in the namespace on `config` (`lcores`: EAL's -l, or None); writes the pcap
        into host-a and captures host-b. `on_start_failure(exit status, log)` may skip the test
        when the program did not come up. Returns (exit status, stdout, log, report, captured
        frames as hex)."""
        stats = os.path.join(self.tmp, "stats.json")
        log = open(os.path.join(self.tmp, "switch.log"), "w+")
        self.addCleanup(log.close)
        sw = subprocess.Popen(
            ["ip", "netns", "exec", self.netns, SWITCH_EMU] + (["-l", lcores] if lcores else []) +
            ["--no-huge", "-m", "1024", "--no-pci", "--file-prefix", prefix, "--log-level",
             "lib.eal:error", "--", "--config", config, "--stats", stats],
            stdout=subprocess.PIPE, stderr=log, text=True)
        self.addCleanup(shutil.rmtree, os.path.join(DPDK_RUN_DIR, prefix), True)

        def switch_log():
            log.seek(0)
            return log.read()

        try:
            try:
                wait_for(lambda: "running" in switch_log(), READY_S, "switch_emu up", proc=sw)
            except AssertionError:
                out = sw.communicate(timeout=EXIT_S)[0] if sw.poll() is not None else ""
                if on_start_failure:
                    on_start_failure(sw.returncode, switch_log())
                self.fail(f"switch_emu did not come up (exit {sw.returncode}):\n{out}\n"
                          f"{switch_log()}")
            sniffer = subprocess.Popen(
                ["ip", "netns", "exec", self.netns, PYTHON, "-c", SNIFFER, "host-b",
                 str(len(frames)), "3"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                text=True)
            try:
                self.assertEqual(sniffer.stdout.readline().strip(), "ready", "sniffer up")
                sent = self.nsexec(PYTHON, "-c", SENDER, "host-a", pcap)
                self.assertEqual(int(sent.stdout), len(frames), sent.stderr)
                out, _ = sniffer.communicate(timeout=CAPTURE_S + 10)
            finally:
                if sniffer.poll() is None:
                    sniffer.kill()
                    sniffer.communicate()
            sw.send_signal(signal.SIGINT)
            stdout, _ = sw.communicate(timeout=EXIT_S)
        except BaseException:
            if sw.poll() is None:
                sw.kill()
                sw.communicate()
            raise
        report = None
        if os.path.exists(stats):
            with open(stats) as f:
                report = json.load(f)
        return sw.returncode, stdout, switch_log(), report, json.loads(out)


class AfPacketQueues(VethNamespace):
    def test_two_lcores_two_queue_pairs_no_handoff(self):
        if len(os.sched_getaffinity(0)) < 2:
            self.skipTest("two lcores need two CPUs")
        pcap, frames = self.roce_frames(32)  # 32 QPs: 32 UDP flows for the fanout hash
        config = os.path.join(self.tmp, "queues.yaml")
        with open(config, "w") as f:
            f.write("name: queues-test\nports:\n")
            for side, k in (("a", 0), ("b", 1)):
                f.write(f"  - {{name: {side}, device: \"net_af_packet{k},iface=sw-{side},"
                        f"qpairs=2,qdisc_bypass=1\", rx_queues: 2, tx_queues: 2}}\n")
            f.write("routes:\n  - {prefix: 0.0.0.0/0, port: b}\n"
                    "lcores:\n  - {lcore: 0, ports: [a, b], rx: [a:0, b:0]}\n"
                    "  - {lcore: 1, rx: [a:1, b:1]}\n")
        code, stdout, text, report, got = self.run_switch(
            config, f"afpq-{os.getpid()}", "0-1", frames, pcap)
        self.assertEqual(code, 0, f"{stdout}\n{text}")
        self.assertIn("mempool: 0 mbufs in use at exit", stdout)
        ports = {p["name"]: p for p in report["ports"]}
        rxq = [q["packets"] for q in ports["a"]["dpdk"]["rx_queues"]]
        txq = [q["tx_packets"] for q in ports["b"]["node_tx_queues"]]
        summary = (f"sent {len(frames)}, a's rx queues {rxq}, b's tx queues {txq}, captured "
                   f"{len(got)}, handoffs {report['counters']['lane_handoffs']}, drops "
                   f"{report['drops']}\n{stdout}")
        self.assertTrue(ports["b"]["tx_queue_per_lane"], summary)
        self.assertEqual(report["counters"]["lane_handoffs"], 0, summary)
        self.assertEqual(report["drops"]["total"], 0, summary)
        self.assertEqual(sum(rxq), len(frames), summary)
        self.assertTrue(all(n > 0 for n in rxq), "the fanout hash used both rx queues: " + summary)
        # Each lcore sent what its rx queue took in, on its own tx queue.
        self.assertEqual(txq, rxq, summary)
        # Every frame exactly once, routed (TTL one less, IP checksum redone).
        expected = sorted(P.routed(f)[14:] for f in frames)
        self.assertEqual(sorted(bytes.fromhex(h)[14:] for h in got), expected, summary)
        print(f"\n{summary}", file=sys.stderr)


class AfXdpVeth(VethNamespace):
    refused = staticmethod(af_xdp_refused)

    def test_roce_capture_through_switch_on_af_xdp_ports(self):
        pcap, frames = self.roce_frames(8)
        config = os.path.join(self.tmp, "af_xdp.yaml")
        with open(config, "w") as f:
            # The default config otherwise: mbuf_data_room is not given.
            f.write("name: af-xdp-test\nports:\n"
                    "  - {name: a, device: \"net_af_xdp0,iface=sw-a,start_queue=0\"}\n"
                    "  - {name: b, device: \"net_af_xdp1,iface=sw-b,start_queue=0\"}\n"
                    "routes:\n  - {prefix: 0.0.0.0/0, port: b}\n")

        def refused(code, text):
            if code == 1 and ("refuse" in text or "no AF_XDP" in text):
                self.skipTest("the kernel refuses AF_XDP on veth: " +
                              text.strip().splitlines()[-1])

        code, stdout, text, report, got = self.run_switch(
            config, f"afxdp-{os.getpid()}", None, frames, pcap, refused)
        self.assertIn("mbuf data room", text, "the pool was sized for AF_XDP")
        self.assertEqual(code, 0, f"{stdout}\n{text}")
        self.assertIn("mempool: 0 mbufs in use at exit", stdout)
        self.assertNotIn("not returned", text)
        self.assertEqual(report["mempool_in_use_at_exit"], 0)
        # 2 queues' fill rings of 2048 each: returned to the pool after close.
        self.assertGreater(report["mempool_reclaimed_from_pmd"], 0)
        ports = {p["name"]: p for p in report["ports"]}
        summary = (f"sent {len(frames)}, switch rx a {ports['a']['rx_packets']}, tx b "
                   f"{ports['b']['tx_packets']}, captured {len(got)}, drops "
                   f"{report['drops']}\n{stdout}")
        self.assertEqual(ports["a"]["rx_packets"], len(frames), summary)
        self.assertEqual(ports["b"]["tx_packets"], len(frames), summary)
        self.assertEqual(report["drops"]["total"], 0, summary)
        self.assertEqual(len(got), len(frames), summary)
        # Each frame once, routed (TTL one less, IP checksum redone), in order within the run.
        expected = [P.routed(f) for f in frames]
        got_frames = [bytes.fromhex(h) for h in got]
        self.assertEqual([g[14:] for g in got_frames], [e[14:] for e in expected], summary)
        print(f"\n{summary}\nreclaimed {report['mempool_reclaimed_from_pmd']}\n{text}",
              file=sys.stderr)


class PortErrorExitCodes(unittest.TestCase):
    """A device that is missing or refuses is a device error (exit 1, naming the config key);
    a spec no driver knows is a config error (exit 2, FILE: KEY: reason). Needs no AF_XDP."""

    def run_with_device(self, device):
        with tempfile.TemporaryDirectory() as tmp:
            config = os.path.join(tmp, "dev.yaml")
            with open(config, "w") as f:
                f.write(f"ports:\n  - {{name: a, device: \"{device}\"}}\n"
                        "  - {name: b, device: \"net_null0,no-rx=1\"}\n"
                        "routes:\n  - {prefix: 0.0.0.0/0, port: b}\n")
            prefix = f"afxdp-err-{os.getpid()}"
            try:
                r = subprocess.run([SWITCH_EMU, "--no-huge", "-m", "512", "--no-pci",
                                    "--file-prefix", prefix, "--log-level", "lib.eal:error", "--",
                                    "--config", config, "--duration-ms", "100"],
                                   capture_output=True, text=True, timeout=120)
            finally:
                shutil.rmtree(os.path.join(DPDK_RUN_DIR, prefix), ignore_errors=True)
            return config, r

    def test_missing_interface_exits_1_naming_it(self):
        for driver in ("net_af_xdp0", "net_af_packet0"):
            config, r = self.run_with_device(f"{driver},iface=spnnothere0")
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertIn('interface "spnnothere0" does not exist in this network namespace',
                          r.stderr)
            self.assertIn(f"(ports[0].device in {config})", r.stderr)

    def test_unknown_driver_is_a_config_error(self):
        config, r = self.run_with_device("net_bogus0")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn(f"{config}: ports[0].device: ", r.stderr)


if __name__ == "__main__":
    res = unittest.main(exit=False, verbosity=2).result
    if res.wasSuccessful() and any("AfXdpVeth" in t.id() for t, _ in res.skipped):
        # The AF_XDP run is the point of this script: meson says SKIP, the reason is above.
        sys.exit(77)
    sys.exit(0 if res.wasSuccessful() else 1)
