#!/usr/bin/python3
"""roce_pcap output checked by independent tools: tshark decodes every packet as RoCEv2 with the
expected infiniband.bth fields, and scapy's contrib roce layer confirms every packet's ICRC.

Run by meson with ROCE_PCAP pointing at the built program. Uses Debian's /usr/bin/python3,
where python3-scapy lives."""
import os
import struct
import subprocess
import sys
import tempfile
import unittest
from collections import defaultdict

from scapy.all import Ether, IP, UDP, rdpcap, raw  # noqa: E402
from scapy.contrib.roce import BTH  # noqa: E402

ROCE_PCAP = os.environ.get("ROCE_PCAP", "roce_pcap")
FIELDS = ["frame.len", "ip.src", "ip.dst", "ip.flags.df", "udp.srcport", "udp.dstport",
          "udp.checksum", "infiniband.bth.opcode", "infiniband.bth.destqp", "infiniband.bth.psn",
          "infiniband.bth.a", "infiniband.bth.padcnt", "infiniband.bth.p_key",
          "infiniband.reth.dmalen"]
OP_FIRST, OP_MIDDLE, OP_LAST, OP_ONLY = 6, 7, 8, 10

# The DESIGN.md ICRC test vector, to prove the checker itself can tell right from wrong.
VECTOR = bytes.fromhex(
    "020000000002020000000001" "0800"
    "4500005c12344000401114 5b0a0000010a000002".replace(" ", "")
    + "c12312b700480000" + "0a00ffff0000001180000100"
    + "00007f00000010001234abcd00000020") + bytes(range(32)) + bytes.fromhex("ef665540")


def icrc_ok(frame: bytes) -> bool:
    pkt = Ether(frame)
    return pkt[BTH].compute_icrc(None) == frame[-4:]


def tshark(path):
    cmd = ["tshark", "-r", path, "-T", "fields", "-E", "separator=\t"]
    for f in FIELDS:
        cmd += ["-e", f]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    rows = []
    for line in out.splitlines():
        vals = line.split("\t")
        rows.append(dict(zip(FIELDS, vals)))
    return rows


def run_roce_pcap(*args):
    return subprocess.run([ROCE_PCAP, *args], capture_output=True, text=True)


class ScapyChecker(unittest.TestCase):
    def test_vector_icrc_accepted_and_corruption_caught(self):
        self.assertTrue(icrc_ok(VECTOR))
        bad = bytearray(VECTOR)
        bad[-10] ^= 0x01
        self.assertFalse(icrc_ok(bytes(bad)))


class RocePcap(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def generate(self, *args):
        path = os.path.join(self.tmp.name, "out.pcap")
        r = run_roce_pcap("--out", path, *args)
        self.assertEqual(r.returncode, 0, r.stderr)
        return path

    def check_stream(self, path, qps, messages, msg_bytes, mtu, psn_start=None):
        rows = tshark(path)
        per_msg = max(1, -(-msg_bytes // mtu))
        self.assertEqual(len(rows), qps * messages * per_msg)
        by_qp = defaultdict(list)
        for r in rows:
            self.assertEqual(r["udp.dstport"], "4791")
            self.assertEqual(r["ip.flags.df"], "1")
            self.assertEqual(int(r["udp.checksum"], 16), 0)
            self.assertEqual(int(r["infiniband.bth.p_key"]), 0xFFFF)
            by_qp[int(r["infiniband.bth.destqp"], 16)].append(r)
        self.assertEqual(len(by_qp), qps)
        sports = set()
        for qpn, pkts in by_qp.items():
            ports = {int(p["udp.srcport"]) for p in pkts}
            self.assertEqual(len(ports), 1, f"QP {qpn:#x} uses one UDP source port")
            port = ports.pop()
            self.assertTrue(0xC000 <= port <= 0xFFFF)
            sports.add(port)
            psns = [int(p["infiniband.bth.psn"]) for p in pkts]
            if psn_start is not None:
                self.assertEqual(psns[0], psn_start)
            for a, b in zip(psns, psns[1:]):
                self.assertEqual(b, (a + 1) % (1 << 24), "consecutive PSNs modulo 2^24")
            for m in range(messages):
                msg = pkts[m * per_msg:(m + 1) * per_msg]
                ops = [int(p["infiniband.bth.opcode"]) for p in msg]
                if per_msg == 1:
                    self.assertEqual(ops, [OP_ONLY])
                else:
                    self.assertEqual(ops, [OP_FIRST] + [OP_MIDDLE] * (per_msg - 2) + [OP_LAST])
                acks = [p["infiniband.bth.a"] for p in msg]
                self.assertEqual(acks, ["0"] * (per_msg - 1) + ["1"], "AckReq on the last only")
                self.assertEqual(int(msg[0]["infiniband.reth.dmalen"]), msg_bytes)
                for p in msg[1:]:
                    self.assertEqual(p["infiniband.reth.dmalen"], "", "RETH only on FIRST/ONLY")
                # Pad count makes payload a multiple of 4; only the last packet can need one.
                last_len = msg_bytes - (per_msg - 1) * mtu
                self.assertEqual(int(msg[-1]["infiniband.bth.padcnt"]), (4 - last_len % 4) % 4)
        return rows

    def check_icrc_everywhere(self, path):
        pkts = rdpcap(path)
        self.assertGreater(len(pkts), 0)
        for i, p in enumerate(pkts):
            self.assertIn(BTH, p)
            self.assertTrue(icrc_ok(raw(p)), f"packet {i}: ICRC")
            fresh = IP(raw(p[IP]))
            del fresh.chksum  # scapy recomputes it on build
            self.assertEqual(p[IP].chksum, IP(raw(fresh)).chksum, f"packet {i}: IP checksum")

    def test_multi_packet_messages_across_psn_wrap(self):
        path = self.generate("--qps", "4", "--messages", "3", "--msg-bytes", "10001",
                             "--mtu", "1024", "--psn-start", str(0xFFFFF8), "--seed", "9")
        self.check_stream(path, 4, 3, 10001, 1024, psn_start=0xFFFFF8)
        self.check_icrc_everywhere(path)

    def test_mtu_4096_and_write_only(self):
        path = self.generate("--qps", "2", "--messages", "5", "--msg-bytes", "4096",
                             "--mtu", "4096")
        self.check_stream(path, 2, 5, 4096, 4096)
        self.check_icrc_everywhere(path)
        path = self.generate("--qps", "3", "--messages", "2", "--msg-bytes", "8194",
                             "--mtu", "4096")
        self.check_stream(path, 3, 2, 8194, 4096)
        self.check_icrc_everywhere(path)

    def test_seed_is_reproducible_and_changes_traffic(self):
        def content(*args):
            with open(self.generate(*args), "rb") as f:
                return f.read()
        a = content("--qps", "2", "--seed", "3")
        b = content("--qps", "2", "--seed", "3")
        c = content("--qps", "2", "--seed", "4")
        self.assertEqual(a, b)
        self.assertNotEqual(a, c)

    def test_microsecond_pcap_for_pktgen_holds_the_same_frames(self):
        # Pktgen-DPDK reads only the classic magic; the frames must be the same as in ns.
        ns = self.generate("--qps", "3", "--messages", "2", "--gbps", "0.1")
        us = os.path.join(self.tmp.name, "us.pcap")
        r = run_roce_pcap("--out", us, "--qps", "3", "--messages", "2", "--gbps", "0.1",
                          "--timestamps", "us")
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(ns, "rb") as f:
            self.assertEqual(struct.unpack("<I", f.read(4))[0], 0xA1B23C4D)
        with open(us, "rb") as f:
            self.assertEqual(struct.unpack("<I", f.read(4))[0], 0xA1B2C3D4)
        a, b = rdpcap(ns), rdpcap(us)
        self.assertEqual([raw(p) for p in a], [raw(p) for p in b])
        # Times truncated to the microsecond, not rescaled.
        for pa, pb in zip(a, b):
            self.assertEqual(int(pb.time * 1000000), int(pa.time * 1000000))
        r = run_roce_pcap("--out", us, "--timestamps", "ms")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--timestamps", r.stderr)

    def test_bad_arguments_are_refused_clearly(self):
        out = os.path.join(self.tmp.name, "x.pcap")
        for args, needle in [(["--mtu", "1500"], "--mtu"), (["--qps", "0"], "--qps"),
                             (["--psn-start", str(1 << 24)], "--psn-start"),
                             (["--src-ip", "10.0.0.300"], "--src-ip"), ([], "--out")]:
            r = run_roce_pcap(*(["--out", out] if args else []), *args)
            self.assertNotEqual(r.returncode, 0, args)
            self.assertIn(needle, r.stderr + r.stdout, args)
        r = run_roce_pcap("--out", "/nonexistent-dir/x.pcap")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("/nonexistent-dir/x.pcap", r.stderr)


if __name__ == "__main__":
    res = unittest.main(exit=False, verbosity=2).result
    sys.exit(0 if res.wasSuccessful() else 1)
