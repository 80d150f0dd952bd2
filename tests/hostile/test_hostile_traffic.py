#!/usr/bin/python3
"""The hostile-traffic suite: captures of what should never arrive, and of what arrives on RoCE
fabrics that naive parsers get wrong, fed through the real programs on net_pcap ports, the way
users run them (scripts/switch-pcap.sh, spray-pcap.sh, reorder-pcap.sh):

  truncated and runt frames, 9216-byte jumbo frames (RoCE fabrics run 9216-byte MTUs:
  forwarded, chained over mbufs), VLAN and QinQ tags, IPv6, IPv4 options and fragments,
  wrong IP and UDP lengths, bad IPv4 checksums, bad ICRCs, unknown BTH opcodes, PFC frames with
  bogus class vectors and quanta, 802.3x PAUSE, a flood of one QP, and PSN jumps of 2^23.

Each program must keep running to the end of its input, count every class under its own
counter, forward nothing it corrupted (each frame out is a frame in, with only the rewrites
the program is there to make), and end with every mbuf back in its pool. Frames are built by
hand (struct) and checked with scapy; Debian's /usr/bin/python3 has scapy."""
import json
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest
import zlib
from collections import Counter

from scapy.all import Ether, IP, raw  # noqa: E402
from scapy.contrib.roce import BTH  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.environ.get("SPRAYNET_SOURCE_DIR", os.path.dirname(os.path.dirname(HERE)))
BUILD = os.environ.get("SPRAYNET_BUILD_DIR", os.path.join(ROOT, "build"))
SWITCH_EMU = os.environ.get("SWITCH_EMU", os.path.join(BUILD, "switch_emu", "switch_emu"))
NIC_EMU = os.environ.get("NIC_EMU", os.path.join(BUILD, "nic_emu", "nic_emu"))
TIMEOUT_S = 300  # a bound on one program run, not a wait
sys.path.insert(0, os.path.join(ROOT, "tests", "switch_emu"))
import pcaplib as P  # noqa: E402

MAC_A = bytes.fromhex("020000000001")
MAC_B = bytes.fromhex("020000000002")
SRC, DST = P.ip_bytes("10.1.0.1"), P.ip_bytes("10.2.0.2")
ROCE_PORT = 4791


# ---------------------------------------------------------------------------------------------
# Frames

def eth(l3, ethertype=P.ETH_IPV4, tags=(), pad=True):
    hdr = MAC_B + MAC_A
    for tpid, tci in tags:
        hdr += struct.pack("!HH", tpid, tci)
    f = hdr + struct.pack("!H", ethertype) + l3
    return f + bytes(max(0, 60 - len(f))) if pad else f


def ipv4(proto, l4, ttl=64, ident=1, options=b"", flags_frag=0, total=None, checksum=None):
    ihl = 5 + len(options) // 4
    tot = total if total is not None else 4 * ihl + len(l4)
    h = bytearray(struct.pack("!BBHHHBBH4s4s", 0x40 | ihl, 0, tot, ident, flags_frag, ttl,
                              proto, 0, SRC, DST) + options)
    h[10:12] = struct.pack("!H", P.inet_checksum(bytes(h)) if checksum is None else checksum)
    return bytes(h) + l4


def udp(sport, dport, payload, length=None):
    return struct.pack("!HHHH", sport, dport, length if length is not None else 8 + len(payload),
                       0) + payload


def icrc(l3):
    """RoCEv2 ICRC over an IPv4 datagram whose last 4 bytes are the ICRC (DESIGN.md): CRC-32 of
    eight 0xFF bytes, then the datagram with TOS, TTL, IP checksum, UDP checksum and the BTH's
    reserved byte masked to 0xFF, without the ICRC field; stored little-endian."""
    b = bytearray(l3[:-4])
    ihl = (b[0] & 0xF) * 4
    b[1] = 0xFF
    b[8] = 0xFF
    b[10:12] = b"\xff\xff"
    b[ihl + 6:ihl + 8] = b"\xff\xff"
    b[ihl + 8 + 4] = 0xFF
    return struct.pack("<I", zlib.crc32(bytes(b), zlib.crc32(b"\xff" * 8)))


def roce(qp, psn, opcode=0x0A, payload=b"", ttl=64, ident=1, sport=0xC000, good_icrc=True,
         tags=()):
    """A RoCEv2 packet: WRITE ONLY (0x0A, with a RETH) by default; ACK (0x11) carries an AETH."""
    ext = b""
    if opcode in (0x06, 0x0A):
        ext = struct.pack("!QII", 0x1000, 0x1234, len(payload))
    elif opcode == 0x11:
        ext = struct.pack("!I", psn & 0xFFFFFF)
    pad = (4 - len(payload) % 4) % 4
    bth = struct.pack("!BBHII", opcode, pad << 4, 0xFFFF, qp & 0xFFFFFF, (1 << 31) | (psn & 0xFFFFFF))
    body = bth + ext + payload + bytes(pad) + b"\0\0\0\0"
    l3 = bytearray(ipv4(P.PROTO_UDP, udp(sport, ROCE_PORT, body), ttl=ttl, ident=ident))
    crc = icrc(bytes(l3))
    if not good_icrc:
        crc = bytes([crc[0] ^ 0x5A]) + crc[1:]
    l3[-4:] = crc
    return eth(bytes(l3), tags=tags)


def pfc(vector, quanta, opcode=0x0101):
    body = struct.pack("!HH8H", opcode, vector, *quanta)
    return eth(body, ethertype=0x8808)


def plain_udp(i, size=None, **kw):
    payload = bytes([i & 0xFF]) * (size if size is not None else 40 + i % 50)
    return ipv4(P.PROTO_UDP, udp(1000 + i, 2000, payload), ident=i & 0xFFFF, **kw)


def hostile_classes(rng):
    """{class name: [frames]} for the switch and the spraying NIC's host side."""
    c = {}
    c["truncated"] = [bytes([0x02] * n) for n in (1, 6, 13)] + [
        eth(plain_udp(i), pad=False)[:14 + 4 * i + 2] for i in range(4)]
    c["runt"] = [eth(plain_udp(i, size=i), pad=False) for i in range(4)]  # 42..45 bytes, valid
    c["jumbo_9216"] = [eth(plain_udp(i, size=9216 - 14 - 20 - 8)) for i in range(3)]
    c["vlan"] = [eth(plain_udp(i), tags=[(0x8100, (3 << 13) | 100)]) for i in range(4)]
    c["qinq"] = [eth(plain_udp(i), tags=[(0x88A8, (5 << 13) | 10), (0x8100, 200)])
                 for i in range(4)]
    ip6 = struct.pack("!IHBB16s16s", 6 << 28, 8, 17, 64, bytes(15) + b"\1", bytes(15) + b"\2")
    c["ipv6"] = [eth(ip6 + udp(1, 2, b""), ethertype=P.ETH_IPV6) for _ in range(3)]
    c["ipv4_options"] = [eth(plain_udp(i, options=b"\x01\x01\x01\x00" * (1 + i % 3)))
                         for i in range(4)]
    c["fragments"] = [eth(ipv4(P.PROTO_UDP, bytes(48), ident=77, flags_frag=f))
                      for f in (0x2000, 0x2006, 0x000C)]
    c["bad_ip_total_length"] = [eth(plain_udp(i, total=2000 + i)) for i in range(3)]
    c["bad_udp_length"] = [eth(ipv4(P.PROTO_UDP, udp(5, 6, bytes(30), length=30 + 8 + d)))
                           for d in (1, -1, 100)]
    c["bad_ip_checksum"] = [eth(plain_udp(i, checksum=0xBEEF)) for i in range(3)]
    c["bad_icrc"] = [roce(0x100 + i, i, payload=bytes(64), good_icrc=False) for i in range(4)]
    c["unknown_opcode"] = [roce(0x200, i, opcode=op, payload=bytes(16))
                           for i, op in enumerate((0x1F, 0x40, 0x7E, 0xC1, 0xFF))]
    c["pfc_bogus"] = [pfc(0xFF00, [0xFFFF] * 8), pfc(0x0100, [1, 2, 3, 4, 5, 6, 7, 8]),
                      eth(struct.pack("!HH", 0x0101, 0x0008), ethertype=0x8808, pad=False)]
    c["pause_8023x"] = [pfc(0, [0xFFFF] + [0] * 7, opcode=0x0001)]
    c["qp_flood"] = [roce(0x300, psn, payload=bytes(256), ident=psn & 0xFFFF)
                     for psn in range(3000)]
    c["psn_jump_2e23"] = [roce(0x400, psn, payload=bytes(32))
                          for psn in (0, 1, 1 + (1 << 23), 2, (1 << 24) - 1, 3)]
    return c


def run(cmd, env=None):
    e = dict(os.environ, SWITCH_EMU=SWITCH_EMU, NIC_EMU=NIC_EMU, **(env or {}))
    return subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S, env=e)


def shuffled(classes, rng):
    tagged = [(name, f) for name, fs in classes.items() for f in fs]
    rng.shuffle(tagged)
    return tagged


def nonzero(d):
    return {k: v for k, v in d.items() if k != "total" and v}


class HostileTraffic(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="hostile")
        self.rng = random.Random(2026)
        self.classes = hostile_classes(self.rng)

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def write(self, name, frames):
        path = os.path.join(self.tmp, name)
        P.write_pcap(path, frames)
        return path

    def test_switch(self):
        tagged = shuffled(self.classes, self.rng)
        in_pcap = self.write("in.pcap", [f for _, f in tagged])
        outdir = os.path.join(self.tmp, "sw")
        r = run([os.path.join(ROOT, "scripts", "switch-pcap.sh"), in_pcap, outdir, "--ports", "2"])
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        with open(os.path.join(outdir, "stats.json")) as f:
            st = json.load(f)
        self.assertEqual(st["mempool_in_use_at_exit"], 0)
        self.assertTrue(st["accounting"]["balanced"], st["accounting"])
        self.assertEqual(st["accounting"]["received"], sum(len(v) for v in self.classes.values()))
        # Forwarded: every class a switch forwards (a switch does not check the ICRC, which is
        # end to end, nor BTH opcodes it does not know beyond the parser's table).
        forwarded = ["runt", "jumbo_9216", "vlan", "qinq", "ipv4_options", "fragments",
                     "bad_icrc", "qp_flood", "psn_jump_2e23"]
        expect_out = Counter()
        for name in forwarded:
            for fr in self.classes[name]:
                expect_out[raw(routed(fr))] += 1
        outs = Counter()
        for k in range(2):
            for fr in P.read_pcap(os.path.join(outdir, f"port{k}.pcap")):
                outs[fr] += 1
        self.assertEqual(outs, expect_out,
                         "out: exactly the forwardable frames, each once, TTL - 1, nothing else")
        drops = nonzero(st["drops"])
        self.assertEqual(drops.get("parse_truncated_ethernet", 0) +
                         drops.get("parse_truncated_ipv4", 0), len(self.classes["truncated"]))
        self.assertEqual(drops.get("parse_not_ipv4"), len(self.classes["ipv6"]))
        self.assertEqual(drops.get("parse_bad_total_length"),
                         len(self.classes["bad_ip_total_length"]))
        self.assertEqual(drops.get("parse_udp_length_mismatch"),
                         len(self.classes["bad_udp_length"]))
        self.assertEqual(drops.get("parse_bad_ip_checksum"), len(self.classes["bad_ip_checksum"]))
        self.assertEqual(drops.get("parse_unknown_roce_opcode"),
                         len(self.classes["unknown_opcode"]))
        # PFC: the vector with only undefined bits and the cut-short frame are malformed; a
        # valid one is honoured; 802.3x PAUSE is consumed and counted.
        self.assertEqual(drops.get("pfc_malformed", 0) + st["counters"]["pfc_received"],
                         len(self.classes["pfc_bogus"]))
        self.assertGreaterEqual(drops.get("pfc_malformed", 0), 1)
        self.assertEqual(drops.get("mac_control_not_pfc"), len(self.classes["pause_8023x"]))
        total_in = sum(len(v) for v in self.classes.values())
        self.assertEqual(st["ports"][0]["rx_packets"], total_in)
        self.assertEqual(st["drops"]["total"] + st["counters"]["pfc_received"] +
                         sum(expect_out.values()), total_in, "every frame forwarded or counted")

    def test_nic_spray_side(self):
        # The host sends everything to its NIC: RoCE is sprayed (PPCID in the UDP checksum),
        # other IPv4 goes out unchanged by flow hash, what does not parse is counted.
        tagged = shuffled(self.classes, self.rng)
        in_pcap = self.write("host.pcap", [f for _, f in tagged])
        outdir = os.path.join(self.tmp, "spray")
        r = run([os.path.join(ROOT, "scripts", "spray-pcap.sh"), in_pcap, outdir,
                 "--uplinks", "4", "--mode", "rr"])
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        with open(os.path.join(outdir, "spray-stats.json")) as f:
            st = json.load(f)
        self.assertEqual(st["mempool_in_use_at_exit"], 0)
        sent = []
        for k in range(4):
            sent += P.read_pcap(os.path.join(outdir, f"uplink{k}.pcap"))
        inputs = Counter(f for _, f in tagged)
        for s in sent:
            # A sprayed RoCE frame differs from its input in the UDP checksum only.
            self.assertIn(unsprayed(s), inputs, Ether(s).summary())
        drops = nonzero(st["drops"])
        self.assertEqual(drops.get("parse_unknown_roce_opcode", 0),
                         len(self.classes["unknown_opcode"]))
        # PFC and PAUSE are link-local: the host's are the NIC's to honour or count, never
        # sent on into the fabric.
        self.assertFalse([s for s in sent if s[12:14] == b"\x88\x08"], "MAC control sent on")
        self.assertEqual(st["pfc_received"] + drops.get("pfc_malformed", 0) +
                         drops.get("mac_control_not_pfc", 0),
                         len(self.classes["pfc_bogus"]) + len(self.classes["pause_8023x"]))
        # A NIC is not a router: what parses far enough to hash (IPv6, tagged, fragments) is
        # sent, what cannot be read is counted.
        for cls, counter in (("bad_ip_checksum", "parse_bad_ip_checksum"),
                             ("bad_ip_total_length", "parse_bad_total_length"),
                             ("bad_udp_length", "parse_udp_length_mismatch")):
            self.assertEqual(drops.get(counter, 0), len(self.classes[cls]), cls)
        total_in = sum(len(v) for v in self.classes.values())
        self.assertEqual(st["drops"]["total"] + len(sent) + st["pfc_received"], total_in,
                         f"every frame sent or counted: {drops}")
        self.assertTrue(st["accounting"]["balanced"], st["accounting"])
        self.assertEqual(st["accounting"]["received"], total_in)

    def test_nic_reorder_side(self):
        # The receiving NIC gets the hostile RoCE on its uplinks (one QP flooding, a QP jumping
        # 2^23 PSNs, bad ICRCs, unknown opcodes, PFC) and delivers to its host.
        names = ["bad_icrc", "unknown_opcode", "pfc_bogus", "pause_8023x", "qp_flood",
                 "psn_jump_2e23", "truncated", "ipv6", "vlan"]
        tagged = shuffled({n: self.classes[n] for n in names}, self.rng)
        upl = os.path.join(self.tmp, "uplinks")
        os.makedirs(upl)
        per = [[] for _ in range(4)]
        for i, (_, f) in enumerate(tagged):
            per[i % 4].append(f)
        for k in range(4):
            P.write_pcap(os.path.join(upl, f"uplink{k}.pcap"), per[k])
        out = os.path.join(self.tmp, "host-out.pcap")
        r = run([os.path.join(ROOT, "scripts", "reorder-pcap.sh"), upl, out, "--hold-us", "1000"])
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        with open(os.path.join(upl, "reorder-stats.json")) as f:
            st = json.load(f)
        self.assertEqual(st["mempool_in_use_at_exit"], 0)
        delivered = P.read_pcap(out)
        inputs = Counter(f for _, f in tagged)
        for d in delivered:
            self.assertIn(d, inputs, "delivered unchanged (these carried no PPCID)")
        # Every flooded PSN comes out, once.
        flood = [d for d in delivered if is_roce(d) and bth_qp(d) == 0x300]
        self.assertEqual(len(flood), len(self.classes["qp_flood"]))
        self.assertEqual(len(set(flood)), len(flood))
        drops = nonzero(st["drops"])
        self.assertEqual(drops.get("parse_unknown_roce_opcode", 0),
                         len(self.classes["unknown_opcode"]))
        total_in = sum(len(self.classes[n]) for n in names)
        self.assertEqual(st["delivered"], len(delivered))
        # Late copies are passed on (a requester that lost its ACK needs them); a copy of a
        # PSN already held is freed and counted.
        held_or_dropped = (st["drops"]["total"] + st["pfc_received"] +
                           st["reorder"]["duplicates_of_held"])
        self.assertEqual(held_or_dropped + len(delivered), total_in,
                         f"every frame delivered or counted: {drops} {st.get('reorder')}")
        self.assertTrue(st["accounting"]["balanced"], st["accounting"])
        self.assertEqual(st["accounting"]["received"], total_in)


def routed(frame):
    """The frame as the switch forwards it: TTL - 1 and the IPv4 checksum updated."""
    p = Ether(frame)
    p[IP].ttl -= 1
    del p[IP].chksum
    return Ether(raw(p))


def is_roce(frame):
    p = Ether(frame)
    return p.haslayer(BTH)


def bth_qp(frame):
    return Ether(frame)[BTH].dqpn


def unsprayed(frame):
    """A frame sent on an uplink with its UDP checksum back to 0 when it is RoCEv2."""
    b = bytearray(frame)
    p = Ether(frame)
    if p.haslayer(BTH):
        off = len(frame) - len(raw(p[IP].payload))
        b[off + 6:off + 8] = b"\0\0"
    return bytes(b)


if __name__ == "__main__":
    unittest.main(verbosity=2)
