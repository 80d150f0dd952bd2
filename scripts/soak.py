#!/usr/bin/env python3
"""The sampling and chaos side of scripts/soak.sh, over DPDK telemetry.

    scripts/soak.py run --prefix P --dir DIR --seconds S --procs spine0,spine1,nic0,nic1
                        --json FILE [--storm-ns NS --storm-iface IFACE[,IFACE...]]
    scripts/soak.py storm IFACE SECONDS      (run inside the namespace of IFACE)

`run` connects to every process's telemetry socket (/var/run/dpdk/P-NAME/dpdk_telemetry.v2:
SOCK_SEQPACKET, a JSON greeting, one JSON reply per "command,params"), and for S seconds drives
chaos into the switches (link flaps with /spraynet/link_set, BER bursts with /spraynet/link_ber,
TCAM churn with /spraynet/tcam_add and tcam_remove, PFC storms by running `storm` in the
storm namespace) while it samples every second:
  - /spraynet/accounting of every process: the identity holds (the node's own `balanced`, and
    the same sums recomputed here from the terms it reports);
  - /spraynet/lcores: every lcore's loop count moved since the last sample (no stall), and
    every process received and sent packets within each 15 s window (traffic flows);
  - RSS of every process outside DPDK's preallocated memory (see rss_kb): after the warm-up
    (min(30 s, S/3)) it stays below the warm-up's peak * 1.10 + 8 MiB; VmRSS is reported;
  - every process is alive.
One progress line on stderr (updated in place); the result (samples, RSS min/max, check
counts, failures) as JSON to --json. Exit 0 when every check held, 1 otherwise, 2 on bad use.

`storm` sends PFC frames (every priority paused for the longest quanta) out of IFACE every
millisecond for SECONDS: into the switch port at the other end of the veth.
"""
import argparse
import json
import os
import socket
import struct
import subprocess
import sys
import time

RSS_GROWTH = 0.10
RSS_SLACK_KB = 8 * 1024
TRAFFIC_WINDOW_S = 15.0


def pfc_frame(src_mac):
    # 01:80:c2:00:00:01, MAC control 0x8808, opcode 0x0101, class-enable vector, 8 x quanta.
    dst = bytes.fromhex("0180c2000001")
    body = struct.pack("!HHH", 0x8808, 0x0101, 0x00FF) + struct.pack("!8H", *([0xFFFF] * 8))
    frame = dst + src_mac + body
    return frame + bytes(max(0, 60 - len(frame)))


def storm(iface, seconds):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    s.bind((iface, 0))
    frame = pfc_frame(bytes.fromhex("025350ff0001"))
    end = time.monotonic() + seconds
    sent = 0
    while time.monotonic() < end:
        s.send(frame)
        sent += 1
        time.sleep(0.001)
    print(json.dumps({"iface": iface, "pfc_frames_sent": sent}))
    return 0


class Telemetry:
    def __init__(self, prefix):
        self.path = os.path.join("/var/run/dpdk", prefix, "dpdk_telemetry.v2")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock.settimeout(10)
        self.sock.connect(self.path)
        self.max_len = json.loads(self.sock.recv(1024).decode())["max_output_len"]

    def call(self, cmd, params=None):
        text = cmd if params is None else f"{cmd},{params}"
        self.sock.send(text.encode())
        reply = json.loads(self.sock.recv(self.max_len).decode())
        return reply[cmd]


def identity_holds(acc):
    """The identity from the reported terms, summed here (telemetry flattens keys to a/b)."""
    eg = [acc[f"egress/{k}"] for k in
          ("refused", "dequeued", "lost", "queued", "in_flight", "freed_at_shutdown")]
    offered = acc["egress/offered"]
    if offered != sum(eg):
        return False, f"egress: offered {offered} != {sum(eg)} (refused, dequeued, lost, queued, in flight, freed)"
    left = acc["received"] + acc["generated"]
    if "reorder_held" in acc:  # a NIC
        right = (acc["consumed"] + acc["pipeline_dropped"] + acc["reorder_dropped"] +
                 acc["reorder_held"] + acc["freed_at_shutdown"] + offered)
        if acc["reorder_in"] != acc["reorder_released"] + acc["reorder_dropped"] + acc["reorder_held"]:
            return False, "reorder: in != released + dropped + held"
    else:
        # A switch on several lcores: what one lane handed another and it has not taken yet.
        right = acc["consumed"] + acc["pipeline_dropped"] + acc.get("in_lane_handoff", 0) + offered
    if left != right:
        return False, f"received + generated {left} != consumed + dropped + held + offered {right}"
    if acc.get("balanced") != 1:
        return False, "the node says balanced = false"
    return True, ""


def rss_kb(pid):
    """(VmRSS, the part outside DPDK's memory) in kB. With --no-huge EAL maps its whole -m
    arena up front (/memfd:nohuge, and its fbarray): pages are resident once first touched, so
    that part grows as deeper queues touch mbufs never used before, up to -m; an mbuf that is
    not given back is the mempool check's to find. The rest (heap, stacks, libraries, socket
    rings) is what must stay flat."""
    total = dpdk = 0
    mapping = ""
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            if line[0] in "0123456789abcdef" and "-" in line.split(" ", 1)[0]:
                mapping = line
            elif line.startswith("Rss:"):
                kb = int(line.split()[1])
                total += kb
                if "nohuge" in mapping:
                    dpdk += kb
    return total, total - dpdk


class Soak:
    def __init__(self, a):
        self.a = a
        self.procs = a.procs.split(",")
        self.spines = [p for p in self.procs if p.startswith("spine")]
        self.failures = []
        self.checks = {"accounting": 0, "lcore_progress": 0, "traffic": 0, "rss": 0, "alive": 0,
                       "chaos_commands": 0}
        self.samples = 0
        # VmRSS (min_kb, max_kb) and its part outside DPDK's memory (own_*, warmup_peak_kb).
        self.rss = {p: {"min_kb": None, "max_kb": None, "own_min_kb": None, "own_max_kb": None,
                        "warmup_peak_kb": 0} for p in self.procs}
        self.pids = {}
        self.tel = {}
        self.last_loops = {}
        self.window = {p: None for p in self.procs}  # (start time, rx, tx) of the current window
        self.chaos = {"link_flaps": 0, "ber_bursts": 0, "tcam_adds": 0, "tcam_removes": 0,
                      "pfc_storms": 0, "pfc_frames_sent": 0}
        self.storm_proc = None
        self.pending = []  # (time, what, fn): undo steps of the chaos

    def fail(self, what):
        if len(self.failures) < 200:
            self.failures.append({"t": round(time.monotonic() - self.t0, 1), "what": what})

    def connect(self):
        for p in self.procs:
            with open(os.path.join(self.a.dir, f"{p}.pid")) as f:
                self.pids[p] = int(f.read().strip())
            self.tel[p] = Telemetry(f"{self.a.prefix}-{p}")
            # "running" is logged just before the lcores start, /spraynet/lcores with them.
            deadline = time.monotonic() + 10
            while not isinstance(self.tel[p].call("/spraynet/lcores"), dict):
                if time.monotonic() > deadline:
                    raise OSError(f"{p}: /spraynet/lcores not available within 10 s")
                time.sleep(0.05)

    def act(self, proc, cmd, params):
        self.checks["chaos_commands"] += 1
        try:
            r = self.tel[proc].call(cmd, params)
        except (OSError, ValueError, KeyError) as e:
            self.fail(f"{proc}: {cmd},{params}: {e}")
            return None
        # A refused TCAM rule is kept (and answered with an error naming why): churn all the same.
        if "error" in r and not (cmd == "/spraynet/tcam_add" and "refused" in r):
            self.fail(f"{proc}: {cmd},{params}: {r['error']}")
        return r

    def chaos_step(self, n, now):
        """One of the chaos actions, in turn, each undone a while later."""
        spine = self.spines[n % len(self.spines)]
        port = (n // len(self.spines)) % 2
        kind = n % 4
        if kind == 0:
            self.act(spine, "/spraynet/link_set", f"{port},down")
            self.chaos["link_flaps"] += 1
            self.pending.append((now + 1.5, lambda: self.act(spine, "/spraynet/link_set", f"{port},up")))
        elif kind == 1:
            self.act(spine, "/spraynet/link_ber", f"{port},0.000001")
            self.chaos["ber_bursts"] += 1
            self.pending.append((now + 2.0, lambda: self.act(spine, "/spraynet/link_ber", f"{port},0")))
        elif kind == 2:
            rule_id = 100 + n
            # A rule on a prefix nobody sends to, and one on the live traffic (spray): both make
            # the TCAM rebuild and swap under load.
            rules = [f"{{id: {rule_id}, priority: 5, match: {{dst: 10.9.{n % 250}.0/24}}, action: drop}}",
                     f"{{id: {rule_id + 1}, priority: 4, match: {{dst: 10.0.2.0/24}}, action: spray}}"]
            for r in rules:
                self.act(spine, "/spraynet/tcam_add", r)
                self.chaos["tcam_adds"] += 1

            def remove():
                for i in (rule_id, rule_id + 1):
                    self.act(spine, "/spraynet/tcam_remove", str(i))
                    self.chaos["tcam_removes"] += 1
            self.pending.append((now + 1.0, remove))
        elif self.a.storm_ns and self.storm_proc is None:
            ifaces = self.a.storm_iface.split(",")
            iface = ifaces[self.chaos["pfc_storms"] % len(ifaces)]
            cmd = ["ip", "netns", "exec", self.a.storm_ns, sys.executable, os.path.abspath(__file__),
                   "storm", iface, "1.5"]
            self.storm_proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                               text=True)
            self.chaos["pfc_storms"] += 1

    def reap_storm(self, wait=False):
        if self.storm_proc is None:
            return
        if not wait and self.storm_proc.poll() is None:
            return
        out, err = self.storm_proc.communicate(timeout=30)
        if self.storm_proc.returncode != 0:
            self.fail(f"PFC storm sender exited {self.storm_proc.returncode}: {err.strip()}")
        else:
            try:
                self.chaos["pfc_frames_sent"] += json.loads(out)["pfc_frames_sent"]
            except (ValueError, KeyError):
                self.fail(f"PFC storm sender: unreadable output {out!r}")
        self.storm_proc = None

    def sample(self, now, warm):
        self.samples += 1
        for p in self.procs:
            self.checks["alive"] += 1
            try:
                os.kill(self.pids[p], 0)
            except OSError:
                self.fail(f"{p}: process {self.pids[p]} is gone")
                continue
            try:
                acc = self.tel[p].call("/spraynet/accounting")
                lc = self.tel[p].call("/spraynet/lcores")
            except (OSError, ValueError, KeyError) as e:
                self.fail(f"{p}: telemetry: {e}")
                continue
            self.checks["accounting"] += 1
            if not isinstance(acc, dict) or not isinstance(lc, dict):
                self.fail(f"{p}: no answer: /spraynet/accounting {acc!r}, /spraynet/lcores {lc!r}")
                continue
            try:
                ok, why = identity_holds(acc)
            except (KeyError, TypeError) as e:
                ok, why = False, f"missing term {e}"
            if not ok:
                self.fail(f"{p}: accounting: {why}")
            loops = {k: v for k, v in lc.items() if k.endswith("/loops")}
            if not loops:
                self.fail(f"{p}: /spraynet/lcores lists no lcore: {lc}")
            for k, v in loops.items():
                self.checks["lcore_progress"] += 1
                before = self.last_loops.get((p, k))
                if before is not None and v <= before:
                    self.fail(f"{p}: {k} stuck at {v}")
                self.last_loops[(p, k)] = v
            rx = sum(v for k, v in lc.items() if k.endswith("/rx_packets"))
            tx = sum(v for k, v in lc.items() if k.endswith("/tx_packets"))
            w = self.window[p]
            if w is None:
                self.window[p] = (now, rx, tx)
            elif now - w[0] >= TRAFFIC_WINDOW_S:
                self.checks["traffic"] += 1
                if rx <= w[1] or tx <= w[2]:
                    self.fail(f"{p}: no traffic for {now - w[0]:.0f} s (rx {w[1]}->{rx}, tx {w[2]}->{tx})")
                self.window[p] = (now, rx, tx)
            try:
                total, kb = rss_kb(self.pids[p])
            except OSError as e:
                self.fail(f"{p}: {e}")
                continue
            r = self.rss[p]
            for key, v in (("min_kb", total), ("own_min_kb", kb)):
                r[key] = v if r.get(key) is None else min(r[key], v)
            for key, v in (("max_kb", total), ("own_max_kb", kb)):
                r[key] = v if r.get(key) is None else max(r[key], v)
            if warm:
                r["warmup_peak_kb"] = max(r["warmup_peak_kb"], kb)
            else:
                self.checks["rss"] += 1
                bound = r["warmup_peak_kb"] * (1 + RSS_GROWTH) + RSS_SLACK_KB
                if kb > bound:
                    self.fail(f"{p}: RSS outside DPDK's memory {kb} kB above {bound:.0f} kB "
                              f"(warm-up peak {r['warmup_peak_kb']} kB + 10% + 8 MiB)")

    def progress(self, elapsed):
        rss = " ".join(f"{p} {self.rss[p]['max_kb'] // 1024 if self.rss[p]['max_kb'] else 0}M"
                       for p in self.procs)
        sys.stderr.write(f"\rsoak: {elapsed:5.0f}/{self.a.seconds} s, {self.samples} samples, "
                         f"{sum(self.checks.values())} checks, {len(self.failures)} failed; "
                         f"rss {rss}   ")
        sys.stderr.flush()

    def run(self):
        self.t0 = time.monotonic()
        try:
            self.connect()
        except (OSError, ValueError, KeyError) as e:
            self.fail(f"cannot connect: {e}")
            return self.report()
        warmup = min(30.0, self.a.seconds / 3)
        end = self.t0 + self.a.seconds
        next_sample = self.t0
        next_chaos = self.t0 + 0.5
        n = 0
        while True:
            now = time.monotonic()
            if now >= end:
                break
            for item in [x for x in self.pending if x[0] <= now]:
                self.pending.remove(item)
                item[1]()
            self.reap_storm()
            if now >= next_chaos:
                self.chaos_step(n, now)
                n += 1
                next_chaos = now + 1.0
            if now >= next_sample:
                self.sample(now - self.t0, now - self.t0 < warmup)
                self.progress(now - self.t0)
                next_sample += 1.0
            time.sleep(0.05)
        for _, undo in self.pending:  # every link up, BER 0, rules gone before the stop
            undo()
        self.pending = []
        self.reap_storm(wait=True)
        self.sample(time.monotonic() - self.t0, False)
        self.progress(time.monotonic() - self.t0)
        sys.stderr.write("\n")
        return self.report()

    def report(self):
        out = {"seconds": self.a.seconds, "samples": self.samples, "checks": self.checks,
               "chaos": self.chaos, "rss_kb": self.rss,
               "rss_bound": "outside DPDK's memory: warm-up peak * 1.10 + 8 MiB",
               "failures": self.failures}
        with open(self.a.json, "w") as f:
            json.dump(out, f, indent=2)
        return 0 if not self.failures else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--prefix", required=True)
    r.add_argument("--dir", required=True)
    r.add_argument("--seconds", type=int, required=True)
    r.add_argument("--procs", required=True)
    r.add_argument("--json", required=True)
    r.add_argument("--storm-ns", default="")
    r.add_argument("--storm-iface", default="")
    s = sub.add_parser("storm")
    s.add_argument("iface")
    s.add_argument("seconds", type=float)
    a = ap.parse_args()
    if a.cmd == "storm":
        return storm(a.iface, a.seconds)
    if a.seconds < 1:
        print("soak.py: --seconds: at least 1", file=sys.stderr)
        return 2
    return Soak(a).run()


if __name__ == "__main__":
    sys.exit(main())
