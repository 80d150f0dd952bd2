"""switch_emu's forwarding rate on net_af_xdp against net_af_packet, on the same veth pair.

One veth pair (sa <-> sb) in a network namespace of its own, looped onto itself through one
switch_emu: port a on sa, port b on sb, every route to port a. A frame the kernel injects on sa
arrives on b, leaves on a, arrives on b again, ... until its TTL runs out (the switch drops it at
TTL 1 and counts it): 254 forwardings per frame, each through the kernel's veth and the PMD
twice (rx on b, tx on a). (net_af_packet's socket on sa also reads the injected frames as
they leave: with it each frame makes two such chains.) The rate is port b's receive count over the time it took to go from
10% to 90% of its final value, read over telemetry (/spraynet/port,b) every 10 ms: the kernel's
injection and the start-up stay out of it. One lcore, busy polling.

Used by bench_run.py (section "pmd"); also runs alone:
  python3 bench/veth_pmd.py SWITCH_EMU [FRAMES]
"""
import json
import os
import socket
import struct
import subprocess
import sys
import tempfile
import time


def _frame():
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + 8 + 18, 1, 0, 255, 17, 0,
                     socket.inet_aton("10.0.1.1"), socket.inet_aton("10.0.2.1"))
    s = sum(struct.unpack("!10H", ip))
    s = (s & 0xFFFF) + (s >> 16)
    s = (s & 0xFFFF) + (s >> 16)
    ip = ip[:10] + struct.pack("!H", ~s & 0xFFFF) + ip[12:]
    return (bytes.fromhex("020000000002" "020000000001" "0800") + ip +
            struct.pack("!HHHH", 1000, 2000, 26, 0) + b"x" * 18)


def _sh(*args):
    return subprocess.run(list(args), check=True, capture_output=True, text=True)


def measure(exe, pmd, frames=1000, workdir=None):
    """{'mpps', 'forwarded', 'exit', 'error'} of one run on `pmd` (af_packet or af_xdp)."""
    ns = "spnpmd%d" % os.getpid()
    work = workdir or tempfile.mkdtemp(prefix="spraynet-pmd-")
    prefix = "spn-pmd-%s-%d" % (pmd, os.getpid())
    sw = None
    result = {"mpps": None, "forwarded": 0, "exit": None, "error": None}
    try:
        _sh("ip", "netns", "add", ns)
        _sh("ip", "-n", ns, "link", "add", "sa", "type", "veth", "peer", "name", "sb")
        for i in ("sa", "sb"):
            _sh("ip", "netns", "exec", ns, "sysctl", "-q", "-w",
                "net.ipv6.conf.%s.disable_ipv6=1" % i)
            _sh("ip", "-n", ns, "link", "set", i, "up")
            # The kernel must never hand af_packet a frame with a partial checksum.
            subprocess.run(["ip", "netns", "exec", ns, "ethtool", "-K", i, "tx", "off", "rx",
                            "off"], capture_output=True, check=False)
        if pmd == "af_xdp":
            dev = lambda i, f: "net_af_xdp%d,iface=%s,start_queue=0" % (i, f)  # noqa: E731
        else:
            dev = lambda i, f: "net_af_packet%d,iface=%s,qdisc_bypass=1,framecnt=2048" % (i, f)  # noqa: E731,E501
        cfg = os.path.join(work, "pmd-%s.yaml" % pmd)
        stats = os.path.join(work, "pmd-%s.json" % pmd)
        with open(cfg, "w") as f:
            f.write('ports:\n  - {name: a, device: "%s"}\n  - {name: b, device: "%s"}\n'
                    "routes:\n  - {prefix: 0.0.0.0/0, port: a}\n" % (dev(0, "sa"), dev(1, "sb")))
        sw = subprocess.Popen(["ip", "netns", "exec", ns, exe, "-l", "1", "--no-huge", "-m",
                               "1024", "--no-pci", "--file-prefix", prefix, "--log-level",
                               "lib.eal:error", "--", "--config", cfg, "--idle-backoff-us", "0",
                               "--stats", stats],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        path = "/var/run/dpdk/%s/dpdk_telemetry.v2" % prefix
        tele = None
        deadline = time.monotonic() + 60
        while tele is None and time.monotonic() < deadline and sw.poll() is None:
            try:
                t = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
                t.settimeout(5)
                t.connect(path)
                t.recv(1 << 16)
                t.send(b"/spraynet/port,b")
                if "rx_packets" in t.recv(1 << 20).decode():
                    tele = t
                else:
                    t.close()
            except OSError:
                time.sleep(0.1)
        if tele is None:
            if sw.poll() is not None:
                err = sw.stderr.read()
                result["error"] = "switch_emu exited %d: %s" % (sw.returncode,
                                                                err.strip().splitlines()[-1:])
            else:
                result["error"] = "switch_emu's telemetry did not answer in 60 s"
            return result

        def rx():
            tele.send(b"/spraynet/port,b")
            return json.loads(tele.recv(1 << 20))["/spraynet/port"]["rx_packets"]

        frame = _frame()
        _sh("ip", "netns", "exec", ns, sys.executable, "-c",
            "import socket, time\n"
            "s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW); s.bind(('sa', 0))\n"
            "f = bytes.fromhex('%s'); sent = 0\n"
            "while sent < %d:\n"
            "    try:\n        s.send(f); sent += 1\n"
            "    except OSError:\n        time.sleep(0.001)\n" % (frame.hex(), frames))
        samples, last, still = [], -1, 0
        while still < 30:  # 300 ms without a change: every frame's TTL has run out
            v = rx()
            samples.append((time.monotonic(), v))
            still = still + 1 if v == last else 0
            last = v
            time.sleep(0.01)
        tele.close()
        result["forwarded"] = last
        lo = next(x for x in samples if x[1] >= 0.1 * last)
        hi = next(x for x in samples if x[1] >= 0.9 * last)
        if hi[0] > lo[0]:
            result["mpps"] = (hi[1] - lo[1]) / (hi[0] - lo[0]) / 1e6
        sw.send_signal(2)
        _, err = sw.communicate(timeout=60)
        result["exit"] = sw.returncode
        if sw.returncode != 0:
            result["error"] = "switch_emu exited %d: %s" % (sw.returncode,
                                                            err.strip().splitlines()[-1:])
        return result
    except subprocess.CalledProcessError as e:
        result["error"] = "%s: %s" % (" ".join(e.cmd[:4]), (e.stderr or "").strip())
        return result
    finally:
        if sw is not None and sw.poll() is None:
            sw.kill()
            sw.communicate()
        subprocess.run(["ip", "netns", "del", ns], capture_output=True, check=False)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
    for p in ("af_packet", "af_xdp"):
        print(p, json.dumps(measure(sys.argv[1], p, n)))
