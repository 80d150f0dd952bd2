#!/usr/bin/python3
"""Integration tests of the nic_emu PROGRAM through the two scripts users run:
scripts/spray-pcap.sh sprays a capture of 4 QPs over 4 net_pcap uplinks, and
scripts/reorder-pcap.sh gives those four pcaps to a second nic_emu as its uplinks and writes what
it delivers to its host port. The captures are checked independently of the program: scapy
recomputes every ICRC, tshark decodes the RoCE headers, the PPCID is decoded here from DESIGN.md.

Run by meson with NIC_EMU and ROCE_PCAP set; Debian's /usr/bin/python3 has scapy."""
import glob
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest
from collections import Counter, defaultdict

from scapy.all import Ether, rdpcap, raw  # noqa: E402
from scapy.contrib.roce import BTH  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.environ.get("SPRAYNET_SOURCE_DIR", os.path.dirname(os.path.dirname(HERE)))
NIC_EMU = os.environ.get("NIC_EMU", os.path.join(ROOT, "build", "nic_emu", "nic_emu"))
ROCE_PCAP = os.environ.get("ROCE_PCAP", os.path.join(ROOT, "build", "nic_emu", "roce_pcap"))
SPRAY = os.path.join(ROOT, "scripts", "spray-pcap.sh")
REORDER = os.path.join(ROOT, "scripts", "reorder-pcap.sh")
TIMEOUT_S = 180  # one script run, start to exit; a bound, not a wait


def run(*cmd):
    env = dict(os.environ, NIC_EMU=NIC_EMU)
    return subprocess.run(list(cmd), capture_output=True, text=True, timeout=TIMEOUT_S, env=env)


def icrc_ok(frame):
    return Ether(frame)[BTH].compute_icrc(None) == frame[-4:]


def roce_fields(frame):
    """(udp checksum, DestQP, PSN, opcode) from the raw bytes (no VLAN in these captures)."""
    ihl = (frame[14] & 0xF) * 4
    udp = 14 + ihl
    sport, dport, ulen, csum = struct.unpack("!HHHH", frame[udp:udp + 8])
    assert dport == 4791, dport
    bth = udp + 8
    opcode = frame[bth]
    qp = int.from_bytes(frame[bth + 5:bth + 8], "big")
    psn = int.from_bytes(frame[bth + 9:bth + 12], "big")
    return csum, qp, psn, opcode


def check_nibble(qp, psn):
    x = (qp ^ psn) & 0xFFFFFF
    n = 0
    for shift in range(0, 24, 4):
        n ^= x >> shift
    return n & 0xF


def frames(path):
    return [raw(p) for p in rdpcap(path)]


def run_nic(cfg_text, tmp, name):
    """Runs nic_emu on a config written to tmp/name.yaml until it is idle; returns the result."""
    path = os.path.join(tmp, name + ".yaml")
    with open(path, "w") as f:
        f.write(cfg_text)
    prefix = f"nic{name}{os.getpid()}"
    r = subprocess.run([NIC_EMU, "--no-huge", "-m", "1024", "--no-pci", "--file-prefix", prefix,
                        "--log-level", "lib.eal:error", "--", "--config", path,
                        "--idle-exit-ms", "300"],
                       capture_output=True, text=True, timeout=TIMEOUT_S, cwd=tmp)
    shutil.rmtree(f"/var/run/dpdk/{prefix}", ignore_errors=True)
    return r


class EntropySprayingOnTheWire(unittest.TestCase):
    """Issue 42 on real ports: NIC A's requesters spray their UDP source ports (entropy:
    oblivious, 16 values) into a pcap uplink; NIC B (echo_entropy) answers A's capture. Every
    frame is genuine (scapy recomputes each ICRC, which covers the port); each QP's first 16
    packets use 16 distinct ports (a permutation); B acknowledges every packet, on the port of
    the packet it acknowledges."""

    QPS, PACKETS = 2, 32  # per QP: two messages of 16 packets at MTU 1024

    def port_psn(self, frame):
        ihl = (frame[14] & 0xF) * 4
        sport = struct.unpack("!H", frame[14 + ihl:14 + ihl + 2])[0]
        _, qp, psn, opcode = roce_fields(frame)
        return sport, qp, psn, opcode

    def test_ports_permuted_and_echoed(self):
        with tempfile.TemporaryDirectory(prefix="nic_emu_entropy_") as t:
            empty = os.path.join(t, "empty.pcap")
            with open(empty, "wb") as f:
                f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
            a_tx, b_tx = os.path.join(t, "a.pcap"), os.path.join(t, "b.pcap")

            def nic(name, rx, tx, engine):
                return (f"nic:\n  name: {name}\n  uplinks:\n"
                        f"    - {{name: up0, device: \"net_pcap0,rx_pcap={rx},tx_pcap={tx}\"}}\n"
                        f"  spray: {{mode: flow}}\n  rc_engine: {{{engine}}}\n")
            common = f"qps: {self.QPS}, retransmit_timeout_us: 1000000, mtu: 1024"
            a = run_nic(nic("a", empty, a_tx,
                            f"{common}, role: requester, messages: 2, message_bytes: 16384, "
                            "entropy: oblivious, entropy_values: 16"), t, "a")
            self.assertEqual(a.returncode, 0, a.stdout + a.stderr)
            b = run_nic(nic("b", a_tx, b_tx,
                            f"{common}, role: responder, local_ip: 10.0.0.2, "
                            "peer_ip: 10.0.0.1, echo_entropy: true"), t, "b")
            self.assertEqual(b.returncode, 0, b.stdout + b.stderr)
            data, acks = frames(a_tx), frames(b_tx)
            for frame in data + acks:
                self.assertTrue(icrc_ok(frame))
            by_qp = defaultdict(list)
            port_of = {}
            for frame in data:
                sport, qp, psn, _ = self.port_psn(frame)
                by_qp[qp].append(sport)
                port_of[(qp, psn)] = sport
            self.assertEqual(len(by_qp), self.QPS)
            for qp, ports in by_qp.items():
                self.assertGreaterEqual(len(ports), self.PACKETS)
                for k in range(0, 32, 16):
                    self.assertEqual(len(set(ports[k:k + 16])), 16, (hex(qp), ports[k:k + 16]))
                self.assertEqual(len({p >> 4 for p in ports}), 1)  # the QP's own upper bits
            # One ACK per data packet, each on its packet's port (the ACK's DestQP is A's QP,
            # which is B's peer: first_qp 0x11 on both sides here).
            self.assertEqual(len(acks), len(data))
            for frame in acks:
                sport, qp, psn, opcode = self.port_psn(frame)
                self.assertEqual(opcode, 0x11)  # RC ACKNOWLEDGE
                self.assertEqual(sport, port_of[(qp, psn)], (hex(qp), psn))

            # REPS on the wire: A (entropy reps) takes B's echoing ACKs back from a capture and
            # reuses the ports they carry; the report counts it.
            c_tx = os.path.join(t, "c.pcap")
            stats = os.path.join(t, "c.json")
            cfg = nic("c", b_tx, c_tx, f"{common}, role: requester, messages: 20, "
                      "message_bytes: 16384, entropy: reps, entropy_values: 16")
            path = os.path.join(t, "c.yaml")
            with open(path, "w") as f:
                f.write(cfg)
            prefix = f"nicc{os.getpid()}"
            r = subprocess.run([NIC_EMU, "--no-huge", "-m", "1024", "--no-pci", "--file-prefix",
                                prefix, "--log-level", "lib.eal:error", "--", "--config", path,
                                "--idle-exit-ms", "300", "--stats", stats],
                               capture_output=True, text=True, timeout=TIMEOUT_S, cwd=t)
            shutil.rmtree(f"/var/run/dpdk/{prefix}", ignore_errors=True)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            with open(stats) as f:
                ent = json.load(f)["rc_engine"]["entropy"]
            self.assertEqual(ent["mode"], "reps")
            self.assertTrue(ent["echo"])
            self.assertEqual(ent["values"], 16)
            reps = ent["reps"]
            # Each of B's ACKs carries a port of A's QPs with the same upper bits as C's (same
            # QP numbers, same rxe ports): every ACK that reached C's QPs was recycled, and
            # every packet was either reused or drawn.
            self.assertGreater(reps["recycled"], 0)
            self.assertGreater(reps["reused"], 0)
            sent = sum(1 for _ in frames(c_tx))
            self.assertEqual(reps["reused"] + reps["drawn"] + reps["explored"] +
                             reps["frozen_sent"], sent)
            for frame in frames(c_tx):
                self.assertTrue(icrc_ok(frame))


class ReadRequestsAndResponses(unittest.TestCase):
    """NIC A's RC engine RDMA-READs from B (op: read) over two pcap uplinks; B's RC engine
    answers the READ requests it replays from A's captures. Both captures are decoded by tshark
    and every ICRC recomputed by scapy: the READ packets are genuine RoCEv2."""

    QPS, READS, BYTES, MTU = 2, 3, 5000, 1024

    @classmethod
    def setUpClass(cls):
        cls._tmp = tempfile.TemporaryDirectory(prefix="nic_emu_read_")
        t = cls.tmp = cls._tmp.name
        empty = os.path.join(t, "empty.pcap")
        with open(empty, "wb") as f:  # a pcap without packets: A's uplinks receive nothing
            f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))

        def nic(name, rx, tx, engine):
            y = f"nic:\n  name: {name}\n  uplinks:\n"
            for i in range(2):
                y += (f"    - {{name: up{i}, device: \"net_pcap{i},rx_pcap={rx[i]},"
                      f"tx_pcap={tx[i]}\", path_id: {i + 1}}}\n")
            return y + "  spray: {mode: rr}\n  rc_engine: {" + engine + "}\n"

        cls.a_tx = [os.path.join(t, f"a{i}.pcap") for i in range(2)]
        cls.b_tx = [os.path.join(t, f"b{i}.pcap") for i in range(2)]
        common = f"qps: {cls.QPS}, retransmit_timeout_us: 1000000"
        cls.a = run_nic(nic("a", [empty, empty], cls.a_tx,
                            f"{common}, role: requester, op: read, messages: {cls.READS}, "
                            f"message_bytes: {cls.BYTES}"), t, "a")
        cls.b = run_nic(nic("b", cls.a_tx, cls.b_tx,
                            f"{common}, role: responder, local_ip: 10.0.0.2, peer_ip: 10.0.0.1"),
                        t, "b")

    @classmethod
    def tearDownClass(cls):
        cls._tmp.cleanup()

    def decode(self, paths):
        rows = []
        for path in paths:
            out = subprocess.run(
                ["tshark", "-r", path, "-T", "fields", "-E", "separator=\t", "-e", "frame.len",
                 "-e", "ip.len", "-e", "udp.length", "-e", "infiniband.bth.opcode",
                 "-e", "infiniband.bth.destqp", "-e", "infiniband.bth.psn",
                 "-e", "infiniband.reth.dmalen", "-e", "infiniband.aeth.syndrome"],
                capture_output=True, text=True, timeout=TIMEOUT_S, check=True).stdout
            rows += [line.split("\t") for line in out.splitlines()]
            for frame in frames(path):
                self.assertTrue(icrc_ok(frame), path)
        return rows

    def test_runs_are_clean(self):
        for r in (self.a, self.b):
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertIn("mempool: 0 mbufs in use at exit", r.stdout)

    def test_read_requests_carry_reth_and_consume_n_psns(self):
        rows = self.decode(self.a_tx)
        self.assertEqual(len(rows), self.QPS * self.READS)
        n = -(-self.BYTES // self.MTU)  # 5 response packets per READ
        by_qp = defaultdict(list)
        for flen, iplen, ulen, op, qp, psn, dmalen, _ in rows:
            self.assertEqual(int(op), 12)  # RC RDMA READ REQUEST
            self.assertEqual(int(dmalen), self.BYTES)
            self.assertEqual(int(iplen), 20 + 8 + 12 + 16 + 4)  # IP, UDP, BTH, RETH, ICRC
            self.assertEqual(int(ulen), int(iplen) - 20)
            by_qp[int(qp, 0)].append(int(psn))
        for qp, psns in by_qp.items():
            self.assertEqual(sorted(psns), [k * n for k in range(self.READS)], qp)

    def test_read_responses_first_middle_last_with_aeth_and_payload(self):
        rows = self.decode(self.b_tx)
        n = -(-self.BYTES // self.MTU)
        self.assertEqual(len(rows), self.QPS * self.READS * n)
        by_qp = defaultdict(dict)
        for flen, iplen, ulen, op, qp, psn, _, syndrome in rows:
            by_qp[int(qp, 0)][int(psn)] = (int(op), int(iplen), syndrome)
        for qp, by_psn in by_qp.items():
            self.assertEqual(sorted(by_psn), list(range(self.READS * n)), qp)
            for psn, (op, iplen, syndrome) in by_psn.items():
                k = psn % n
                want = 13 if k == 0 else 15 if k == n - 1 else 14  # FIRST, LAST, MIDDLE
                self.assertEqual(op, want, (qp, psn))
                payload = self.BYTES - (n - 1) * self.MTU if k == n - 1 else self.MTU
                aeth = 0 if op == 14 else 4
                pad = (4 - payload % 4) % 4
                self.assertEqual(iplen, 20 + 8 + 12 + aeth + payload + pad + 4, (qp, psn))
                if aeth:
                    self.assertEqual(int(syndrome, 0), 0x1F)  # ACK, unlimited credits


class SprayAndReorder(unittest.TestCase):
    UPLINKS = 4

    @classmethod
    def setUpClass(cls):
        cls._tmp = tempfile.TemporaryDirectory(prefix="nic_emu_test_")
        cls.tmp = cls._tmp.name
        cls.in_pcap = os.path.join(cls.tmp, "in.pcap")
        g = run(ROCE_PCAP, "--out", cls.in_pcap, "--qps", "4", "--messages", "12",
                "--msg-bytes", "65536", "--mtu", "1024", "--psn-start", "0xFFFF00")
        assert g.returncode == 0, g.stderr
        cls.outdir = os.path.join(cls.tmp, "out")
        cls.spray = run(SPRAY, cls.in_pcap, cls.outdir, "--uplinks", str(cls.UPLINKS),
                        "--mode", "rr")
        cls.delivered = os.path.join(cls.tmp, "delivered.pcap")
        cls.reorder = run(REORDER, cls.outdir, cls.delivered)
        cls.input = frames(cls.in_pcap)

    @classmethod
    def tearDownClass(cls):
        cls._tmp.cleanup()

    def test_spray_run_is_clean(self):
        self.assertEqual(self.spray.returncode, 0, self.spray.stdout + self.spray.stderr)
        self.assertIn("mempool: 0 mbufs in use at exit", self.spray.stdout)
        with open(os.path.join(self.outdir, "spray-stats.json")) as f:
            st = json.load(f)
        self.assertEqual(st["drops"]["total"], 0)
        self.assertEqual(st["spray"]["ppcid_written"], len(self.input))

    def test_every_uplink_holds_genuine_roce_whose_ppcid_names_its_path(self):
        per_uplink = []
        for k in range(self.UPLINKS):
            fs = frames(os.path.join(self.outdir, f"uplink{k}.pcap"))
            per_uplink.append(len(fs))
            for f in fs:
                self.assertTrue(icrc_ok(f), f"uplink{k}: ICRC")
                csum, qp, psn, _ = roce_fields(f)
                self.assertNotEqual(csum, 0, f"uplink{k}: PPCID 0")
                # ts-high: bits 7-4 path id, 3-0 check nibble of DestQP ^ PSN.
                self.assertEqual((csum >> 4) & 0xF, k + 1, f"uplink{k}: path id of 0x{csum:04x}")
                self.assertEqual(csum & 0xF, check_nibble(qp, psn))
        total = sum(per_uplink)
        self.assertEqual(total, len(self.input), "every packet left by one uplink")
        for k, n in enumerate(per_uplink):
            self.assertLessEqual(abs(n - total / self.UPLINKS), 0.02 * total / self.UPLINKS,
                                 f"uplink{k}: {n} of {total}")

    def test_tshark_decodes_the_uplink_packets_as_roce(self):
        out = subprocess.run(["tshark", "-r", os.path.join(self.outdir, "uplink0.pcap"), "-T",
                              "fields", "-e", "infiniband.bth.opcode", "-e",
                              "infiniband.bth.destqp", "-e", "udp.checksum"],
                             check=True, capture_output=True, text=True, timeout=60).stdout
        rows = [line.split("\t") for line in out.splitlines()]
        self.assertGreater(len(rows), 0)
        for opcode, qp, csum in rows:
            self.assertIn(int(opcode), (6, 7, 8, 10))
            self.assertNotEqual(int(csum, 16), 0)

    def test_receiving_nic_delivers_every_qp_in_psn_order_checksum_0_valid_icrc(self):
        self.assertEqual(self.reorder.returncode, 0, self.reorder.stdout + self.reorder.stderr)
        self.assertIn("mempool: 0 mbufs in use at exit", self.reorder.stdout)
        out = frames(self.delivered)
        self.assertEqual(len(out), len(self.input))
        by_qp_in, by_qp_out = defaultdict(list), defaultdict(list)
        for f in self.input:
            by_qp_in[roce_fields(f)[1]].append(f)
        for f in out:
            csum, qp, psn, _ = roce_fields(f)
            self.assertEqual(csum, 0, "UDP checksum restored to 0")
            self.assertTrue(icrc_ok(f), "ICRC")
            by_qp_out[qp].append(f)
        self.assertEqual(sorted(by_qp_out), sorted(by_qp_in))
        for qp in by_qp_in:
            # The capture started at PSN 0xFFFF00: the order crosses the 2^24 wrap.
            psns = [roce_fields(f)[2] for f in by_qp_out[qp]]
            self.assertTrue(all((b - a) & 0xFFFFFF == 1 for a, b in zip(psns, psns[1:])),
                            f"QP 0x{qp:x} out of PSN order")
            # And byte for byte what the host sent: the NICs changed nothing else.
            self.assertEqual(by_qp_out[qp], by_qp_in[qp], f"QP 0x{qp:x}")
        with open(os.path.join(self.outdir, "reorder-stats.json")) as f:
            st = json.load(f)
        self.assertEqual(st["ppcid"]["ok"], len(self.input))
        self.assertEqual(st["ppcid"]["wrong_uplink"], 0)
        self.assertEqual(st["reorder"]["gap_timeouts"], 0)
        self.assertEqual(len(st["heat_map"]["qps"]), 4)
        for q in st["heat_map"]["qps"]:
            self.assertTrue(all(v > 0 for v in q["per_uplink"]), q)

    def test_layout_mismatch_is_counted_and_named(self):
        # Its own copy of the uplink pcaps: the script writes its stats next to them.
        mdir = os.path.join(self.tmp, "mismatch")
        os.makedirs(mdir)
        for k in range(self.UPLINKS):
            shutil.copy(os.path.join(self.outdir, f"uplink{k}.pcap"), mdir)
        r = run(REORDER, mdir, os.path.join(self.tmp, "mismatch.pcap"), "--layout", "path-high")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        with open(os.path.join(mdir, "reorder-stats.json")) as f:
            st = json.load(f)
        self.assertGreater(st["ppcid"]["layout_mismatch"], 0)
        self.assertEqual(len(frames(os.path.join(self.tmp, "mismatch.pcap"))), len(self.input),
                         "a mismatch is counted, never dropped")
        self.assertRegex(r.stdout + r.stderr, r"likely uses ppcid_layout ts-high")


class CommandLine(unittest.TestCase):
    def test_every_example_nic_config_runs_cleanly(self):
        configs = sorted(glob.glob(os.path.join(ROOT, "configs", "nic-*.yaml")))
        self.assertTrue(configs)
        for path in configs:
            name = os.path.basename(path)
            with tempfile.TemporaryDirectory() as cwd:
                with open(path) as f:
                    text = f.read()
                # Inputs the config reads (rx_pcap=...), relative to where nic_emu runs.
                for rel in re.findall(r"rx_pcap=([^,\"]+)", text):
                    os.makedirs(os.path.join(cwd, os.path.dirname(rel)), exist_ok=True)
                    g = run(ROCE_PCAP, "--out", os.path.join(cwd, rel), "--qps", "2",
                            "--messages", "2")
                    self.assertEqual(g.returncode, 0, g.stderr)
                for rel in re.findall(r"tx_pcap=([^,\"]+)", text):
                    os.makedirs(os.path.join(cwd, os.path.dirname(rel)), exist_ok=True)
                prefix = f"niccfg{os.getpid()}"
                r = subprocess.run([NIC_EMU, "--no-huge", "-m", "1024", "--no-pci",
                                    "--file-prefix", prefix, "--log-level", "lib.eal:error", "--",
                                    "--config", path, "--idle-exit-ms", "300"],
                                   capture_output=True, text=True, timeout=TIMEOUT_S, cwd=cwd)
                shutil.rmtree(f"/var/run/dpdk/{prefix}", ignore_errors=True)
                self.assertEqual(r.returncode, 0, f"{name}:\n{r.stdout}\n{r.stderr}")
                self.assertIn("mempool: 0 mbufs in use at exit", r.stdout, name)


    def test_help_without_eal_lists_every_config_key(self):
        r = run(NIC_EMU, "--help")
        self.assertEqual(r.returncode, 0, r.stderr)
        for key in ("--config", "--stats", "--idle-exit-ms", "uplinks", "path_id", "spray",
                    "ppcid_layout", "reorder", "hold_timeout_us", "window", "max_qps",
                    "rc_engine", "max_in_flight", "retransmit_timeout_us"):
            self.assertIn(key, r.stdout)

    def test_config_error_exits_2_naming_file_and_key(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "bad.yaml")
            with open(path, "w") as f:
                f.write("nic:\n  uplinks:\n    - {name: a, device: net_null0}\n"
                        "  spray: {mode: sideways}\n")
            r = run(NIC_EMU, "--no-huge", "-m", "256", "--no-pci", "--file-prefix",
                    f"nicbad{os.getpid()}", "--", "--config", path)
            shutil.rmtree(f"/var/run/dpdk/nicbad{os.getpid()}", ignore_errors=True)
            self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
            self.assertIn(f"{path}: nic.spray.mode:", r.stderr)
            self.assertIn("rr", r.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
