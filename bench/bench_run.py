#!/usr/bin/env python3
"""The driver behind scripts/bench.sh: every figure beside its baseline, measured in the same run.

  bench_run.py --build DIR [--json FILE] [--quick]

Prints a table on stdout, progress lines on stderr, and (with --json) one entry per figure:
name, value, unit, baseline, baseline_value, ratio (value / baseline_value), target (or null),
met (true / false / null), reps.

Process figures (switch_emu, dpdk-testpmd) are cycles per packet from the process's CPU time
(user + sys, less a run of the same configuration that stops at once: set-up and tear-down) times
the TSC rate, over the packets sent: CPU time is what a shared machine does not steal. Mpps are
packets over wall time of the forwarding phase (the run's wall time less that of the set-up run:
what the machine gave the lcores, very noisy when shared).
"""
import argparse
import json
import os
import re
import resource
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

HERE = os.path.dirname(os.path.abspath(__file__))
T0 = time.time()
FIGURES = []
TSC_HZ = None


def progress(msg):
    print("[bench %5.0fs] %s" % (time.time() - T0, msg), file=sys.stderr, flush=True)


def add(name, value, unit, baseline=None, baseline_value=None, target=None, reps=None, note=None):
    """target: (kind, limit, text); kind is value_max, value_min, ratio_max or ratio_min."""
    ratio = None
    if value is not None and baseline_value:
        ratio = value / baseline_value
    met = None
    tgt = None
    if target is not None:
        kind, limit, text = target
        tgt = {"kind": kind, "limit": limit, "text": text}
        x = ratio if kind.startswith("ratio") else value
        if x is not None:
            met = bool(x <= limit) if kind.endswith("max") else bool(x >= limit)
    FIGURES.append({"name": name, "value": value, "unit": unit, "baseline": baseline,
                    "baseline_value": baseline_value, "ratio": ratio, "target": tgt, "met": met,
                    "reps": reps, "note": note})


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def cpu_children():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


# --- dpdk-testpmd: io forwarding on the same ports, the I/O floor -------------------------------

def read_until(proc, text, timeout_s):
    """What `proc` printed until it printed `text` (or ended, or timeout_s passed)."""
    # Raw reads: select() cannot see what a buffered reader already holds.
    fd = proc.stdout.fileno()
    seen = ""
    deadline = time.time() + timeout_s
    while time.time() < deadline and text not in seen:
        if not select.select([fd], [], [], 1.0)[0]:
            continue
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        seen += chunk.decode(errors="replace")
    return seen


def testpmd(prefix, rx_vdev, duration_s, mbufs=8192):
    """Returns (tx packets, cpu seconds, wall seconds of forwarding). mbufs: net_pcap's
    infinite_rx holds every packet of its pcap in one."""
    global TSC_HZ
    # stdbuf: testpmd's stdout is a pipe here; "Press enter to exit" must arrive when printed.
    memory_mb = 512 + mbufs * 2600 // 1000000
    cmd = ["stdbuf", "-oL", "dpdk-testpmd", "-l", "0-1", "--no-huge", "-m", str(memory_mb), "--no-pci",
           "--file-prefix", prefix, "--log-level", "lib.eal:debug" if TSC_HZ is None else
           "lib.eal:error", "--vdev", rx_vdev, "--vdev", "net_null0,no-rx=1", "--",
           "--forward-mode=io", "--no-mlockall", "--total-num-mbufs=%d" % mbufs]
    c0 = cpu_children()
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    seen = read_until(p, "Press enter to exit", 120)
    if TSC_HZ is None:
        m = re.search(r"TSC frequency is ~(\d+) KHz", seen)
        if m:
            TSC_HZ = int(m.group(1)) * 1000
    lines = [seen]
    t = time.time()
    if duration_s > 0:
        time.sleep(duration_s)
    p.stdin.write("\n")
    p.stdin.flush()
    wall = time.time() - t
    try:
        rest, _ = p.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        p.kill()
        rest, _ = p.communicate()
        progress("testpmd did not stop: killed")
        return None
    c1 = cpu_children()
    out = "".join(lines) + rest
    m = re.search(r"Accumulated forward statistics.*?TX-packets:\s+(\d+)", out, re.S)
    if p.returncode != 0 or not m:
        progress("testpmd failed: " + out[-400:].replace("\n", " | "))
        return None
    return int(m.group(1)), c1 - c0, wall


def measure_testpmd(tag, pcap, reps, duration_s, mbufs=8192, startup_reps=1):
    """startup_reps: set-up runs whose median CPU is taken off (a large pcap's load varies)."""
    vdev = "net_pcap0,rx_pcap=%s,infinite_rx=1" % pcap
    starts = [testpmd("bench-tp-%s-0%d" % (tag, k), vdev, 0, mbufs) for k in range(startup_reps)]
    cpu0 = med([st[1] for st in starts if st]) or 0
    mpps, cyc = [], []
    for r in range(reps):
        res = testpmd("bench-tp-%s-%d" % (tag, r + 1), vdev, duration_s, mbufs)
        if res and res[0] > 0:
            mpps.append(res[0] / res[2] / 1e6)
            cyc.append(max(res[1] - cpu0, 1e-9) * TSC_HZ / res[0])
    return med(mpps), med(cyc)


# --- switch_emu on the same ports ---------------------------------------------------------------

SWITCH_EAL = []  # EAL arguments every switch_emu run gets (bench_run.py --switch-eal)


def switch_run(exe, cfg, lcores, duration_ms, prefix, workdir, memory_mb=512):
    """Returns (tx packets, cpu seconds, wall seconds, poll-loop busy ns) or None."""
    stats = os.path.join(workdir, prefix + ".json")
    cmd = [exe, "-l", "0" if lcores == 1 else "0-%d" % (lcores - 1)] + SWITCH_EAL + [
           "--no-huge", "-m", str(memory_mb),
           "--no-pci", "--file-prefix", prefix, "--log-level", "lib.eal:error", "--",
           "--config", cfg, "--duration-ms", str(duration_ms), "--idle-backoff-us", "0",
           "--stats", stats, "--log-level", "warn"]
    c0 = cpu_children()
    t0 = time.time()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       cwd=workdir, check=False)
    wall = time.time() - t0
    cpu = cpu_children() - c0
    if p.returncode != 0 or not os.path.exists(stats):
        progress("switch_emu failed (%s): %s" % (cfg, p.stdout[-400:].replace("\n", " | ")))
        return None
    with open(stats) as f:
        rep = json.load(f)
    os.unlink(stats)
    tx = sum(port["tx_packets"] for port in rep["ports"])
    return tx, cpu, wall, rep["poll_loop"]["busy_ns"]


STARTUP_CPU = {}


def measure_switch(exe, cfg, lcores, reps, duration_ms, tag, workdir, startup_key=None,
                   memory_mb=512, startup_reps=1):
    """startup_key: configurations with the same key share one set-up run (same rules, ports);
    startup_reps: set-up runs whose median CPU and wall time are taken off."""
    key = startup_key or cfg
    if key not in STARTUP_CPU:
        starts = [switch_run(exe, cfg, lcores, 1, "bench-sw-%s-0%d" % (tag, k), workdir, memory_mb)
                  for k in range(startup_reps)]
        starts = [st for st in starts if st]
        STARTUP_CPU[key] = ((med([st[1] for st in starts]), med([st[2] for st in starts]))
                            if starts else (0, 0))
    cpu0, wall0 = STARTUP_CPU[key]
    # --duration-ms counts from before the node is built (YAML, TCAM build): give the set-up its
    # measured time on top, and count the forwarding phase as the run's wall time less it.
    run_ms = duration_ms + int(1500 * wall0)
    mpps, cyc = [], []
    for r in range(reps):
        res = switch_run(exe, cfg, lcores, run_ms, "bench-sw-%s-%d" % (tag, r + 1), workdir,
                         memory_mb)
        if res and res[0] > 0:
            mpps.append(res[0] / max(res[2] - wall0, 1e-3) / 1e6)
            cyc.append(max(res[1] - cpu0, 1e-9) * TSC_HZ / res[0])
    return med(mpps), med(cyc)


def gen(*args):
    subprocess.run([sys.executable, os.path.join(HERE, "gen_inputs.py")] + [str(a) for a in args],
                   check=True)


def switch_section(build, work, quick, reps):
    exe = os.path.join(build, "switch_emu", "switch_emu")
    duration_ms = 300 if quick else 400
    pcaps = {}
    for size in (64, 1024):
        pcaps[size] = os.path.join(work, "in%d.pcap" % size)
        gen("pcap", pcaps[size], size)
    sizes = (64,) if quick else (64, 1024)
    rule_counts = (1024,) if quick else (0, 1024, 16384)
    modes = ("ecmp", "weighted", "dlb", "drill")

    floor = {}
    for size in sizes:
        progress("dpdk-testpmd io forwarding, %d B (net_pcap infinite_rx -> net_null)" % size)
        floor[size] = measure_testpmd("%d" % size, pcaps[size], reps, duration_ms / 1000.0)

    results = {}
    for size in sizes:
        for rules in rule_counts:
            for mode in modes:
                cfg = os.path.join(work, "sw-%s-%d-%d.yaml" % (mode, rules, size))
                # Wire ports (no link: key): frames straight to the PMD, as a switch sends them.
                gen("switch", cfg, mode, rules, 1, "--link=wire", pcaps[size])
                progress("switch_emu %s, %d TCAM rules, %d B, one lcore" % (mode, rules, size))
                results[(mode, rules, size)] = measure_switch(
                    exe, cfg, 1, reps, duration_ms, "%s%d%d" % (mode, rules, size), work,
                    "%d-%d" % (rules, size))

    for size in sizes:
        fm, fc = floor[size]
        for rules in rule_counts:
            for mode in modes:
                mpps, cyc = results[(mode, rules, size)]
                base = "switch %s %d rules %d B 1 lcore" % (mode, rules, size)
                target = None
                if mode == "ecmp" and rules == 1024 and size == 64:
                    target = ("value_max", 200, "<= 200 cycles/packet including I/O, wire ports")
                add(base + ": cycles/packet", cyc, "cycles/packet", "dpdk-testpmd io", fc,
                    target, reps)
                add(base + ": Mpps", mpps, "Mpps", "dpdk-testpmd io", fm, None, reps,
                    "wall-clock rate on a shared machine")
                if mode != "ecmp":
                    e = results[("ecmp", rules, size)][1]
                    lim = 1.1 if mode == "weighted" else 1.2
                    tgt = None
                    if rules == 1024 and size == 64:
                        tgt = ("ratio_max", lim, "within %d%% of ecmp" % round((lim - 1) * 100))
                    add(base + ": cycles/packet vs ecmp", cyc, "cycles/packet",
                        "switch ecmp (same rules, size)", e, tgt, reps)

    # The same ports and traffic with an emulated link on every port (10 Tbit/s, no delay: the
    # shaper and the delay line hold nothing back, so this is what they cost) beside the wire.
    progress("switch_emu ecmp, 1024 TCAM rules, 64 B, one lcore, emulated links")
    cfg = os.path.join(work, "sw-ecmp-emulated-1024-64.yaml")
    gen("switch", cfg, "ecmp", 1024, 1, "--link=emulated", pcaps[64])
    emu = measure_switch(exe, cfg, 1, reps, duration_ms, "ecmpemu", work, "1024-64")
    add("switch ecmp 1024 rules 64 B 1 lcore emulated link: cycles/packet", emu[1],
        "cycles/packet", "switch ecmp 1024 rules 64 B 1 lcore (wire ports)",
        results[("ecmp", 1024, 64)][1], None, reps)
    add("switch ecmp 1024 rules 64 B 1 lcore emulated link: Mpps", emu[0], "Mpps",
        "switch ecmp 1024 rules 64 B 1 lcore (wire ports)", results[("ecmp", 1024, 64)][0], None,
        reps, "wall-clock rate on a shared machine")

    # ecmp's classic hash % N beside multiply-shift ((hash * N) >> 32, no division), same rules.
    progress("switch_emu ecmp by multiply-shift, 1024 TCAM rules, 64 B, one lcore")
    cfg = os.path.join(work, "sw-ecmp-multiply-1024-64.yaml")
    gen("switch", cfg, "ecmp-multiply", 1024, 1, "--link=wire", pcaps[64])
    mul = measure_switch(exe, cfg, 1, reps, duration_ms, "ecmpmul", work, "1024-64")
    add("switch ecmp multiply-shift 1024 rules 64 B 1 lcore: cycles/packet vs hash % N", mul[1],
        "cycles/packet", "switch ecmp, hash % N (same rules, size)",
        results[("ecmp", 1024, 64)][1], None, reps)

    # Two lcores against one on the same ports: two inputs, eight outputs.
    progress("switch_emu ecmp, 1024 rules, 64 B, two inputs: one lcore, then two")
    two = {}
    for lc in (1, 2):
        cfg = os.path.join(work, "sw2-%d.yaml" % lc)
        gen("switch", cfg, "ecmp", 1024, lc, "--link=wire", pcaps[64], pcaps[64])
        two[lc] = measure_switch(exe, cfg, lc, reps, duration_ms, "two%d" % lc, work)
    add("switch ecmp 1024 rules 64 B 2 lcores: Mpps", two[2][0], "Mpps",
        "same ports, 1 lcore", two[1][0], ("ratio_min", 1.7, ">= 1.7x one lcore"), reps,
        "2 cores shared with other builds: scaling is bounded by what the machine gives")
    add("switch ecmp 1024 rules 64 B 2 lcores: cycles/packet", two[2][1], "cycles/packet",
        "same ports, 1 lcore", two[1][1], None, reps)

    # The same two lcores with a tx queue per lcore on every output: each lane sends what it
    # forwards on its own queue, none handed to the lane owning the port (lane_handoffs 0).
    progress("switch_emu ecmp, 1024 rules, 64 B, two lcores, a tx queue per lcore")
    cfg = os.path.join(work, "sw2-queues.yaml")
    gen("switch", cfg, "ecmp", 1024, 2, "--link=wire", "--tx-queues=2", pcaps[64], pcaps[64])
    queued = measure_switch(exe, cfg, 2, reps, duration_ms, "two2q", work)
    add("switch ecmp 1024 rules 64 B 2 lcores, tx queue per lcore: Mpps", queued[0], "Mpps",
        "same ports, 2 lcores handing over", two[2][0], None, reps)
    add("switch ecmp 1024 rules 64 B 2 lcores, tx queue per lcore: Mpps vs 1 lcore", queued[0],
        "Mpps", "same ports, 1 lcore", two[1][0], ("ratio_min", 1.7, ">= 1.7x one lcore"), reps,
        "2 cores shared with other builds: scaling is bounded by what the machine gives")
    add("switch ecmp 1024 rules 64 B 2 lcores, tx queue per lcore: cycles/packet", queued[1],
        "cycles/packet", "same ports, 2 lcores handing over", two[2][1],
        ("ratio_max", 1.0, "no more than with the handoff"), reps)


def memif_run(exe, work, flows, duration_ms, tag):
    """One switch_emu run (lcore 0) fed by dpdk-testpmd --forward-mode=flowgen (lcore 1) over
    net_memif; returns the switch's busy cycles per packet forwarded, or None."""
    sock = os.path.join(work, "memif-%s.sock" % tag)
    cfg = os.path.join(work, "swm-%s.yaml" % tag)
    gen("switch", cfg, "ecmp", 1024, 1, "--link=wire",
        "--device=net_memif0,role=client,socket=%s" % sock, "-")
    cmd = ["stdbuf", "-oL", "dpdk-testpmd", "-l", "0,1", "--main-lcore", "0", "--no-huge", "-m",
           "512", "--no-pci", "--file-prefix", "bench-gen-" + tag, "--log-level", "lib.eal:error",
           "--vdev", "net_memif0,role=server,socket=%s" % sock, "--", "--forward-mode=flowgen",
           "--flowgen-flows=%d" % flows, "--no-mlockall", "--total-num-mbufs=16384"]
    g = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    try:
        seen = read_until(g, "Press enter to exit", 60)
        if "Press enter to exit" not in seen:
            progress("testpmd flowgen did not start: %s" % seen[-300:].replace("\n", " | "))
            return None
        res = switch_run(exe, cfg, 1, duration_ms, "bench-swm-" + tag, work)
        if res is None or res[0] == 0:
            return None
        tx, _, _, busy_ns = res
        return busy_ns * 1e-9 * TSC_HZ / tx
    finally:
        try:
            g.stdin.write("\n")
            g.stdin.flush()
            g.communicate(timeout=30)
        except (BrokenPipeError, subprocess.TimeoutExpired, OSError):
            g.kill()
            g.wait()


def switch_flows_section(build, work, quick, reps):
    """The switch at the flow counts real fabrics carry (issue 40): every 64 B frame of the pcap
    its own flow, replayed; testpmd io on the same ports and pcap in the same run (net_pcap's
    infinite_rx keeps every frame in an mbuf: its own cost grows with the flows, and is in both
    figures). Quick: ecmp at 1K and 100K flows; full: 10K and 1M too, without rules, dlb (its
    flowlet table sized to the flows), weighted and spray (RoCEv2 with PPCIDs), and two lcores
    at 100K."""
    exe = os.path.join(build, "switch_emu", "switch_emu")
    # Long enough that the set-up (loading a large pcap into mbufs: seconds at 1M flows), taken
    # off as the median of three set-up runs, is not most of what is measured.
    duration_ms = 1000 if quick else 2000
    counts = (1024, 100000) if quick else (1024, 10000, 100000, 1000000)
    # spray: RoCEv2 frames, each with its own QP and a PPCID, sprayed by a TCAM rule (the 1K
    # rules above it, the catch-all below); dlb with its flowlet table sized to the flows.
    modes = (("ecmp", 1024),) if quick else (("ecmp", 1024), ("ecmp", 0), ("dlb", 1024),
                                             ("weighted", 1024), ("spray", 1024))
    figures = {}
    for flows in counts:
        pcap = os.path.join(work, "flows%d.pcap" % flows)
        gen("pcap", pcap, 64, flows)
        roce_pcap = os.path.join(work, "roce%d.pcap" % flows)
        if any(m == "spray" for m, _ in modes):
            gen("pcap", roce_pcap, 64, flows, "--roce")
        flowlet_entries = 1 << max(12, (flows - 1).bit_length())
        mbufs = flows + 32768
        # An mbuf of 1024 bytes of data room and its header: about 1.5 KiB.
        memory_mb = 512 + mbufs * 16 // 10000
        progress("dpdk-testpmd io, 64 B, %d flows" % flows)
        tp = measure_testpmd("flows%d" % flows, pcap, reps, duration_ms / 1000.0, mbufs, 3)
        add("testpmd io 64 B %d flows: cycles/packet" % flows, tp[1], "cycles/packet",
            "dpdk-testpmd io, 1024 flows", figures.get(("testpmd", 1024)), None, reps)
        figures[("testpmd", flows)] = tp[1]
        for mode, rules in modes:
            progress("switch_emu %s, %d TCAM rules, 64 B, one lcore, %d flows" % (mode, rules, flows))
            cfg = os.path.join(work, "swf-%s-%d-%d.yaml" % (mode, rules, flows))
            extra = ["--flowlet-entries=%d" % flowlet_entries] if mode == "dlb" else []
            gen("switch", cfg, mode, rules, 1, "--link=wire", "--mbufs=%d" % mbufs, *extra,
                roce_pcap if mode == "spray" else pcap)
            mpps, cyc = measure_switch(exe, cfg, 1, reps, duration_ms,
                                       "f%s%d%d" % (mode, rules, flows), work,
                                       memory_mb=memory_mb, startup_reps=3)
            figures[(mode, rules, flows)] = cyc
            base = "switch %s %d rules 64 B 1 lcore %d flows" % (mode, rules, flows)
            target = None
            if mode == "ecmp" and rules == 1024 and flows == 100000:
                target = ("value_max", 200, "<= 200 cycles/packet at 100K flows (issue 40)")
            add(base + ": cycles/packet", cyc, "cycles/packet", "dpdk-testpmd io, %d flows" % flows,
                tp[1], target, reps)
            add(base + ": Mpps", mpps, "Mpps", "dpdk-testpmd io, %d flows" % flows, None, None,
                reps, "wall-clock rate on a shared machine")
            if flows != 1024:
                tgt = None
                if mode == "ecmp" and rules == 1024 and flows == 100000:
                    tgt = ("ratio_max", 1.3, "<= 1.3x the 1K-flow figure (issue 40)")
                add(base + ": cycles/packet vs 1024 flows", cyc, "cycles/packet",
                    "the same at 1024 flows", figures.get((mode, rules, 1024)), tgt, reps)
    # The same switch fed by a source whose cost does not grow with the flows: testpmd's
    # flowgen in another process (lcore 1) over net_memif, the switch on lcore 0. Cycles per
    # packet from the poll loop's busy time (iterations that received a burst): the switch's
    # own, memif's receive copy included, whether or not the generator keeps it saturated.
    memif = {}
    for flows in counts:
        progress("switch_emu ecmp, 1024 TCAM rules, 64 B, one lcore, %d flows from testpmd flowgen "
                 "over net_memif" % flows)
        busy = []
        for r in range(reps):
            cyc = memif_run(exe, work, flows, duration_ms, "m%d-%d" % (flows, r))
            if cyc is not None:
                busy.append(cyc)
        memif[flows] = med(busy)
        base = "switch ecmp 1024 rules 64 B 1 lcore %d flows, flowgen over memif" % flows
        target = None
        if flows == 100000:
            target = ("value_max", 200, "<= 200 cycles/packet at 100K flows (issue 40)")
        add(base + ": busy cycles/packet", memif[flows], "cycles/packet", None, None, target, reps,
            "poll-loop busy time x TSC / packets; memif's receive copy included")
        if flows != 1024:
            tgt = ("ratio_max", 1.3, "<= 1.3x the 1K-flow figure (issue 40)") if flows == 100000 else None
            add(base + ": busy cycles/packet vs 1024 flows", memif[flows], "cycles/packet",
                "the same at 1024 flows", memif.get(1024), tgt, reps)
    if quick:
        return
    # Two lcores, a tx queue each, 100K flows: the Mpps against one lcore on the same ports.
    pcap = os.path.join(work, "flows100000.pcap")
    memory_mb = 512 + 2 * 132768 * 16 // 10000
    lanes = {}
    for lc in (1, 2):
        progress("switch_emu ecmp, 1024 rules, 64 B, 100K flows, two inputs: %d lcore(s)" % lc)
        cfg = os.path.join(work, "swf2-%d.yaml" % lc)
        gen("switch", cfg, "ecmp", 1024, lc, "--link=wire", "--tx-queues=%d" % lc,
            "--mbufs=%d" % (2 * 132768), pcap, pcap)
        lanes[lc] = measure_switch(exe, cfg, lc, reps, duration_ms, "f2l%d" % lc, work,
                                   memory_mb=memory_mb, startup_reps=3)
    add("switch ecmp 1024 rules 64 B 100000 flows 2 lcores, tx queue per lcore: Mpps vs 1 lcore",
        lanes[2][0], "Mpps", "same ports, 1 lcore", lanes[1][0],
        ("ratio_min", 1.7, ">= 1.7x one lcore"), reps,
        "2 cores shared with other builds: scaling is bounded by what the machine gives")


# --- Google Benchmark programs -------------------------------------------------------------------

def gbench(exe, reps, min_time, flt=None):
    cmd = [exe, "--benchmark_format=json", "--benchmark_repetitions=%d" % reps,
           "--benchmark_report_aggregates_only=true", "--benchmark_min_time=%g" % min_time]
    if flt:
        cmd.append("--benchmark_filter=" + flt)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, check=False)
    if p.returncode != 0:
        progress("%s failed: %s" % (exe, p.stderr[-400:]))
        return {}
    out = {}
    for b in json.loads(p.stdout)["benchmarks"]:
        if b.get("aggregate_name") != "median":
            continue
        if b.get("error_occurred"):
            progress("%s: %s" % (b["run_name"], b.get("error_message")))
            continue
        out[b["run_name"]] = b
    return out


def ns_of(b):
    """ns per iteration (per packet / per call), from CPU time."""
    scale = {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}[b.get("time_unit", "ns")]
    return b["cpu_time"] * scale


def wire_section(build, reps, min_time):
    progress("bench_wire: parser vs rte_net_get_ptype, ICRC vs rte_net_crc_calc and zlib")
    r = gbench(os.path.join(build, "bench", "bench_wire"), reps, min_time)
    g = lambda n: ns_of(r[n]) if n in r else None  # noqa: E731
    for size in (64, 1024, 4096):
        add("parser %d B" % size, g("BM_PacketParser/%d" % size), "ns/packet", "rte_net_get_ptype",
            g("BM_Baseline_rte_net_get_ptype/%d" % size),
            ("ratio_max", 2.0, "within 2x of rte_net_get_ptype") if size == 64 else None, reps)
    icrc64 = g("BM_Icrc/64")
    add("ICRC 64 B vs today", icrc64, "ns/packet", "ICRC today (issue 14: 222 ns at 64 B)", 222.0,
        ("ratio_max", 0.2, ">= 5x faster than 222 ns"), None, "baseline is the issue's figure")
    for size in (64, 1024, 4096):
        v = g("BM_Icrc/%d" % size)
        add("ICRC %d B" % size, v, "ns/packet", "rte_net_crc_calc (SSE4.2/PCLMUL, unmasked)",
            g("BM_Baseline_rte_net_crc_calc/%d" % size),
            ("ratio_max", 1.5, "within 1.5x of rte_net_crc_calc") if size == 4096 else None, reps)
        add("ICRC %d B vs zlib" % size, v, "ns/packet", "zlib crc32", g(
            "BM_Baseline_zlib_crc32/%d" % size), None, reps)


def reorder_section(build, reps, min_time, quick):
    progress("bench_reorder: ReorderEngine vs rte_reorder per QP")
    flt = "ahead:(1|8|64)/qps:(1|64)$" if quick else None
    r = gbench(os.path.join(build, "bench", "bench_reorder"), reps, min_time, flt)
    for qps in ((1, 64) if quick else (1, 64, 4096)):
        for ahead in (1, 8, 64):
            k = "ahead:%d/qps:%d" % (ahead, qps)
            e = r.get("BM_ReorderEngine/" + k)
            b = r.get("BM_Baseline_rte_reorder_per_qp/" + k)
            tgt = None
            if qps == 64 and ahead == 8:
                tgt = ("ratio_max", 1 / 1.2, ">= 1.2x rte_reorder per QP (ns ratio <= 0.833)")
            add("reorder %d QPs depth %d" % (qps, 0 if ahead == 1 else ahead),
                e["ns_per_packet"] if e else None, "ns/packet",
                "rte_hash + rte_reorder per QP", b["ns_per_packet"] if b else None, tgt, reps,
                "engine handles hold timeouts and the 2^24 PSN wrap; rte_reorder neither")


def tcam_section(build, reps, min_time, quick):
    progress("bench_tcam: Tcam::classify vs rte_acl_classify, rebuild vs rte_acl_build")
    flt = "rules:(1|1024)$" if quick else None
    r = gbench(os.path.join(build, "bench", "bench_tcam"), reps, min_time, flt)
    for rules in ((1, 1024) if quick else (1, 1024, 16384)):
        v = r.get("BM_TcamClassify/rules:%d" % rules)
        b = r.get("BM_Baseline_rte_acl_classify/rules:%d" % rules)
        add("TCAM classify %d rules" % rules, v["ns_per_packet"] if v else None, "ns/packet",
            "raw rte_acl_classify (same rules, keys)", b["ns_per_packet"] if b else None,
            ("ratio_max", 1.2, "<= 1.2x raw rte_acl") if rules > 1 else None, reps)
    if not quick:
        for rules in (16384, 32768):
            v = r.get("BM_TcamRebuild/rules:%d" % rules)
            b = r.get("BM_Baseline_rte_acl_build/rules:%d" % rules)
            add("TCAM rebuild %d rules" % rules, ns_of(v) / 1e6 if v else None, "ms",
                "raw rte_acl create+add+build", ns_of(b) / 1e6 if b else None, None, reps)


def latency_section(build, reps, quick):
    progress("bench_latency: probes through the switch on net_ring at 10/50/90% load")
    exe = os.path.join(build, "bench", "bench_latency")
    runs = []
    for _ in range(reps):
        p = subprocess.run([exe, "--probes", "5000" if quick else "20000"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, check=False)
        if p.returncode == 0:
            runs.append(json.loads(p.stdout))
        else:
            progress("bench_latency failed: " + p.stderr[-300:])
    if not runs:
        return
    for drain in (100000, 0):
        for load in (0.1, 0.5, 0.9):
            def pick(mode, key, load=load, drain=drain):
                return med([e[key] for run in runs for e in run if e["mode"] == mode and
                            e["drain_ns"] == drain and abs(e["load"] - load) < 1e-6])
            for key, label in (("p50_ns", "p50"), ("p99_ns", "p99"), ("p999_ns", "p99.9")):
                tgt = None
                # The switch's own latency: with a 100 us tx drain (switch_emu's default, as
                # l3fwd's) the p99 is the drain timer's, the same with no switch in the loop;
                # a latency-sensitive run sets --tx-drain-us 0, which is what the target is for.
                if key == "p99_ns" and load == 0.5 and drain == 0:
                    tgt = ("value_max", 5000, "p99 < 5 us at 50% load (--tx-drain-us 0)")
                add("switch latency %d%% load, tx drain %s: %s" % (
                    round(load * 100), "100us" if drain else "0", label),
                    pick("switch", key), "ns", "same loop, io forward (no switch)",
                    pick("io_forward", key), tgt, len(runs),
                    "achieved load %.2f of 10G" % (pick("switch", "achieved_load") or 0))


def fabric_runs(exe, out, reps, args):
    """(wall hops/s, hops per CPU second, CPU ns per hop) of `reps` runs, medians."""
    hops, cpu_hops, ns_per_hop = [], [], []
    for _ in range(reps):
        c0 = cpu_children()
        p = subprocess.run([exe, "--quiet", "--seeds", "1", "--json", out] + args,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                           check=False)
        cpu = cpu_children() - c0
        if p.returncode in (0, 5):  # 5: a finite workload unfinished; the hops still count
            with open(out) as f:
                run = json.load(f)["runs"][0]
            hops.append(run["hops_per_s"])
            cpu_hops.append(run["packet_hops"] / cpu)
            ns_per_hop.append(cpu * 1e9 / run["packet_hops"])
        else:
            progress("fabric_emu failed: " + p.stderr[-300:])
    return med(hops), med(cpu_hops), med(ns_per_hop), len(hops)


def fabric_section(build, reps, quick, work):
    progress("fabric_emu: 8 leaves x 8 spines x 8 hosts, 400G, spray: packet-hops/s")
    exe = os.path.join(build, "fabric", "fabric_emu")
    out = os.path.join(work, "fabric.json")
    base = ["--leaves", "8", "--hosts-per-leaf", "8", "--spines", "8", "--link-gbps", "400",
            "--duration", "0.5ms" if quick else "2ms", "--mode", "spray"]
    hops, cpu_hops, _, n = fabric_runs(exe, out, reps, base)
    add("fabric_emu packet-hops per CPU second (spray, 8x8x8, 400G)", cpu_hops, "hops/s",
        None, None, None, n, "packet_hops / process CPU time; issue 9's target is 5 M" +
        (" (quick: 0.5 ms)" if quick else ""))
    add("fabric_emu packet-hops/s wall (runs[0].hops_per_s)", hops, "hops/s", None, None,
        None, n, "wall clock on a shared machine")
    # Congestion control's cost: the same fabric with DCQCN on (the default) and off, CPU time
    # per packet-hop, alternating so both see the same machine. ECMP on the run.sh fabric, where
    # collisions make the switches mark and the NICs cut and pace.
    progress("fabric_emu: CPU per packet-hop, --cc dcqcn vs --cc none (2x8x8, ecmp)")
    cc_args = ["--leaves", "2", "--hosts-per-leaf", "8", "--spines", "8",
               "--duration", "0.5ms" if quick else "2ms", "--mode", "ecmp"]
    on, off = [], []
    for _ in range(reps):
        on.append(fabric_runs(exe, out, 1, cc_args + ["--cc", "dcqcn"])[2])
        off.append(fabric_runs(exe, out, 1, cc_args + ["--cc", "none"])[2])
    add("fabric_emu CPU ns per packet-hop, --cc dcqcn", med([x for x in on if x]), "ns",
        "--cc none, same fabric", med([x for x in off if x]),
        ("ratio_max", 1.10, "DCQCN costs at most 10% more per packet-hop"), len(on),
        "2 leaves x 8 spines x 8 hosts, ecmp permutation")


def first_run(report):
    """The first run of a fabric_emu JSON report; a scenario's (or preset's) report holds one
    report per experiment under "runs"."""
    runs = report["runs"]
    if isinstance(runs, dict):
        runs = next(iter(runs.values()))["runs"]
    return runs[0]


def timed_fabric(exe, out, args):
    """(wall s, CPU s, the first run's JSON) of one fabric_emu run, or None."""
    c0 = cpu_children()
    t0 = time.monotonic()
    p = subprocess.run([exe, "--quiet", "--seeds", "1", "--jobs", "1", "--json", out] + args,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=False)
    wall = time.monotonic() - t0
    cpu = cpu_children() - c0
    if p.returncode not in (0, 5):
        progress("fabric_emu failed: " + p.stderr[-300:])
        return None
    with open(out) as f:
        return wall, cpu, first_run(json.load(f))


def fabric_threads_section(build, reps, quick, work):
    """One run on 1 and 2 threads (logical processes in rounds): wall and CPU time, the speed-up
    and packet-hops per second per core, at 256 and 1024 hosts (spray, 100G, 1 ms)."""
    exe = os.path.join(build, "fabric", "fabric_emu")
    out = os.path.join(work, "fabric-threads.json")
    sizes = [(16, 16, 16)] if quick else [(16, 16, 16), (32, 32, 32)]
    for leaves, spines, per_leaf in sizes:
        hosts = leaves * per_leaf
        args = ["--leaves", str(leaves), "--spines", str(spines), "--hosts-per-leaf",
                str(per_leaf), "--link-gbps", "100", "--mode", "spray",
                "--duration", "0.2ms" if quick else "1ms"]
        progress("fabric_emu: %d hosts, --threads 1 vs 2" % hosts)
        res = {1: [], 2: []}
        for _ in range(reps):
            for t in (1, 2):  # alternating, so that both see the same machine
                r = timed_fabric(exe, out, args + ["--threads", str(t)])
                if r:
                    res[t].append(r)
        if not res[1] or not res[2]:
            continue
        w1, w2 = med([r[0] for r in res[1]]), med([r[0] for r in res[2]])
        c1, c2 = med([r[1] for r in res[1]]), med([r[1] for r in res[2]])
        hops = res[1][0][2]["packet_hops"]
        note = "%d leaves x %d spines x %d hosts, spray, %s" % (
            leaves, spines, per_leaf, "0.2 ms" if quick else "1 ms")
        add("fabric_emu %d hosts: wall s, --threads 2" % hosts, w2, "s", "--threads 1", w1,
            ("ratio_max", 1 / 1.7, "--threads 2 at least 1.7x faster than 1 (wall)")
            if hosts >= 1024 else None, len(res[2]), note)
        add("fabric_emu %d hosts: CPU s, --threads 2" % hosts, c2, "s", "--threads 1", c1, None,
            len(res[2]), note + "; CPU time of both threads")
        add("fabric_emu %d hosts: packet-hops/s per core, --threads 2" % hosts,
            hops / w2 / 2, "hops/s", "--threads 1", hops / w1, None, len(res[2]),
            note + "; packet hops over wall time over threads")


def fabric_jobs_section(build, quick, work):
    """scripts/run.sh's sweep on --jobs 1 and --jobs 2 (FABRIC_JOBS): wall time, same output."""
    outs = {}
    walls = {}
    for jobs in (1, 2):
        d = os.path.join(work, "run-jobs%d" % jobs)
        progress("scripts/run.sh%s with --jobs %d" % (" --quick" if quick else "", jobs))
        env = dict(os.environ, FABRIC_JOBS=str(jobs),
                   FABRIC_EMU=os.path.join(build, "fabric", "fabric_emu"))
        t0 = time.monotonic()
        p = subprocess.run([os.path.join(ROOT, "scripts", "run.sh"), "--out", d] +
                           (["--quick"] if quick else []), env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, text=True, check=False)
        walls[jobs] = time.monotonic() - t0
        outs[jobs] = p.stdout if p.returncode in (0, 5) else None
    same = outs[1] is not None and outs[1] == outs[2]
    add("scripts/run.sh%s wall s, --jobs 2" % (" --quick" if quick else ""), walls[2], "s",
        "--jobs 1", walls[1], ("ratio_max", 1 / 1.8, "--jobs 2 at least 1.8x faster than 1"),
        1, "tables identical: %s" % ("yes" if same else "NO"))


def nic_section(build, reps, quick):
    exe = os.path.join(build, "bench", "bench_nic")
    if not os.path.exists(exe):
        progress("bench_nic not built: nic_emu figures skipped")
        return
    progress("bench_nic: NicNode spray TX and reorder RX")
    r = gbench(exe, reps, 0.05 if quick else 0.2)
    for name, base in (("BM_NicSprayTx", "BM_Baseline_NicFlowTx"),
                       ("BM_NicReorderRx", "BM_Baseline_NicNoReorderRx")):
        for size in (64, 1024):
            v = r.get("%s/payload:%d" % (name, size))
            b = r.get("%s/payload:%d" % (base, size))
            spray = "Spray" in name
            label = "NicNode spray TX (rr)" if spray else "NicNode reorder RX (64 QPs, 8 deep)"
            add("%s %d B payload" % (label, size), v["ns_per_packet"] if v else None, "ns/packet",
                "spray mode flow" if spray else "receive: none (no reorder engine)",
                b["ns_per_packet"] if b else None, None, reps)


def pmd_section(build, reps):
    """switch_emu on net_af_xdp beside net_af_packet, same veth pair, same lcore (bench/veth_pmd.py).
    Needs root and network namespaces; says why when it cannot run."""
    sys.path.insert(0, HERE)
    import veth_pmd  # noqa: E402
    exe = os.path.join(build, "switch_emu", "switch_emu")
    if os.geteuid() != 0:
        progress("pmd: not root (network namespaces and veth need it): skipped")
        return
    res = {"af_packet": [], "af_xdp": []}
    why = {}
    for _ in range(reps):
        for pmd in ("af_packet", "af_xdp"):  # alternating, so that both see the same machine
            progress("switch_emu on veth, net_%s: 1000 frames looped to TTL 0" % pmd)
            r = veth_pmd.measure(exe, pmd)
            if r["mpps"] is not None and r["exit"] == 0:
                res[pmd].append(r["mpps"])
            else:
                why[pmd] = r["error"] or "no rate measured"
                progress("pmd %s: %s" % (pmd, why[pmd]))
    note = "one veth pair looped through one lcore (busy polling), 64 B UDP frames"
    if "af_xdp" in why and not res["af_xdp"]:
        note += "; net_af_xdp did not run: " + why["af_xdp"]
    add("switch_emu on veth, net_af_xdp: Mpps", med(res["af_xdp"]), "Mpps",
        "net_af_packet (qdisc_bypass), same veth", med(res["af_packet"]), None,
        len(res["af_xdp"]), note)


def clos_section(build, quick, work):
    """The three-tier fabric of issue 30: 8192 hosts (16 pods x 16 leaves x 32 hosts, radix-64
    leaves and spines, 100G), 1 ms of permutation, spray and ecmp, --threads 2 (quick: 2 pods x
    4 leaves x 8 hosts, 0.2 ms): wall and CPU time, packet-hops per second, peak RSS."""
    exe = os.path.join(build, "fabric", "fabric_emu")
    out = os.path.join(work, "clos.json")
    if quick:
        shape = ["--pods", "2", "--leaves", "4", "--hosts-per-leaf", "8", "--spines", "4",
                 "--links-per-spine", "2", "--super-spines", "4", "--links-per-super", "2"]
        duration, label = "0.2ms", "3 tiers, 64 hosts (quick)"
    else:
        shape = ["--pods", "16", "--leaves", "16", "--hosts-per-leaf", "32", "--spines", "16",
                 "--links-per-spine", "2", "--super-spines", "16", "--links-per-super", "2"]
        duration, label = "1ms", "3 tiers, 8192 hosts"
    for mode in ("spray", "ecmp"):
        progress("fabric_emu %s, %s, permutation %s, --threads 2 (minutes at 8192 hosts)" % (
            label, mode, duration))
        r = timed_fabric(exe, out, ["--threads", "2", "--tiers", "3", "--link-gbps", "100",
                                    "--mode", mode, "--workload", "permutation", "--duration",
                                    duration] + shape)
        if r is None:
            continue
        wall, cpu, run = r
        note = "%s, %s; throughput %.3f of the line rate, %d retransmitted" % (
            label, mode, run["throughput_fraction"], run["packets_retransmitted"])
        name = "fabric_emu %s %s" % (label, mode)
        add(name + ": wall s", wall, "s", None, None, None, 1, note)
        add(name + ": CPU s", cpu, "s", None, None, None, 1, "user + sys of the process")
        add(name + ": packet-hops per CPU second", run["packet_hops"] / cpu, "hops/s", None,
            None, None, 1, "%d packet hops" % run["packet_hops"])
        add(name + ": peak RSS", run["peak_rss_mb"], "MB", None, None,
            ("value_max", 20 * 1024, "within 20 GiB") if not quick else None, 1,
            "the process's VmHWM at the end")


def flows_section(build, quick, work):
    """Issue 39: the flow-size experiment's cost. 128 hosts (8 leaves x 8 spines x 16 hosts,
    100G), AliStorage2019 at 0.25 of each host's line rate, ecmp, one thread: CPU per packet-hop
    and peak RSS at 1, 2 and 10 ms of arrivals (quick: 32 hosts, 0.25, 0.5 and 2.5 ms). The cost
    of a packet must not grow with the flows a NIC has had (target: 10 ms within 1.3x of 1 ms
    per hop), nor memory with the flows ever started (10 ms at most 1.5x 2 ms)."""
    exe = os.path.join(build, "fabric", "fabric_emu")
    out = os.path.join(work, "flows.json")
    if quick:
        shape = ["--leaves", "4", "--spines", "4", "--hosts-per-leaf", "8"]
        first, short, long_, label = "0.25ms", "0.5ms", "2.5ms", "32 hosts (quick)"
    else:
        shape = ["--leaves", "8", "--spines", "8", "--hosts-per-leaf", "16"]
        first, short, long_, label = "1ms", "2ms", "10ms", "128 hosts"
    figures = {}
    for duration in (first, short, long_):
        progress("fabric_emu %s, cdf alistorage2019 at load 0.25, ecmp, %s of arrivals" % (
            label, duration))
        r = timed_fabric(exe, out, ["--threads", "1", "--workload", "cdf", "--cdf",
                                    "alistorage2019", "--load", "0.25", "--mode", "ecmp",
                                    "--duration", duration] + shape)
        if r is None:
            continue
        wall, cpu, run = r
        hops = run["packet_hops"]
        figures[duration] = (cpu * 1e9 / hops, run["peak_rss_mb"])
        name = "fabric_emu cdf %s, %s" % (label, duration)
        add(name + ": CPU ns per packet-hop", cpu * 1e9 / hops, "ns", None, None, None, 1,
            "%d packet hops, %d messages, %.1f s wall, %.1f s CPU" % (
                hops, run["messages_completed"], wall, cpu))
        add(name + ": peak RSS", run["peak_rss_mb"], "MB", None, None, None, 1,
            "the process's VmHWM at the end")
    if first in figures and long_ in figures:
        add("fabric_emu cdf %s: CPU per packet-hop, %s of arrivals" % (label, long_),
            figures[long_][0], "ns", "%s of arrivals" % first, figures[first][0],
            ("ratio_max", 1.3, "within 1.3x of the short run"), 1,
            "per-packet cost independent of the flows a NIC has had")
    if short in figures and long_ in figures:
        add("fabric_emu cdf %s: peak RSS, %s of arrivals" % (label, long_),
            figures[long_][1], "MB", "%s of arrivals" % short, figures[short][1],
            ("ratio_max", 1.5, "at most 1.5x the short run"), 1,
            "a finished flow's QP state is freed; its results (counters, heat map entry, "
            "FCT, plan) stay: about 0.6 KB a flow (no --csv: no flows.csv records)")
    if quick:
        return
    # The paper's own run: ConWeave's 2-tier set-up, 0.1 s of arrivals, one mode and seed.
    progress("fabric_emu --scenario conweave-os2, ecmp, seed 1, 0.1 s of arrivals (about 3 min)")
    # (Its report is a preset's: the run is under runs.base; first_run finds it.)
    r = timed_fabric(exe, out, ["--threads", "1", "--scenario", "conweave-os2", "--mode", "ecmp"])
    if r is None:
        return
    wall, cpu, run = r
    add("fabric_emu conweave-os2 (128 hosts, 0.1 s), one mode and seed: CPU time", cpu, "s",
        None, None, ("value_max", 600.0, "under 10 minutes of one core"), 1,
        "%d packet hops, %d messages, %.0f s wall, peak RSS %.0f MB (ns-3 ConWeave: about an "
        "hour per run)" % (run["packet_hops"], run["messages_completed"], wall,
                           run["peak_rss_mb"]))


def fmt(x):
    if x is None:
        return "-"
    if abs(x) >= 1e6:
        return "%.3g" % x
    if abs(x) >= 100:
        return "%.0f" % x
    return "%.3g" % x


def table():
    rows = [("figure", "value", "unit", "baseline", "base value", "ratio", "target", "met")]
    for f in FIGURES:
        rows.append((f["name"], fmt(f["value"]), f["unit"], f["baseline"] or "-",
                     fmt(f["baseline_value"]), fmt(f["ratio"]),
                     f["target"]["text"] if f["target"] else "-",
                     {True: "yes", False: "NO", None: "-"}[f["met"]]))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for i, r in enumerate(rows):
        lines.append("  ".join(c.ljust(widths[j]) for j, c in enumerate(r)).rstrip())
        if i == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--json")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", help="comma-separated sections (switch,switch-flows,wire,reorder,"
                                   "tcam,latency,fabric,nic,pmd,clos,flows); default all")
    a = ap.parse_args()
    a.build = os.path.abspath(a.build)
    sections = set((a.only or "switch,switch-flows,wire,reorder,tcam,latency,fabric,nic,pmd,clos,"
                           "flows").split(","))
    reps = 3
    min_time = 0.02 if a.quick else 0.05
    work = tempfile.mkdtemp(prefix="spraynet-bench-")
    global TSC_HZ
    try:
        if TSC_HZ is None:
            testpmd("bench-tp-tsc", "net_null1,no-rx=1", 0)  # reads the TSC rate from EAL's log
        if TSC_HZ is None:
            sys.exit("bench: could not read the TSC rate from dpdk-testpmd")
        progress("TSC %.3f GHz; %s run, %d repetitions" % (TSC_HZ / 1e9, "quick" if a.quick
                                                             else "full", reps))
        if "switch" in sections:
            switch_section(a.build, work, a.quick, 3)
        if "switch-flows" in sections:
            switch_flows_section(a.build, work, a.quick, 3)
        if "wire" in sections:
            wire_section(a.build, reps, min_time)
        if "reorder" in sections:
            reorder_section(a.build, reps, min_time, a.quick)
        if "tcam" in sections:
            tcam_section(a.build, reps, min_time, a.quick)
        if "nic" in sections:
            nic_section(a.build, reps, a.quick)
        if "latency" in sections:
            latency_section(a.build, 3, a.quick)
        if "fabric" in sections:
            fabric_section(a.build, 1 if a.quick else 3, a.quick, work)
            fabric_threads_section(a.build, 1 if a.quick else 2, a.quick, work)
            fabric_jobs_section(a.build, a.quick, work)
        if "pmd" in sections:
            pmd_section(a.build, 1 if a.quick else 3)
        if "clos" in sections:
            clos_section(a.build, a.quick, work)
        if "flows" in sections:
            flows_section(a.build, a.quick, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    elapsed = time.time() - T0
    print(table())
    met = [f for f in FIGURES if f["met"] is not None]
    print("\n%d figures, %d with a target: %d met, %d missed; %.0f s" % (
        len(FIGURES), len(met), sum(f["met"] for f in met), sum(not f["met"] for f in met),
        elapsed))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"machine": os.uname().nodename, "cpus": os.cpu_count(),
                       "tsc_hz": TSC_HZ, "quick": a.quick, "seconds": elapsed,
                       "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                       "figures": FIGURES}, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
