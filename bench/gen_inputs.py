#!/usr/bin/env python3
"""Inputs for scripts/bench.sh: UDP pcaps (many flows) and switch_emu configs with N TCAM rules.

  gen_inputs.py pcap OUT.pcap FRAME_BYTES [FLOWS] [--roce]
  gen_inputs.py switch OUT.yaml MODE RULES LCORES [--link=wire|emulated] [--tx-queues=N]
                [--mbufs=N] [--device=DEV] [--flowlet-entries=N] IN_PCAP...
--roce: every frame a RoCEv2 packet (UDP 4791, an RC SEND_ONLY BTH to a random QP, its ICRC)
with a random nonzero PPCID in the UDP checksum field, as a spraying NIC sends them.
MODE: ecmp, ecmp-multiply (ecmp reducing the hash by multiply-shift), weighted, dlb, drill, or
spray (an ecmp group and a TCAM spray rule for RoCEv2 above the catch-all rule: packets with a
PPCID are sprayed by it, as a leaf does).
--flowlet-entries: a dlb group's flowlet table (a power of two; the switch's default otherwise).
--mbufs: the switch's mempool (net_pcap's infinite_rx keeps every packet of the pcap in an
mbuf: a pcap of a million flows needs a million), with a data room of 1024 bytes (the least) above 65536.
--device: the input port's device instead of a net_pcap of IN_PCAP (give "-"), e.g. net_memif.
Frame sizes are on the wire with the FCS: a 64 B frame is 60 bytes in the pcap.
"""
import os
import random
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fuzz"))
import make_seeds as seeds  # noqa: E402  (the RoCEv2 frame builder and its ICRC)


def csum(data):
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return (~s) & 0xFFFF


def udp_frame(frame_bytes, src_ip, dst_ip, sport, dport):
    total = frame_bytes - 4  # no FCS in the capture
    ip_len = total - 14
    payload = bytes(ip_len - 28)
    udp = struct.pack("!HHHH", sport, dport, ip_len - 20, 0) + payload
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, ip_len, 0, 0x4000, 64, 17, 0,
                     struct.pack("!I", src_ip), struct.pack("!I", dst_ip))
    ip = ip[:10] + struct.pack("!H", csum(ip)) + ip[12:]
    eth = bytes.fromhex("020000000002" "020000000001" "0800")
    return eth + ip + udp


def roce_frame(frame_bytes, src_ip, dst_ip, sport, qp, psn, ppcid):
    """An RC SEND_ONLY to `qp` (payload what the frame size leaves, in whole words; a 64 B
    frame has none and 2 bytes of Ethernet padding), PPCID in the UDP checksum field. Built by
    fuzz/make_seeds.py's roce(), whose ICRC is checked there against the design's test vector."""
    payload_len = max(0, (frame_bytes - 4 - 14 - 20 - 8 - 12 - 4) // 4 * 4)
    frame = seeds.roce(0x04, qp, psn, bytes(payload_len), csum=ppcid, src=src_ip, dst=dst_ip,
                       sport=sport)
    return frame + bytes(max(0, frame_bytes - 4 - len(frame)))


def write_pcap(path, frame_bytes, flows, roce=False):
    rng = random.Random(frame_bytes * 7 + flows + (1 << 40 if roce else 0))
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        for i in range(flows):
            src, dst = 0x0A000001 + (i % 16), 0x0A010000 + rng.randrange(1 << 16)
            sport = 0xC000 + rng.randrange(1 << 14)
            if roce:
                fr = roce_frame(frame_bytes, src, dst, sport, rng.randrange(1, 1 << 24),
                                rng.randrange(1 << 24), rng.randrange(1, 1 << 16))
            else:
                fr = udp_frame(frame_bytes, src, dst, sport, 4791 if i % 2 else 5001)
            f.write(struct.pack("<IIII", i // 1000000, i % 1000000, len(fr), len(fr)))
            f.write(fr)


def write_switch(path, mode, rules, lcores, inputs, link="emulated", tx_queues=1, mbufs=0,
                 device_override=None, flowlet_entries=0):
    outs_per_in = 4
    # wire: the ports send straight to the PMD (no link: key); emulated: a link at 10 Tbit/s
    # with no delay, which costs its shaper and delay line but never holds a frame back.
    link_yaml = "" if link == "wire" else ", link: {rate_gbps: 10000, delay_ns: 0}"
    lines = ["name: bench", "seed: 1"]
    if mbufs:
        lines.append("mempool_mbufs: %d" % mbufs)
        if mbufs > 65536:
            lines.append("mbuf_data_room: 1024")
    lines.append("ports:")
    ins, outs = [], []
    for k, pcap in enumerate(inputs):
        name = "in%d" % k
        ins.append(name)
        device = device_override or "net_pcap%d,rx_pcap=%s,infinite_rx=1" % (k, pcap)
        lines.append('  - {name: %s, device: "%s"%s}' % (name, device, link_yaml))
    for j in range(outs_per_in * len(inputs)):
        name = "up%d" % j
        outs.append(name)
        # tx_queues > 1 on a wire port: each lcore sends on its own queue (no lane handoff).
        queues = ", tx_queues: %d" % tx_queues if tx_queues > 1 else ""
        lines.append('  - {name: %s, device: "net_null%d,no-rx=1"%s%s}' % (name, j, link_yaml, queues))
    # "ecmp-multiply": ecmp reducing the hash by multiply-shift instead of hash % N.
    lines += ["groups:", "  - name: uplinks",
              "    mode: %s" % ("ecmp" if mode in ("ecmp-multiply", "spray") else mode),
              "    ports: [%s]" % ", ".join(outs)]
    if mode == "ecmp-multiply":
        lines.append("    ecmp_reduce: multiply")
    if mode == "weighted":
        lines.append("    weights: [%s]" % ", ".join(str(1 + j % 3) for j in range(len(outs))))
    if flowlet_entries:
        lines.append("    flowlet_entries: %d" % flowlet_entries)
    lines += ["routes:", "  - {prefix: 0.0.0.0/0, group: uplinks}"]
    if rules or mode == "spray":
        lines += ["tcam:", "  capacity: %d" % max(rules + 1, 16384), "  rules:"]
    if mode == "spray":
        # Below the 1K rules the traffic misses, above the catch-all: what a leaf's RoCE rule is.
        lines.append("    - {id: %d, priority: 2, action: spray, match: {proto: udp, "
                     "dst_port: 4791}}" % (rules + 1))
    if rules:
        rng = random.Random(rules)
        for r in range(rules - 1):
            # Rules the traffic mostly misses (172.16/12 destinations), as a big ACL has.
            dst = "172.%d.%d.%d/32" % (16 + rng.randrange(16), rng.randrange(256), rng.randrange(256))
            lines.append("    - {id: %d, priority: %d, action: ecmp, match: {dst: %s, proto: udp, "
                         "dst_port: %d}}" % (r + 1, 10 + r, dst, 1000 + rng.randrange(60000)))
        # and one every packet matches (lowest priority): each packet goes through the whole ACL
        lines.append("    - {id: %d, priority: 1, action: ecmp, match: {dst: 10.0.0.0/8}}" % rules)
    if lcores > 1:
        lines.append("lcores:")
        per = len(outs) // lcores
        for l in range(lcores):
            mine = [ins[l]] + outs[l * per:(l + 1) * per]
            lines.append("  - {lcore: %d, ports: [%s]}" % (l, ", ".join(mine)))
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    if sys.argv[1] == "pcap":
        args = [a for a in sys.argv[2:] if a != "--roce"]
        write_pcap(args[0], int(args[1]), int(args[2]) if len(args) > 2 else 1024,
                   roce="--roce" in sys.argv)
    elif sys.argv[1] == "switch":
        rest = sys.argv[6:]
        link = "emulated"
        tx_queues = 1
        mbufs = 0
        device = None
        flowlet_entries = 0
        while rest and rest[0].startswith("--"):
            opt = rest.pop(0)
            if opt.startswith("--link="):
                link = opt[len("--link="):]
                if link not in ("wire", "emulated"):
                    sys.exit("--link: wire or emulated, got %r" % link)
            elif opt.startswith("--tx-queues="):
                tx_queues = int(opt[len("--tx-queues="):])
            elif opt.startswith("--mbufs="):
                mbufs = int(opt[len("--mbufs="):])
            elif opt.startswith("--device="):
                device = opt[len("--device="):]
            elif opt.startswith("--flowlet-entries="):
                flowlet_entries = int(opt[len("--flowlet-entries="):])
            else:
                sys.exit("unknown option %r (--link=wire|emulated, --tx-queues=N, --mbufs=N, "
                         "--device=DEV, --flowlet-entries=N)" % opt)
        mode = sys.argv[3]
        if mode not in ("ecmp", "ecmp-multiply", "weighted", "dlb", "drill", "spray"):
            sys.exit("MODE: ecmp, ecmp-multiply, weighted, dlb, drill or spray, got %r" % mode)
        write_switch(sys.argv[2], mode, int(sys.argv[4]), int(sys.argv[5]), rest, link,
                     tx_queues, mbufs, device, flowlet_entries)
    else:
        sys.exit("usage: see the docstring")
