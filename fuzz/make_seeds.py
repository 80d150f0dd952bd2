#!/usr/bin/env python3
"""Writes the seed corpora in fuzz/corpus/<target>/ (run from anywhere; idempotent).

Frames are genuine: Ethernet [802.1Q] IPv4 UDP, RoCEv2 with BTH, RETH/AETH, pad and a right
ICRC (checked against the design's test vector), PFC and PAUSE frames. The configs are the
examples in configs/ and small hand-written ones; the stream-driven targets (reorder engine, RC
responder) start from a few fixed pseudo-random inputs.
"""
import os
import random
import shutil
import struct
import zlib

ROOT = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(ROOT, "corpus")


def ip_checksum(hdr):
    s = sum(struct.unpack("!%dH" % (len(hdr) // 2), hdr))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return (~s) & 0xFFFF


def eth(ethertype, vlan=None, dst=b"\x02\0\0\0\0\x02", src=b"\x02\0\0\0\0\x01"):
    h = dst + src
    if vlan is not None:
        h += struct.pack("!HH", 0x8100, vlan)
    return h + struct.pack("!H", ethertype)


def ipv4(payload, proto=17, src=0x0A000001, dst=0x0A000002, tos=0, ttl=64, ident=0x1234,
         flags=0x4000, options=b""):
    ihl = 5 + len(options) // 4
    h = struct.pack("!BBHHHBBHII", 0x40 | ihl, tos, ihl * 4 + len(payload), ident, flags, ttl,
                    proto, 0, src, dst) + options
    h = h[:10] + struct.pack("!H", ip_checksum(h)) + h[12:]
    return h + payload


def udp(payload, sport=0xC123, dport=4791, csum=0):
    return struct.pack("!HHHH", sport, dport, 8 + len(payload), csum) + payload


def icrc(ip_and_after):
    ip = bytearray(ip_and_after)
    ip[1] = 0xFF                    # TOS
    ip[8] = 0xFF                    # TTL
    ip[10:12] = b"\xff\xff"         # header checksum
    ihl = (ip[0] & 0xF) * 4
    ip[ihl + 6:ihl + 8] = b"\xff\xff"  # UDP checksum
    ip[ihl + 8 + 4] = 0xFF          # BTH byte 4 (FECN, BECN, reserved)
    return struct.pack("<I", zlib.crc32(b"\xff" * 8 + bytes(ip)) & 0xFFFFFFFF)


def roce(op, qp, psn, payload=b"", ack_req=False, reth=None, aeth=None, tos=0, ttl=64,
         csum=0, vlan=None, src=0x0A000001, dst=0x0A000002, sport=0xC123):
    pad = (4 - len(payload) % 4) % 4
    bth = struct.pack("!BBHII", op, pad << 4, 0xFFFF, qp & 0xFFFFFF,
                      (0x80000000 if ack_req else 0) | (psn & 0xFFFFFF))
    ext = b""
    if reth is not None:
        ext += struct.pack("!QII", *reth)
    if aeth is not None:
        ext += struct.pack("!I", (aeth[0] << 24) | (aeth[1] & 0xFFFFFF))
    body = bth + ext + payload + b"\0" * pad
    datagram = ipv4(udp(body + b"\0\0\0\0", sport=sport, csum=csum), tos=tos, ttl=ttl, src=src,
                    dst=dst)
    datagram = datagram[:-4] + icrc(datagram[:-4])
    return eth(0x0800, vlan) + datagram


def pad60(frame):
    return frame + b"\0" * max(0, 60 - len(frame))


def pfc(enable, quanta, opcode=0x0101):
    return pad60(eth(0x8808, dst=b"\x01\x80\xc2\x00\x00\x01") +
                 struct.pack("!HH8H", opcode, enable, *quanta))


# The design's ICRC test vector.
_v = roce(0x0A, 0x11, 0x100, bytes(range(32)), ack_req=True,
          reth=(0x00007F0000001000, 0x1234ABCD, 32))
assert _v[14 + 10:14 + 12] == b"\x14\x5b", _v[24:26].hex()
assert _v[-4:] == bytes.fromhex("ef665540"), _v[-4:].hex()

FRAMES = {
    "roce_write_only": _v,
    "roce_write_first": roce(0x06, 0x11, 7, b"\x5a" * 256, reth=(0x1000, 0x42, 1024)),
    "roce_write_middle": roce(0x07, 0x11, 8, b"\x5a" * 256, csum=0x12A5),
    "roce_write_last_vlan": roce(0x08, 0x11, 9, b"\x5a" * 33, ack_req=True, vlan=(3 << 13) | 100),
    "roce_read_request": roce(0x0C, 0x22, 0xFFFFFF, reth=(0x2000, 0x42, 4096)),
    "roce_read_response_first": roce(0x0D, 0x11, 5, b"\x11" * 256, aeth=(0x1F, 3)),
    "roce_ack": roce(0x11, 0x11, 0x100, aeth=(0x1F, 1), tos=26 << 2),
    "roce_nak_seq": roce(0x11, 0x11, 0x100, aeth=(0x60, 1)),
    "roce_send_only": roce(0x04, 0x11, 1, b"hello"),
    "roce_cnp": roce(0x81, 0x11, 0, b"\0" * 16),
    "udp": eth(0x0800) + ipv4(udp(b"payload!", sport=1234, dport=53)),
    "tcp": eth(0x0800) + ipv4(struct.pack("!HHIIBBHHH", 80, 443, 1, 0, 0x50, 0x02, 1024, 0, 0),
                              proto=6),
    "ipv4_options_fragment": eth(0x0800) + ipv4(b"\0" * 16, flags=0x2000,
                                                options=b"\x01\x01\x01\x00"),
    "qinq": eth(0x8100, vlan=0x0123)[:-2] + struct.pack("!HHH", 0x8100, 0x0456, 0x0800) +
    ipv4(udp(b"x" * 8, dport=4791)),
    "arp": pad60(eth(0x0806) + b"\0\x01\x08\0\x06\x04\0\x01" + b"\0" * 20),
    "pfc_xoff3": pfc(0x08, [0, 0, 0, 0xFFFF, 0, 0, 0, 0]),
    "pfc_xon_all": pfc(0xFF, [0] * 8),
    "pause": pfc(0x0000, [0xFFFF] + [0] * 7, opcode=0x0001),
}


def write(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def main():
    shutil.rmtree(CORPUS, ignore_errors=True)
    rng = random.Random(15)
    # packet_parser: the frame, then (FuzzedDataProvider takes integers from the end) the cuts
    # in reverse and last one flags byte: bit 0 verify the IP checksum, bit 1 verify the ICRC,
    # bits 2-3 the number of cuts (segments - 1).
    for name, frame in FRAMES.items():
        write("packet_parser", name, frame + b"\x03")
    write("packet_parser", "roce_write_first_chain",
          FRAMES["roce_write_first"] + b"\x80\x40\x0b")
    for name in ("pfc_xoff3", "pfc_xon_all", "pause"):
        write("pfc_frame", name, FRAMES[name])
    write("pfc_frame", "pfc_vlan", pad60(FRAMES["pfc_xoff3"][:12] + b"\x81\x00\x60\x00" +
                                         FRAMES["pfc_xoff3"][12:]))
    for i, n in enumerate((16, 24, 40)):
        write("ppcid", "random%d" % i, bytes(rng.randrange(256) for _ in range(n)))
    write("ppcid", "ts_high", b"ts-high" + bytes(20))
    write("ppcid", "path_high", b"path-high" + bytes(20))
    for target in ("reorder_engine", "rc_responder"):
        for i, n in enumerate((32, 128, 512, 2048)):
            write(target, "random%d" % i, bytes(rng.randrange(256) for _ in range(n)))
    configs = os.path.join(ROOT, "..", "configs")
    for name in sorted(os.listdir(configs)):
        if not name.endswith(".yaml"):
            continue
        with open(os.path.join(configs, name), "rb") as f:
            text = f.read()
        target = "nic_config" if text.lstrip().startswith(b"#") and b"\nnic:" in text else \
            "switch_config"
        if b"\nfabric:" in text:
            continue
        write(target, name, text)
        if target == "switch_config" and b"\ntcam:" in text:
            rules = text[text.index(b"\ntcam:") + 1:]
            rules = rules[rules.index(b"  rules:"):]
            lines = [l for l in rules.split(b"\n")[1:] if l.startswith(b"    ")]
            write("tcam_rule", "rules_" + name, b"rules:\n" + b"\n".join(lines) + b"\n")
    write("nic_config", "rc_engine.yaml",
          b"nic:\n  uplinks: [{name: up0, device: net_ring0}, {name: up1, device: net_ring1}]\n"
          b"  spray: {mode: rr}\n  rc_engine:\n    qps: 2\n")
    write("nic_config", "minimal.yaml", b"nic:\n  uplinks: [{name: up0, device: net_ring0}]\n")
    for i, rule in enumerate((
            b"{id: 7, match: {dst: 10.0.2.0/24}, action: spray}",
            b"{id: 8, priority: -5, action: pin, port: p1, match: {src: 10.0.0.1, proto: tcp,"
            b" src_port: 1000-2000, dst_port: 0x12b7}}",
            b"{id: 9, partition: spray, action: mirror, port: p0, match: {dest_qp: 0x11-0xffffff,"
            b" proto: 17}}",
            b"id: 10\naction: drop\nmatch:\n  dst: 192.0.2.0/24\n  proto: icmp\n")):
        write("tcam_rule", "rule%d" % i, rule)


if __name__ == "__main__":
    main()
