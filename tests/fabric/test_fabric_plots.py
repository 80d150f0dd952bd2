#!/usr/bin/env python3
"""scripts/fabric_plots.py on small synthetic fabric_emu reports: every PNG is written and is
a real PNG; the link heat map has a row for every link (64 uplinks and more stay readable:
the figure grows with the rows up to a cap), an idle link drawn apart from a missing sample;
an all-reduce report gets its plots; panels of zeros get no offset ("1e-9") axis, log axes
plain tick labels, and no error bar goes below zero; a missing time series or missing optional
report fields only skip plots; an unreadable or malformed input fails with a message; the
congestion-control plot (cc_rates.png) from a report's "cc_timeline", skipped without one; the
time series' "qp:" rows (a QP's rate) stay out of the link plots; and one real fabric_emu run
with --plots draws cc_rates.png.

Run: python3 tests/fabric/test_fabric_plots.py   (FABRIC_PLOTS=path overrides the script;
FABRIC_EMU=path the program, else build/fabric/fabric_emu, its test skipped when absent)
"""

import importlib.util
import json
import math
import os
import random
import struct
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from system_python import use_python_with_matplotlib  # noqa: E402

use_python_with_matplotlib(__file__)  # the in-process checks draw the figures themselves

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.environ.get("FABRIC_PLOTS", os.path.join(REPO, "scripts", "fabric_plots.py"))

ALL_PNGS = ["link_util_heatmap.png", "uplink_util.png", "throughput.png", "fct_cdf.png",
            "slowdown.png", "reorder_depth.png", "pfc_timeline.png", "goodput_timeline.png"]
TS_PNGS = ["link_util_heatmap.png", "uplink_util.png"]  # the ones that need --timeseries
CC_PNG = "cc_rates.png"  # needs a run with "cc_timeline"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
EMU = os.environ.get("FABRIC_EMU", os.path.join(REPO, "build", "fabric", "fabric_emu"))
MODES = ["ecmp", "dlb", "spray"]
SEEDS = [1, 2]


def make_report(rng):
    runs = []
    for mi, mode in enumerate(MODES):
        for seed in SEEDS:
            scale = [40.0, 25.0, 12.0][mi]
            samples = [rng.lognormvariate(0, 1.2) * scale for _ in range(800)]
            bins = [6667, 20000, 30000, 50000, 73077, 200000, 1000000, 2000000, 5000000, 30000000]
            slowdown = {"binning": "deciles", "bins": [
                {"lo_bytes": bins[i - 1] if i else 0, "hi_bytes": b, "count": 50 + i,
                 "unfinished": 0, "mean": 1.5 + scale / 10,
                 "p50": 1.0 + scale / 20 * (1 + i / 5), "p95": 1.5 + scale / 5,
                 "p99": 2.0 + scale / 4 * (1 + i / 3)} for i, b in enumerate(bins)]}
            if mode == "ecmp":
                hist = [[0, 100000]]
                timeline = [[0.0, 0], [120.0, 3], [180.5, 5], [260.0, 1], [400.0, 0]]
            else:
                hist = [[d, int(50000 / (1 + d) ** (1.5 if mode == "spray" else 3))]
                        for d in range(0, 40)]
                timeline = [] if mode == "spray" else [[300.0, 1], [310.0, 0]]
            runs.append({
                "mode": mode, "workload": "websearch", "seed": seed,
                "throughput_fraction": 0.9 - 0.1 * mi,
                "fct_us": {"p50": 10.0, "p99": 200.0, "max": 900.0},
                "fct_samples_us": samples,
                "slowdown": slowdown,
                "reorder": {"max_depth": hist[-1][0], "p99_depth": 7, "timeouts": mi,
                            "depth_histogram": hist},
                "pfc": {"pause_frames": len(timeline), "paused_us": 140.5,
                        "longest_pause_us": 80.0, "timeline": timeline},
                "goodput_timeline": [[t * 10.0, 0.5 + 0.3 * rng.random()] for t in range(1, 121)],
                "uplink_util_by_link": {f"leaf{l}>spine{s}#0": 0.5 for l in range(4)
                                        for s in range(4)},
            })
    return {"config": {"leaves": 4, "spines": 4, "events": ["link-down:leaf0-spine3@300us"]},
            "runs": runs, "summary": {"runs": len(runs)}}


def make_allreduce_report(rng, modes=("ecmp", "spray"), seeds=(1, 2, 3)):
    """Shaped like fabric_emu --workload allreduce: busbw, no slowdown bins, no reordering."""
    runs = []
    for mi, mode in enumerate(modes):
        for seed in seeds:
            frac = [0.42, 0.68][mi % 2] + 0.05 * rng.uniform(-1, 1)
            runs.append({
                "mode": mode, "workload": "allreduce", "seed": seed, "completed": True,
                "messages_completed": 480, "messages_expected": 480,
                "virtual_us": 1000.0 / frac, "window_us": [0.0, 1000.0 / frac],
                "throughput_fraction": frac, "collective_bw_fraction": frac,
                "algbw_gbps": frac * 53.3, "busbw_gbps": frac * 100.0,
                "fct_us": {"p50": 30.0, "p99": 200.0, "max": 240.0},
                "fct_samples_us": [26.0 + rng.expovariate(1 / (5.0 + 60 * (1 - mi)))
                                   for _ in range(480)],
                "reorder": {"max_depth": 0, "p99_depth": 0, "timeouts": 0, "depth_histogram": []},
                "pfc": {"pause_frames": 0, "paused_us": 0.0, "longest_pause_us": 0.0,
                        "timeline": [[t * 100.0, 0] for t in range(1, 15)]},
                "goodput_timeline": [[t * 100.0, frac] for t in range(1, 15)],
            })
    return {"config": {"workload": "allreduce", "events": []}, "runs": runs, "summary": {}}


def write_timeseries(path, rng, modes=MODES, seeds=SEEDS, leaves=4, spines=4, steps=120,
                     dt=10.0, idle=(), skip=(), zero=False):
    """Every leaf>spine and spine>leaf link and a host>leaf uplink per leaf, every `dt` µs.
    Links in `idle` carry 0 throughout, links in `skip` have no rows at all; `zero`: all 0."""
    with open(path, "w") as f:
        f.write("mode,seed,t_us,link,util,queue_bytes,paused\n")
        for mode in modes:
            for seed in seeds:
                for step in range(1, steps + 1):
                    t = step * dt
                    for leaf in range(leaves):
                        for spine in range(spines):
                            u = min(1.0, max(0.0, 0.5 + 0.4 * rng.uniform(-1, 1)))
                            for link in (f"leaf{leaf}>spine{spine}#0", f"spine{spine}>leaf{leaf}#0"):
                                if link in skip:
                                    continue
                                v = 0.0 if zero or link in idle else u
                                f.write(f"{mode},{seed},{t},{link},{v:.4f},{int(v * 30000)},0\n")
                        f.write(f"{mode},{seed},{t},h{leaf}>leaf{leaf}#0,"
                                f"{0.0 if zero else 0.5},0,0\n")


def add_cc(report, modes=None, qps=8, steps=300, dt=1.0, kmin=400000, kmax=1600000):
    """Gives the first seed of each mode in `modes` (all when None) fabric_emu's congestion
    control fields: "cc", "queue_bytes" and a "cc_timeline" of `qps` QPs' rates (DCQCN-like
    cuts and recovery) and the busiest queue filling past kmax and draining."""
    seen = set()
    for mi, run in enumerate(report["runs"]):
        mode = run["mode"]
        if mode in seen or (modes is not None and mode not in modes):
            continue
        seen.add(mode)
        t = [dt * (i + 1) for i in range(steps)]
        queue = [int(max(0.0, 2.4e6 * math.sin(math.pi * min(1.0, x / (0.6 * steps * dt)))
                          * (1 + 0.1 * mi))) for x in t]
        rates = {}
        for q in range(qps):
            cut = (q + 1) * 0.07 * steps * dt / qps + 10
            rates[f"h{q}>h{qps + 1}/0"] = [100.0 if x < cut else
                                           max(1.0, 100.0 * math.exp(-(x - cut) / 40.0)
                                               + 60.0 * (1 - math.exp(-max(0.0, x - 0.5 * steps * dt)
                                                                      / 30.0)) / (1 + q % 3))
                                           for x in t]
        run["cc"] = {"mode": "dcqcn", "ecn_marked": 300, "ce_received": 290, "cnps_sent": 120,
                     "cnps_suppressed": 170, "cnps_received": 120, "rate_cuts": 118,
                     "qps": qps + 4, "qps_at_min_rate": 1, "qps_limited_at_end": 3,
                     "mean_rate_fraction": 0.41}
        run["queue_bytes"] = {"port": "leaf1.h9", "mean": sum(queue) / steps,
                              "p50": sorted(queue)[steps // 2], "p99": max(queue),
                              "max": max(queue), "samples": steps, "interval_us": dt,
                              "kmin": kmin, "kmax": kmax}
        run["cc_timeline"] = {"t_us": t, "queue_bytes": queue, "qp_rate_gbps": rates}
    report["config"]["link_gbps"] = 100.0
    return report


def add_qp_rows(path, modes=MODES, seeds=SEEDS, steps=120, dt=10.0, qps=3):
    """fabric_emu's per-QP rows of the time series: link "qp:SRC>DST/INDEX", util = the QP's
    rate over the link rate, queue_bytes 0, paused 0."""
    with open(path, "a") as f:
        for mode in modes:
            for seed in seeds:
                for step in range(1, steps + 1):
                    for q in range(qps):
                        f.write(f"{mode},{seed},{step * dt},qp:h{q}>h9/0,"
                                f"{1.0 / (1 + 0.01 * step * (q + 1)):.4f},0,0\n")


def load_script():
    """The script as a module (its plots are functions; main() only runs when called)."""
    spec = importlib.util.spec_from_file_location("fabric_plots_under_test", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def draw_in_process(*argv):
    """Runs the script's main() here, keeping each figure (drawn, not written): (module,
    status, {png name: figure}, stderr)."""
    import contextlib
    import io

    mod = load_script()
    figs = {}

    def keep(fig, _plt, out_dir, name, written):
        fig.canvas.draw()
        figs[name] = fig
        written.append(os.path.join(out_dir, name))

    mod.save = keep
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        rc = mod.main(list(argv))
    return mod, rc, figs, err.getvalue()


def close_all(figs):
    import matplotlib.pyplot as plt
    for fig in figs.values():
        plt.close(fig)


def heat_panels(fig):
    """[(axes, QuadMesh)] of the heat map's panels, top to bottom (not the colour bar's)."""
    from matplotlib.collections import QuadMesh
    out = []
    for ax in fig.axes:
        meshes = [c for c in ax.collections if isinstance(c, QuadMesh)]
        if not ax.get_title():  # the colour bar
            continue
        if meshes:
            out.append((ax, meshes[0]))
    return sorted(out, key=lambda p: -p[0].get_position().y0)


def run_script(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True,
                          timeout=300)


def png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    if head[:8] != PNG_MAGIC or head[12:16] != b"IHDR":
        return None
    return struct.unpack(">II", head[16:24])


class FabricPlotsTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="fabric_plots_test_")
        self.dir = self.tmp.name
        rng = random.Random(42)
        self.report = os.path.join(self.dir, "report.json")
        with open(self.report, "w") as f:
            json.dump(make_report(rng), f)
        self.ts = os.path.join(self.dir, "ts.csv")
        write_timeseries(self.ts, rng)

    def tearDown(self):
        self.tmp.cleanup()

    def check_pngs(self, out, names):
        for name in names:
            path = os.path.join(out, name)
            self.assertTrue(os.path.isfile(path), f"{name} not written")
            size = png_size(path)
            self.assertIsNotNone(size, f"{name} is not a PNG")
            self.assertGreater(size[0], 300, name)
            self.assertGreater(size[1], 200, name)
            self.assertGreater(os.path.getsize(path), 10000, f"{name} looks empty")

    def test_all_plots(self):
        out = os.path.join(self.dir, "out")  # does not exist yet: the script makes it
        r = run_script("--json", self.report, "--timeseries", self.ts, "--out", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.check_pngs(out, ALL_PNGS)
        printed = [line for line in r.stdout.splitlines() if line.strip()]
        self.assertEqual(sorted(os.path.basename(p) for p in printed), sorted(ALL_PNGS))
        for p in printed:
            self.assertTrue(os.path.isfile(p), p)
        self.assertEqual(sorted(os.listdir(out)), sorted(ALL_PNGS))
        self.assertNotIn("Traceback", r.stderr)

    def check_axes(self, figs):
        """No axis of any figure has an offset or scientific-notation label; every log axis
        has at least two plain major labels in view and unlabelled minor ticks."""
        logs = 0
        for name, fig in figs.items():
            for ax in fig.axes:
                for axis in (ax.xaxis, ax.yaxis):
                    where = f"{name}: {ax.get_title() or 'axes'} {axis.axis_name}"
                    self.assertEqual(axis.get_offset_text().get_text(), "", where)
                    lo, hi = sorted(axis.get_view_interval())
                    shown = [t.get_text() for loc, t in
                             zip(axis.get_majorticklocs(), axis.get_majorticklabels())
                             if lo <= loc <= hi and t.get_text()]
                    for text in shown:
                        for bad in ("$", "^", "e-0", "e+0", "1e-"):
                            self.assertNotIn(bad, text, f"{where}: tick label {text!r}")
                    if axis.get_scale() == "log":
                        logs += 1
                        self.assertGreaterEqual(len(shown), 2, f"{where}: {shown}")
                        minor = [t.get_text() for t in axis.get_minorticklabels()]
                        self.assertEqual([t for t in minor if t], [], where)
        return logs

    def test_figures_in_process(self):
        _, rc, figs, err = draw_in_process("--json", self.report, "--timeseries", self.ts,
                                           "--out", os.path.join(self.dir, "unused"))
        try:
            self.assertEqual(rc, 0, err)
            self.assertEqual(sorted(figs), sorted(ALL_PNGS))
            # fct_cdf x, slowdown x (both panels) and p99 y, reorder_depth y.
            self.assertGreaterEqual(self.check_axes(figs), 5)
            cdf_x = figs["fct_cdf.png"].axes[0].xaxis
            self.assertTrue(any("µs" in t.get_text() or "ms" in t.get_text()
                                for t in cdf_x.get_majorticklabels()))
        finally:
            close_all(figs)

    def test_heatmap_idle_and_missing_links(self):
        rng = random.Random(7)
        ts = os.path.join(self.dir, "holes.csv")
        idle = {"leaf1>spine2#0"}
        skip = {"spine3>leaf0#0"}
        # Two modes: one has every link (leaf1>spine2 idle throughout), one lacks spine3>leaf0.
        write_timeseries(ts, rng, modes=["ecmp"], seeds=[1], steps=30, idle=idle)
        write_timeseries(ts + ".2", rng, modes=["spray"], seeds=[1], steps=30, idle=idle,
                         skip=skip)
        with open(ts, "a") as f, open(ts + ".2") as g:
            next(g)
            f.write(g.read())
        mod, rc, figs, err = draw_in_process("--json", self.report, "--timeseries", ts,
                                             "--out", os.path.join(self.dir, "unused"))
        try:
            self.assertEqual(rc, 0, err)
            fig = figs["link_util_heatmap.png"]
            panels = heat_panels(fig)
            self.assertEqual(len(panels), 2)
            links = ({f"leaf{l}>spine{s}#0" for l in range(4) for s in range(4)} |
                     {f"spine{s}>leaf{l}#0" for l in range(4) for s in range(4)} |
                     {f"h{l}>leaf{l}#0" for l in range(4)})
            rows = mod.heatmap_rows(links)
            self.assertEqual(len(rows), 36)
            # Tiers in order: host uplinks, leaf>spine, spine>leaf.
            self.assertEqual([mod.link_tier(r) for r in rows], [0] * 4 + [1] * 16 + [2] * 16)
            import numpy as np
            for (ax, mesh), mode in zip(panels, ["ecmp", "spray"]):
                self.assertIn(mode, ax.get_title())
                self.assertEqual(round(max(ax.get_ylim())), len(rows), "a row per link")
                values = np.ma.asarray(mesh.get_array()).reshape(len(rows), -1)
                mask = np.ma.getmaskarray(values)
                idle_row = rows.index("leaf1>spine2#0")
                busy_row = rows.index("leaf0>spine0#0")
                gone_row = rows.index("spine3>leaf0#0")
                self.assertFalse(mask[idle_row].any(), "an idle link is data, not missing")
                self.assertTrue((values[idle_row] < mesh.norm.vmin).all(),
                                "idle drawn below the scale, in the 'under' colour")
                self.assertFalse(mask[busy_row].any())
                self.assertTrue((values[busy_row] > 0).all())
                self.assertEqual(bool(mask[gone_row].all()), mode == "spray",
                                 "a link without rows is a row of missing samples")
                self.assertIn("1 idle throughout", ax.get_title())
            cmap, norm = panels[0][1].cmap, panels[0][1].norm
            under = cmap(norm(mod.IDLE_VALUE))
            self.assertEqual(tuple(under), (1.0, 1.0, 1.0, 1.0), "idle is white")
            self.assertNotEqual(tuple(cmap(norm(0.001))), tuple(under), "0.1 % is not idle")
            self.assertEqual(cmap(np.ma.masked_invalid([math.nan]))[0][3], 0.0,
                             "missing is transparent over the hatched background")
            self.assertTrue(any(p.get_hatch() for p in panels[0][0].patches))
            self.check_axes(figs)
        finally:
            close_all(figs)

    def test_heatmap_64_links_and_more(self):
        rng = random.Random(3)
        small = os.path.join(self.dir, "small_out")
        r = run_script("--json", self.report, "--timeseries", self.ts, "--out", small)
        self.assertEqual(r.returncode, 0, r.stderr)
        ts = os.path.join(self.dir, "big.csv")
        write_timeseries(ts, rng, leaves=4, spines=16, steps=40)  # 64 up + 64 down + 4 hosts
        out = os.path.join(self.dir, "big_out")
        r = run_script("--json", self.report, "--timeseries", ts, "--out", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn("failed", r.stderr)
        self.check_pngs(out, TS_PNGS)
        h_small = png_size(os.path.join(small, "link_util_heatmap.png"))[1]
        h_big = png_size(os.path.join(out, "link_util_heatmap.png"))[1]
        self.assertGreater(h_big, h_small, "the figure grows with the rows")
        self.assertLessEqual(h_big, 31 * 110, "up to a cap")

        _, rc, figs, err = draw_in_process("--json", self.report, "--timeseries", ts,
                                           "--out", os.path.join(self.dir, "unused"))
        try:
            self.assertEqual(rc, 0, err)
            panels = heat_panels(figs["link_util_heatmap.png"])
            self.assertEqual(len(panels), len(MODES))
            for ax, _ in panels:
                self.assertEqual(round(max(ax.get_ylim())), 132)
                labels = [t.get_text() for t in ax.get_yticklabels() if t.get_text()]
                self.assertGreaterEqual(len(labels), 12, "rows are labelled")
                self.assertLess(len(labels), 132 // 2, "every k-th row only")
                self.assertLessEqual(max(t.get_fontsize() for t in ax.get_yticklabels()), 7)
            self.check_axes(figs)
        finally:
            close_all(figs)

    def test_allreduce_report(self):
        rng = random.Random(11)
        path = os.path.join(self.dir, "allreduce.json")
        with open(path, "w") as f:
            json.dump(make_allreduce_report(rng), f)
        ts = os.path.join(self.dir, "ar.csv")
        write_timeseries(ts, rng, modes=["ecmp", "spray"], seeds=[1, 2, 3], steps=14, dt=100.0)
        out = os.path.join(self.dir, "ar_out")
        r = run_script("--json", path, "--timeseries", ts, "--out", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn("failed", r.stderr)
        self.assertNotIn("Traceback", r.stderr)
        want = ["link_util_heatmap.png", "uplink_util.png", "throughput.png", "fct_cdf.png",
                "pfc_timeline.png", "goodput_timeline.png"]
        self.check_pngs(out, want)
        self.assertEqual(sorted(os.listdir(out)), sorted(want))
        self.assertIn("slowdown.png skipped", r.stderr)
        self.assertIn("reorder_depth.png skipped", r.stderr)

        _, rc, figs, err = draw_in_process("--json", path, "--timeseries", ts,
                                           "--out", os.path.join(self.dir, "unused"))
        try:
            self.assertEqual(rc, 0, err)
            titles = [ax.get_title() for ax in figs["throughput.png"].axes]
            self.assertIn("all-reduce bus bandwidth", titles)
            self.assertIn("job completion time", titles)
            self.check_axes(figs)
        finally:
            close_all(figs)

    def test_zero_panels_and_error_bars(self):
        rng = random.Random(5)
        report = make_allreduce_report(rng, modes=("ecmp", "dlb", "spray"))
        for run in report["runs"]:
            if run["mode"] == "ecmp":  # all zero: nothing moved
                for k in ("throughput_fraction", "collective_bw_fraction", "algbw_gbps",
                          "busbw_gbps"):
                    run[k] = 0.0
                run["goodput_timeline"] = [[t * 100.0, 0.0] for t in range(1, 15)]
        # dlb: spread wider than the mean (0, 0, 3): mean - sd would be below zero.
        for run, v in zip([r for r in report["runs"] if r["mode"] == "dlb"], (0.0, 0.0, 0.9)):
            run["busbw_gbps"] = v * 100
            run["collective_bw_fraction"] = v
        path = os.path.join(self.dir, "zero.json")
        with open(path, "w") as f:
            json.dump(report, f)
        ts = os.path.join(self.dir, "zero.csv")
        write_timeseries(ts, rng, modes=["ecmp", "dlb", "spray"], seeds=[1], steps=14, dt=100.0,
                         zero=True)
        _, rc, figs, err = draw_in_process("--json", path, "--timeseries", ts,
                                           "--out", os.path.join(self.dir, "unused"))
        try:
            self.assertEqual(rc, 0, err)
            self.assertNotIn("failed", err)
            self.check_axes(figs)
            from matplotlib.container import ErrorbarContainer
            bars = 0
            for ax in figs["throughput.png"].axes:
                lo, hi = ax.get_ylim()
                self.assertEqual(lo, 0.0, ax.get_title())
                self.assertGreater(hi, 0.0, ax.get_title())
                for c in ax.containers:
                    if isinstance(c, ErrorbarContainer):
                        for lc in c.lines[2]:
                            for seg in lc.get_segments():
                                bars += 1
                                self.assertGreaterEqual(min(y for _, y in seg), 0.0,
                                                        f"{ax.get_title()}: bar below zero")
            self.assertGreater(bars, 0)
            heat = heat_panels(figs["link_util_heatmap.png"])
            self.assertIn("36 idle throughout", heat[0][0].get_title())
            gp = figs["goodput_timeline.png"].axes[0]
            self.assertEqual(gp.get_ylim()[0], 0.0)
        finally:
            close_all(figs)
        out = os.path.join(self.dir, "zero_out")
        r = run_script("--json", path, "--timeseries", ts, "--out", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.check_pngs(out, ["link_util_heatmap.png", "throughput.png", "goodput_timeline.png"])

    def test_cc_rates_plot(self):
        rng = random.Random(13)
        report = add_cc(make_report(rng), modes=["ecmp", "spray"])
        path = os.path.join(self.dir, "cc.json")
        with open(path, "w") as f:
            json.dump(report, f)
        out = os.path.join(self.dir, "cc_out")
        r = run_script("--json", path, "--timeseries", self.ts, "--out", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn("failed", r.stderr)
        self.assertNotIn("Traceback", r.stderr)
        self.check_pngs(out, ALL_PNGS + [CC_PNG])
        self.assertEqual(sorted(os.listdir(out)), sorted(ALL_PNGS + [CC_PNG]))
        printed = [line for line in r.stdout.splitlines() if line.strip()]
        self.assertIn(os.path.join(out, CC_PNG), printed)

        _, rc, figs, err = draw_in_process("--json", path, "--timeseries", self.ts,
                                           "--out", os.path.join(self.dir, "unused"))
        try:
            self.assertEqual(rc, 0, err)
            self.assertIn(CC_PNG, figs)
            self.check_axes(figs)
            fig = figs[CC_PNG]
            # Per mode a rates axis (titled) above a queue axis (sharing its time axis).
            rate_axes = [ax for ax in fig.axes if ax.get_title()]
            self.assertEqual(len(rate_axes), 2)
            self.assertEqual(len(fig.axes), 4)
            for ax, mode in zip(rate_axes, ["ecmp", "spray"]):
                title = ax.get_title()
                self.assertIn(mode, title)
                self.assertIn("leaf1.h9", title, "the busiest queue's port is named")
                self.assertIn("Gbit/s", ax.get_ylabel())
                qp_lines = [l for l in ax.get_lines() if not l.get_label().startswith("_")]
                self.assertEqual(len(qp_lines), 8, "a line per QP")
                legend = [t.get_text() for t in ax.get_legend().get_texts()]
                self.assertEqual(legend, [f"h{q}>h9/0" for q in range(8)])
                self.assertLessEqual(ax.get_legend().get_texts()[0].get_fontsize(), 8)
                self.assertIn("8 of 12 QPs", ax.get_legend().get_title().get_text())
            queue_axes = [ax for ax in fig.axes if not ax.get_title()]
            for ax in queue_axes:
                self.assertIn("KB", ax.get_ylabel())
                self.assertTrue(any(ax.get_shared_x_axes().joined(ax, r) for r in rate_axes))
                texts = [t.get_text() for t in ax.texts]
                self.assertIn("kmin 400 KB", texts)
                self.assertIn("kmax 1.6 MB", texts)
                flat = sorted((line.get_ydata()[0], line.get_linestyle())
                              for line in ax.get_lines() if len(set(line.get_ydata())) == 1)
                self.assertEqual([y for y, _ in flat], [400.0, 1600.0], "kmin, kmax in KB")
                self.assertEqual([style for _, style in flat], ["--", "--"], "dashed")
                self.assertGreater(ax.get_ylim()[1], 1600.0, "kmax in view")
            # The mode's colour of the other plots fills its queue.
            cols = {m: c for m, c in zip(MODES, self.mode_colours(figs))}
            for ax, mode in zip(queue_axes, ["ecmp", "spray"]):
                step = [l for l in ax.get_lines() if len(set(l.get_ydata())) > 1][0]
                self.assertEqual(tuple(step.get_color()), tuple(cols[mode]))
        finally:
            close_all(figs)

    def mode_colours(self, figs):
        """The modes' colours of goodput_timeline.png, in MODES order."""
        ax = figs["goodput_timeline.png"].axes[0]
        by_label = {l.get_label().split(" ")[0]: l.get_color() for l in ax.get_lines()}
        return [by_label[m] for m in MODES]

    def test_cc_rates_six_modes(self):
        rng = random.Random(17)
        modes = ["ecmp", "ecmp-qp", "weighted", "dlb", "drill", "spray"]
        report = make_allreduce_report(rng, modes=modes, seeds=(1,))
        add_cc(report, qps=8, steps=3000, dt=0.25)  # long: thinned, its peaks kept
        path = os.path.join(self.dir, "cc6.json")
        with open(path, "w") as f:
            json.dump(report, f)
        out = os.path.join(self.dir, "cc6_out")
        r = run_script("--json", path, "--out", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn("failed", r.stderr)
        self.check_pngs(out, [CC_PNG])
        w, h = png_size(os.path.join(out, CC_PNG))
        self.assertLess(w, 2400)
        self.assertLess(h, 1800)
        _, rc, figs, err = draw_in_process("--json", path, "--out", os.path.join(self.dir, "x"))
        try:
            self.assertEqual(rc, 0, err)
            self.check_axes(figs)
            fig = figs[CC_PNG]
            titles = [ax.get_title() for ax in fig.axes if ax.get_title()]
            self.assertEqual(len(titles), 6)
            for mode, title in zip(modes, titles):
                self.assertTrue(title.startswith(mode + " "), title)
            queue = report["runs"][0]["cc_timeline"]["queue_bytes"]
            drawn = [ax for ax in fig.axes if not ax.get_title()][0]
            ys = [y for l in drawn.get_lines() for y in l.get_ydata()]
            self.assertAlmostEqual(max(ys), max(queue) / 1e3, places=3, msg="the peak is kept")
            self.assertLessEqual(max(len(l.get_xdata()) for l in drawn.get_lines()), 2600)
        finally:
            close_all(figs)

    def test_cc_rates_skipped_without_cc_timeline(self):
        out = os.path.join(self.dir, "out")
        r = run_script("--json", self.report, "--timeseries", self.ts, "--out", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(f"{CC_PNG} skipped: no run has a 'cc_timeline'", r.stderr)
        self.assertFalse(os.path.exists(os.path.join(out, CC_PNG)))
        self.check_pngs(out, ALL_PNGS)
        self.assertEqual(sorted(os.listdir(out)), sorted(ALL_PNGS))
        # A malformed "cc_timeline" is no timeline either: skipped, not failed.
        rng = random.Random(19)
        report = make_report(rng)
        report["runs"][0]["cc_timeline"] = {"t_us": ["x", None], "queue_bytes": 3}
        report["runs"][1]["cc_timeline"] = "nope"
        path = os.path.join(self.dir, "badcc.json")
        with open(path, "w") as f:
            json.dump(report, f)
        r = run_script("--json", path, "--out", os.path.join(self.dir, "out2"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(f"{CC_PNG} skipped", r.stderr)
        self.assertNotIn("failed", r.stderr)

    def test_qp_rows_stay_out_of_link_plots(self):
        rng = random.Random(23)
        plain = os.path.join(self.dir, "plain.csv")
        write_timeseries(plain, rng, steps=30)
        with_qps = os.path.join(self.dir, "with_qps.csv")
        with open(plain) as f, open(with_qps, "w") as g:
            g.write(f.read())
        add_qp_rows(with_qps, steps=30)
        results = []
        for ts in (plain, with_qps):
            mod, rc, figs, err = draw_in_process("--json", self.report, "--timeseries", ts,
                                                 "--out", os.path.join(self.dir, "unused"))
            try:
                self.assertEqual(rc, 0, err)
                self.assertNotIn("malformed", err)
                panels = heat_panels(figs["link_util_heatmap.png"])
                rows = [round(max(ax.get_ylim())) for ax, _ in panels]
                labels = [t.get_text() for ax, _ in panels for t in ax.get_yticklabels()]
                titles = [ax.get_title() for ax, _ in panels]
                uplink = [len(ax.get_lines()) for ax in figs["uplink_util.png"].axes]
                results.append((rows, titles, uplink))
                self.assertFalse([l for l in labels if "qp:" in l], labels)
            finally:
                close_all(figs)
        self.assertEqual(results[0][0], [36] * len(MODES), "a row per link")
        self.assertEqual(results[1], results[0], "qp: rows change no link plot")
        self.assertEqual(set(mod.load_timeseries(with_qps)["ecmp"][1]),
                         set(mod.load_timeseries(plain)["ecmp"][1]))

    def test_fabric_emu_plots_cc_rates(self):
        if not os.access(EMU, os.X_OK):
            self.skipTest(f"no fabric_emu at {EMU} (set FABRIC_EMU)")
        out = os.path.join(self.dir, "emu")
        env = dict(os.environ, SPRAYNET_PLOTS_SCRIPT=SCRIPT)  # the script under test
        p = subprocess.run([EMU, "--leaves", "2", "--spines", "2", "--hosts-per-leaf", "4",
                            "--workload", "incast", "--incast-senders", "2",
                            "--bytes", "4000000", "--duration", "500us", "--mode", "ecmp",
                            "--plots", out], capture_output=True, text=True, timeout=240,
                           env=env)
        # 5: the run is unfinished at 500 us (4 MB a sender; said on stderr), which hides a
        # plots failure's 4: that is looked for on stderr.
        self.assertIn(p.returncode, (0, 5), p.stdout + p.stderr)
        self.assertNotIn("Traceback", p.stderr)
        self.assertNotIn("failed", p.stderr)
        self.assertIn(os.path.join(out, CC_PNG), p.stdout.splitlines())
        self.check_pngs(out, TS_PNGS + [CC_PNG, "throughput.png", "goodput_timeline.png"])
        with open(os.path.join(out, "report.json")) as f:
            run = json.load(f)["runs"][0]
        self.assertIn("cc_timeline", run)
        self.assertTrue(run["cc_timeline"]["qp_rate_gbps"], "the QPs' rates recorded")
        with open(os.path.join(out, "timeseries.csv")) as f:
            self.assertIn(",qp:", f.read(), "the time series has the QPs' rows")
        # The figure of that run: the queue's port in the title, a line per QP.
        _, rc, figs, err = draw_in_process("--json", os.path.join(out, "report.json"),
                                           "--timeseries", os.path.join(out, "timeseries.csv"),
                                           "--out", os.path.join(self.dir, "unused"))
        try:
            self.assertEqual(rc, 0, err)
            self.check_axes(figs)
            ax = [a for a in figs[CC_PNG].axes if a.get_title()][0]
            self.assertIn(run["queue_bytes"]["port"], ax.get_title())
            legend = [t.get_text() for t in ax.get_legend().get_texts()]
            self.assertEqual(sorted(legend), sorted(run["cc_timeline"]["qp_rate_gbps"]))
            for panel, _ in heat_panels(figs["link_util_heatmap.png"]):
                labels = [t.get_text() for t in panel.get_yticklabels()]
                self.assertFalse([l for l in labels if l.startswith("qp:")], labels)
        finally:
            close_all(figs)

    def test_fabric_emu_plots_a_scenario(self):
        # A scenario's report nests its runs ({run: {config, runs, summary}}): its plots draw
        # every run's modes side by side, named "run:mode" as its time series names them.
        if not os.access(EMU, os.X_OK):
            self.skipTest(f"no fabric_emu at {EMU} (set FABRIC_EMU)")
        out = os.path.join(self.dir, "scenario")
        env = dict(os.environ, SPRAYNET_PLOTS_SCRIPT=SCRIPT)
        p = subprocess.run([EMU, "--scenario", "conweave-vs-spray", "--quick", "--quiet",
                            "--plots", out], capture_output=True, text=True, timeout=240, env=env)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertNotIn("Traceback", p.stderr)
        self.check_pngs(out, ["slowdown.png", "fct_cdf.png", "throughput.png", "uplink_util.png"])
        _, rc, figs, err = draw_in_process("--json", os.path.join(out, "report.json"),
                                           "--timeseries", os.path.join(out, "timeseries.csv"),
                                           "--out", os.path.join(self.dir, "unused2"))
        try:
            self.assertEqual(rc, 0, err)
            ax = figs["slowdown.png"].axes[0]
            legend = sorted(t.get_text() for t in ax.get_legend().get_texts())
            self.assertEqual(legend, ["conweave:conweave", "spray:spray"])
        finally:
            close_all(figs)

    def test_without_timeseries(self):
        out = os.path.join(self.dir, "out")
        r = run_script("--json", self.report, "--out", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        rest = [n for n in ALL_PNGS if n not in TS_PNGS]
        self.check_pngs(out, rest)
        for name in TS_PNGS:
            self.assertFalse(os.path.exists(os.path.join(out, name)))
            self.assertIn(f"{name} skipped", r.stderr)
        self.assertEqual(len(r.stdout.split()), len(rest))

    def test_minimal_runs_skip_optional_plots(self):
        runs = [{"mode": m, "workload": "alistorage2019", "seed": 1, "throughput_fraction": 0.5,
                 "fct_us": {"p50": 1, "p99": 2, "max": 3},
                 "reorder": {"max_depth": 0, "p99_depth": 0, "timeouts": 0,
                             "depth_histogram": []},
                 "pfc": {"pause_frames": 0, "paused_us": 0, "longest_pause_us": 0,
                         "timeline": []}} for m in MODES]
        runs.append({"mode": "weird", "fct_samples_us": ["x", None, -1], "slowdown": "nope",
                     "reorder": {"depth_histogram": [[1], "a"]}, "pfc": None})
        path = os.path.join(self.dir, "minimal.json")
        with open(path, "w") as f:
            json.dump({"config": {}, "runs": runs, "summary": {}}, f)
        out = os.path.join(self.dir, "out")
        r = run_script("--json", path, "--out", out)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn("Traceback", r.stderr)
        # Only the throughput per mode: every other plot lacks its data.
        self.assertEqual(r.stdout.strip(), os.path.join(out, "throughput.png"))
        for name in ALL_PNGS:
            if name != "throughput.png":
                self.assertIn(f"{name} skipped", r.stderr)

    def test_malformed_json_fails_with_message(self):
        path = os.path.join(self.dir, "bad.json")
        with open(path, "w") as f:
            f.write('{"runs": [ {"mode": "ecmp", ')
        r = run_script("--json", path, "--out", os.path.join(self.dir, "out"))
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("bad.json", r.stderr)
        self.assertIn("not valid JSON", r.stderr)
        self.assertNotIn("Traceback", r.stderr)

    def test_json_without_runs_fails(self):
        path = os.path.join(self.dir, "noruns.json")
        with open(path, "w") as f:
            json.dump({"config": {}}, f)
        r = run_script("--json", path, "--out", os.path.join(self.dir, "out"))
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("runs", r.stderr)

    def test_unreadable_inputs_fail_with_message(self):
        missing = os.path.join(self.dir, "missing.json")
        r = run_script("--json", missing, "--out", os.path.join(self.dir, "out"))
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("missing.json", r.stderr)
        self.assertNotIn("Traceback", r.stderr)

        r = run_script("--json", self.report, "--timeseries", os.path.join(self.dir, "no.csv"),
                       "--out", os.path.join(self.dir, "out"))
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("no.csv", r.stderr)

        bad_csv = os.path.join(self.dir, "bad.csv")
        with open(bad_csv, "w") as f:
            f.write("time,whatever\n1,2\n")
        r = run_script("--json", self.report, "--timeseries", bad_csv,
                       "--out", os.path.join(self.dir, "out"))
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("header lacks", r.stderr)
        self.assertNotIn("Traceback", r.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
