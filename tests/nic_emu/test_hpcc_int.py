"""HPCC's in-band telemetry on captures, end to end through the real programs on pcap ports,
checked byte by byte here against the INT-MD spec (P4.org INT v2.1, dataplane/wire/int_header.h)
and by scapy's own ICRC; then the same packets through a CONGA leaf, whose uplinks push their
record on the inner packet's INT inside the VXLAN overlay.

A (nic_emu requester, cc hpcc) sends RDMA WRITEs with an empty INT stack: UDP port 4792, the shim
(type INT-MD, NPT 1, the original port 4791), the INT-MD header (version 2, 6 words per hop,
Remaining Hop Count 5, HPCC's instruction bits). A switch_emu with an `int:` block on a 100 Gbit/s
link pushes one record on each (queue, depth, egress time, bytes sent before it, line rate): the
byte counter of each record is the sum of the frames before it on the wire. B (nic_emu responder,
cc hpcc) strips the INT, and its ACKs, on UDP 4793, carry the same record back. A2 (the requester
again) reads B's ACKs: each echo goes to a QP's HPCC. Every frame, with its INT taken off here,
has the ICRC scapy computes and a valid IPv4 checksum; the tshark dissector
(tools/wireshark/spraynet.lua) decodes the records as read here."""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest

from scapy.all import Ether, rdpcap  # noqa: E402
from scapy.contrib.roce import BTH  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from capture_checks import (icrc_ok, ip_ok, ipv4_checksum, run_dpdk,  # noqa: E402
                            run_with_config)

ROOT = os.environ.get("SPRAYNET_SOURCE_DIR",
                      os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
NIC_EMU = os.environ.get("NIC_EMU", os.path.join(ROOT, "build", "nic_emu", "nic_emu"))
SWITCH_EMU = os.environ.get("SWITCH_EMU", os.path.join(ROOT, "build", "switch_emu", "switch_emu"))
LUA = os.path.join(ROOT, "tools", "wireshark", "spraynet.lua")
TIMEOUT_S = 120
QPS, MESSAGES, BYTES, MTU = 2, 2, 4096, 1024
PACKETS = QPS * MESSAGES * (BYTES // MTU)
REQ_QP, RESP_QP = 0x40, 0x11
INT_PORT, ECHO_PORT = 4792, 4793
HOP_BYTES = 24


def run_nic(tmp, name, rx, tx, engine):
    return run_with_config(
        NIC_EMU, tmp, name,
        f"nic:\n  name: {name}\n  uplinks:\n"
        f"    - {{name: up0, device: \"net_pcap0,rx_pcap={rx},tx_pcap={tx}\", path_id: 1}}\n"
        "  spray: {mode: flow}\n  receive: none\n"
        f"  rc_engine: {{{engine}}}\n  cc: {{mode: hpcc}}\n",
        f"hpccint{name}{os.getpid()}")


def parse_int(frame):
    """The INT of an untagged IPv4/UDP frame, read per the spec: (port, header fields, records
    newest first, the frame with the INT taken off). None when the frame carries none."""
    ihl = (frame[14] & 0xF) * 4
    udp = 14 + ihl
    dport = struct.unpack_from("!H", frame, udp + 2)[0]
    if dport not in (INT_PORT, ECHO_PORT):
        return None
    s = udp + 8
    t, length, orig = frame[s] >> 4, frame[s + 1], struct.unpack_from("!H", frame, s + 2)[0]
    npt = (frame[s] >> 2) & 3
    md = s + 4
    h = {"type": t, "npt": npt, "length": length, "orig": orig, "version": frame[md] >> 4,
         "e": (frame[md] >> 2) & 1, "m": (frame[md] >> 1) & 1, "hop_ml": frame[md + 2] & 0x1F,
         "rhc": frame[md + 3], "bitmap": struct.unpack_from("!H", frame, md + 4)[0],
         "domain": struct.unpack_from("!H", frame, md + 6)[0],
         "ds_instr": struct.unpack_from("!H", frame, md + 8)[0],
         "ds_flags": struct.unpack_from("!H", frame, md + 10)[0]}
    n = (length * 4 - 12) // HOP_BYTES
    records = []
    for i in range(n):
        r = md + 12 + i * HOP_BYTES
        qid, cells = frame[r], int.from_bytes(frame[r + 1:r + 4], "big")
        ts, txb, rate = struct.unpack_from("!QQI", frame, r + 4)
        records.append({"queue": qid, "qlen": cells * 80, "ts": ts, "tx_bytes": txb,
                        "rate_mbps": rate})
    int_bytes = 4 + length * 4
    # Off again: the UDP header moves back, the original port and both lengths are restored.
    plain = bytearray(frame[:s]) + frame[s + int_bytes:]
    struct.pack_into("!H", plain, udp + 2, orig)
    ulen = struct.unpack_from("!H", frame, udp + 4)[0] - int_bytes
    struct.pack_into("!H", plain, udp + 4, ulen)
    tot = struct.unpack_from("!H", frame, 16)[0] - int_bytes
    struct.pack_into("!H", plain, 16, tot)
    struct.pack_into("!H", plain, 24, 0)
    struct.pack_into("!H", plain, 24, ipv4_checksum(plain[14:14 + ihl]))
    return dport, h, records, bytes(plain)


def bth(frame):
    p = Ether(frame)[BTH]
    return p.opcode, p.dqpn, p.psn


class HpccIntOnCaptures(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls._tmp = tempfile.TemporaryDirectory(prefix="hpcc_int_")
        t = cls.tmp = cls._tmp.name
        empty = os.path.join(t, "empty.pcap")
        with open(empty, "wb") as f:
            f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        requester = (f"qps: {QPS}, role: requester, first_qp: {REQ_QP}, "
                     f"peer_first_qp: {RESP_QP}, messages: {MESSAGES}, message_bytes: {BYTES}, "
                     f"mtu: {MTU}, local_ip: 10.0.0.1, peer_ip: 10.0.0.2, "
                     "retransmit_timeout_us: 1000000")
        responder = (f"qps: {QPS}, role: responder, first_qp: {RESP_QP}, "
                     f"peer_first_qp: {REQ_QP}, local_ip: 10.0.0.2, peer_ip: 10.0.0.1, "
                     f"mtu: {MTU}")
        cls.a_pcap = os.path.join(t, "a.pcap")
        cls.a = run_nic(t, "a", empty, cls.a_pcap, requester)
        cls.s_pcap = os.path.join(t, "s.pcap")
        sw = os.path.join(t, "sw.yaml")
        with open(sw, "w") as f:
            f.write(f"""ports:
  - {{name: in, device: "net_pcap0,rx_pcap={cls.a_pcap}"}}
  - {{name: out, device: "net_pcap1,tx_pcap={cls.s_pcap}", link: {{rate_gbps: 100}}}}
routes:
  - {{prefix: 10.0.0.0/8, port: out}}
int: {{}}
""")
        cls.sw_stats = os.path.join(t, "sw-stats.json")
        cls.sw = run_dpdk([SWITCH_EMU, "--config", sw, "--idle-exit-ms", "300", "--stats",
                      cls.sw_stats], t, f"hpccintsw{os.getpid()}")
        # A CONGA leaf with INT on: it wraps A's packets in its VXLAN overlay for leaf 1 and its
        # uplink pushes the record on the inner packet's INT.
        cls.u_pcaps = [os.path.join(t, f"u{k}.pcap") for k in range(2)]
        leaf = os.path.join(t, "leaf.yaml")
        with open(leaf, "w") as f:
            f.write(f"""name: leaf0
ports:
  - {{name: h0, device: "net_pcap0,rx_pcap={cls.a_pcap}"}}
  - {{name: u0, device: "net_pcap1,tx_pcap={cls.u_pcaps[0]}", link: {{rate_gbps: 100}}}}
  - {{name: u1, device: "net_pcap2,tx_pcap={cls.u_pcaps[1]}", link: {{rate_gbps: 100}}}}
groups:
  - {{name: to_leaf1, mode: conga, leaf: 1, ports: [u0, u1], dlb_gap_ns: 10000000000}}
routes:
  - {{prefix: 10.0.0.1/32, port: h0}}
  - {{prefix: 10.0.0.2/32, group: to_leaf1}}
conga:
  leaf: 0
  vtep: 10.0.0.255
  leaves: [{{leaf: 1, vtep: 10.0.1.255}}]
int: {{}}
""")
        cls.leaf_stats = os.path.join(t, "leaf-stats.json")
        cls.leaf = run_dpdk([SWITCH_EMU, "--config", leaf, "--idle-exit-ms", "300", "--stats",
                             cls.leaf_stats], t, f"hpccintleaf{os.getpid()}")
        cls.b_pcap = os.path.join(t, "b.pcap")
        cls.b = run_nic(t, "b", cls.s_pcap, cls.b_pcap, responder)
        cls.a2 = run_nic(t, "a2", cls.b_pcap, os.path.join(t, "a2.pcap"), requester)

    @classmethod
    def tearDownClass(cls):
        cls._tmp.cleanup()

    def test_programs_ran_clean(self):
        for name, (r, st) in (("a", self.a), ("b", self.b), ("a2", self.a2)):
            self.assertEqual(r.returncode, 0, name + r.stdout + r.stderr)
            self.assertIn("mempool: 0 mbufs in use at exit", r.stdout, name)
            self.assertIsNotNone(st, name)
        self.assertEqual(self.sw.returncode, 0, self.sw.stdout + self.sw.stderr)
        self.assertIn("mempool: 0 mbufs in use at exit", self.sw.stdout)

    def test_the_sender_inserts_an_empty_stack_on_every_write(self):
        frames = [bytes(p) for p in rdpcap(self.a_pcap)]
        self.assertEqual(len(frames), PACKETS)
        for f in frames:
            port, h, records, plain = parse_int(f)
            self.assertEqual(port, INT_PORT)
            self.assertEqual((h["type"], h["npt"], h["orig"], h["length"]), (1, 1, 4791, 3))
            self.assertEqual((h["version"], h["hop_ml"], h["rhc"], h["e"], h["m"]),
                             (2, 6, 5, 0, 0))
            self.assertEqual((h["bitmap"], h["domain"], h["ds_instr"], h["ds_flags"]),
                             (0x1400, 0x4850, 0xC000, 0))
            self.assertEqual(records, [])
            self.assertTrue(ip_ok(f))
            self.assertTrue(icrc_ok(plain))
            self.assertIn(bth(plain)[0], (6, 7, 8, 10))  # WRITE first, middle, last, only
        self.assertEqual(self.a[1]["counters"]["int_inserted"], PACKETS)

    def test_the_switch_pushes_one_record_whose_counters_add_up(self):
        frames = [bytes(p) for p in rdpcap(self.s_pcap)]
        self.assertEqual(len(frames), PACKETS)
        sent = 0
        last_ts = 0
        for f in frames:
            port, h, records, plain = parse_int(f)
            self.assertEqual(port, INT_PORT)
            self.assertEqual((h["length"], h["rhc"], h["e"], h["m"]), (3 + 6, 4, 0, 0))
            (r,) = records
            self.assertEqual(r["rate_mbps"], 100_000)
            self.assertLess(r["queue"], 8)
            self.assertEqual(r["tx_bytes"], sent)  # the port's bytes before this frame
            self.assertGreaterEqual(r["ts"], last_ts)
            self.assertEqual(r["qlen"] % 80, 0)
            last_ts = r["ts"]
            sent += len(f)  # the frame as sent, its record included (ns-3: p->GetSize())
            self.assertTrue(ip_ok(f))
            self.assertTrue(icrc_ok(plain))
        with open(self.sw_stats) as f:
            ports = {p["name"]: p for p in json.load(f)["ports"]}
        self.assertEqual(ports["out"]["int"], {"records_pushed": PACKETS, "hops_exceeded": 0,
                                               "mtu_exceeded": 0})
        self.assertNotIn("int", ports["in"])

    def test_the_receiver_echoes_the_records_in_its_acks(self):
        data = {}
        for p in rdpcap(self.s_pcap):
            _, _, records, plain = parse_int(bytes(p))
            _, qp, psn = bth(plain)
            data[(qp, psn)] = records
        acks = [bytes(p) for p in rdpcap(self.b_pcap)]
        self.assertEqual(len(acks), PACKETS)  # HPCC acknowledges every packet
        for f in acks:
            port, h, records, plain = parse_int(f)
            self.assertEqual(port, ECHO_PORT)
            self.assertEqual((h["type"], h["npt"], h["orig"], h["version"], h["rhc"]),
                             (1, 1, 4791, 2, 0))
            opcode, qp, psn = bth(plain)
            self.assertEqual(opcode, 0x11)
            self.assertIn(qp, (REQ_QP, REQ_QP + 1))
            # The ACK for (requester QP, PSN) answers the data packet to the peer responder QP.
            self.assertEqual(records, data[(qp - REQ_QP + RESP_QP, psn)])
            self.assertTrue(ip_ok(f))
            self.assertTrue(icrc_ok(plain))
        c = self.b[1]["counters"]
        self.assertEqual((c["int_stripped"], c["int_echoed"]), (PACKETS, PACKETS))
        self.assertEqual(self.b[1]["drops"].get("int_malformed", 0), 0)

    def test_the_sender_hands_each_echo_to_hpcc(self):
        c = self.a2[1]["counters"]
        self.assertEqual(c["int_stripped"], PACKETS)
        self.assertEqual(c["int_acks_received"], PACKETS)

    def test_a_conga_leaf_pushes_on_the_inner_packets_int(self):
        self.assertEqual(self.leaf.returncode, 0, self.leaf.stdout + self.leaf.stderr)
        self.assertIn("mempool: 0 mbufs in use at exit", self.leaf.stdout)
        sent = {}
        for k, path in enumerate(self.u_pcaps):
            frames = [bytes(p) for p in rdpcap(path)] if os.path.getsize(path) > 24 else []
            sent[k] = len(frames)
            on_wire = 0
            for f in frames:
                # The overlay: outer IPv4 (checksum valid, lengths of this frame), UDP to 4789
                # with checksum 0, VXLAN flags I and C; then the frame A sent, one record more.
                self.assertEqual(struct.unpack_from("!H", f, 12)[0], 0x0800)
                self.assertTrue(ip_ok(f))
                self.assertEqual(struct.unpack_from("!H", f, 16)[0], len(f) - 14)
                dport, ulen, ucsum = struct.unpack_from("!HHH", f, 36)
                self.assertEqual((dport, ulen, ucsum), (4789, len(f) - 34, 0))
                self.assertEqual(f[42], 0x48)
                inner = f[50:]
                port, h, records, plain = parse_int(inner)
                self.assertEqual(port, INT_PORT)
                self.assertEqual((h["length"], h["rhc"], h["e"], h["m"]), (3 + 6, 4, 0, 0))
                (r,) = records
                self.assertEqual(r["rate_mbps"], 100_000)
                self.assertEqual(r["tx_bytes"], on_wire)  # this uplink's bytes before it
                on_wire += len(f)
                self.assertTrue(ip_ok(inner))
                self.assertTrue(icrc_ok(plain))
        self.assertEqual(sum(sent.values()), PACKETS)
        with open(self.leaf_stats) as f:
            st = json.load(f)
        ports = {p["name"]: p for p in st["ports"]}
        pushed = sum(ports[u].get("int", {}).get("records_pushed", 0) for u in ("u0", "u1"))
        self.assertEqual(pushed, PACKETS)
        self.assertEqual(st["conga"]["encapsulated"], PACKETS)

    def test_the_dissector_decodes_the_records(self):
        if shutil.which("tshark") is None:
            self.skipTest("tshark is not installed")
        home = tempfile.mkdtemp(prefix="wireshark_home_", dir=self.tmp)
        out = subprocess.run(
            ["tshark", "-X", f"lua_script:{LUA}", "-r", self.s_pcap, "-T", "fields",
             "-E", "separator=\t", "-E", "occurrence=a", "-E", "aggregator=,",
             "-e", "spraynet.int.rhc", "-e", "spraynet.int.hop.line_rate",
             "-e", "spraynet.int.hop.tx_bytes", "-e", "spraynet.int.hop.egress_ts",
             "-e", "infiniband.bth.destqp", "-e", "infiniband.bth.psn"],
            capture_output=True, text=True, timeout=TIMEOUT_S, env=dict(os.environ, HOME=home))
        self.assertEqual(out.returncode, 0, out.stderr)
        rows = [line.split("\t") for line in out.stdout.splitlines()]
        if rows and rows[0][0] == "":
            self.skipTest("tshark ran no Lua scripts here")
        frames = [bytes(p) for p in rdpcap(self.s_pcap)]
        self.assertEqual(len(rows), len(frames))
        for row, f in zip(rows, frames):
            _, h, records, plain = parse_int(f)
            _, qp, psn = bth(plain)
            self.assertEqual(int(row[0]), h["rhc"])
            self.assertEqual(int(row[1]), records[0]["rate_mbps"])
            self.assertEqual(int(row[2]), records[0]["tx_bytes"])
            self.assertEqual(int(row[3]), records[0]["ts"])
            # The RoCE packet after the INT is Wireshark's own InfiniBand dissection.
            self.assertEqual((int(row[4], 0), int(row[5])), (qp, psn))
        # Inside the CONGA leaf's overlay: the CONGA fields, then the inner packet's INT.
        for path in self.u_pcaps:
            if os.path.getsize(path) <= 24:
                continue
            out = subprocess.run(
                ["tshark", "-X", f"lua_script:{LUA}", "-r", path, "-T", "fields",
                 "-E", "separator=\t", "-e", "spraynet.conga.src_leaf", "-e", "spraynet.int.rhc",
                 "-e", "spraynet.int.hop.tx_bytes", "-e", "infiniband.bth.psn"],
                capture_output=True, text=True, timeout=TIMEOUT_S, env=dict(os.environ, HOME=home))
            self.assertEqual(out.returncode, 0, out.stderr)
            frames = [bytes(p) for p in rdpcap(path)]
            rows = [line.split("\t") for line in out.stdout.splitlines()]
            self.assertEqual(len(rows), len(frames))
            for row, f in zip(rows, frames):
                _, h, records, plain = parse_int(f[50:])
                self.assertEqual((int(row[0]), int(row[1]), int(row[2]), int(row[3])),
                                 (0, h["rhc"], records[0]["tx_bytes"], bth(plain)[2]))


if __name__ == "__main__":
    unittest.main()
