#!/usr/bin/env python3
"""Plots of a fabric_emu report: uplink utilisation, FCT CDF, FCT slowdown per size bin,
reorder depth and PFC pauses, one PNG each, comparing load-balancing modes side by side.

Usage:
    fabric_plots.py --json REPORT.json [--timeseries TS.csv] --out DIR

Writes into DIR (created if needed), printing each PNG's path as it is written:
    uplink_util.png    per-uplink (leafN>spineM#k) utilisation over time, one subplot per mode
                       (the first seed of each mode found in TS.csv); needs --timeseries
    fct_cdf.png        CDF of message completion times ("fct_samples_us"), all seeds pooled
    slowdown.png       p50 and p99 FCT slowdown per flow-size bin ("slowdown"), per mode
    reorder_depth.png  reorder-depth histogram per mode, all seeds pooled ("reorder")
    pfc_timeline.png   paused ports over time per mode, first seed ("pfc" "timeline")

A plot whose data is absent from the report is skipped with a note on stderr. An unreadable
or malformed REPORT.json or TS.csv is an error: a message on stderr and exit status 2.
Status 1 means some plot failed on bad data (the others were still written).

Needs python3 and matplotlib only (Debian: python3-matplotlib). If the python3 running this
has no matplotlib and /usr/bin/python3 does, the script re-runs itself under /usr/bin/python3.
"""

import argparse
import csv
import json
import math
import os
import re
import sys

PROG = "fabric_plots"


def note(msg):
    print(f"{PROG}: {msg}", file=sys.stderr)


def die(msg):
    note(msg)
    sys.exit(2)


def import_matplotlib():
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import FuncFormatter

        return plt, FuncFormatter
    except ImportError:
        system_python = "/usr/bin/python3"
        if (
            os.environ.get("FABRIC_PLOTS_REEXEC") != "1"
            and os.path.exists(system_python)
            and os.path.realpath(sys.executable) != os.path.realpath(system_python)
        ):
            env = dict(os.environ, FABRIC_PLOTS_REEXEC="1")
            sys.stdout.flush()
            sys.stderr.flush()
            os.execve(system_python, [system_python, os.path.abspath(__file__)] + sys.argv[1:], env)
        die("matplotlib is required (Debian: apt-get install python3-matplotlib)")


# ----------------------------------------------------------------------------- input


def load_report(path):
    try:
        with open(path, "r", encoding="utf-8") as f:
            report = json.load(f)
    except OSError as e:
        die(f"cannot read {path}: {e.strerror or e}")
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        die(f"{path}: not valid JSON: {e}")
    if not isinstance(report, dict):
        die(f"{path}: expected a JSON object with 'runs', got {type(report).__name__}")
    runs = report.get("runs")
    if not isinstance(runs, list):
        die(f"{path}: missing or non-list 'runs'")
    good = []
    for i, run in enumerate(runs):
        if not isinstance(run, dict):
            note(f"{path}: runs[{i}] is not an object; ignored")
            continue
        good.append(run)
    report["runs"] = good
    return report


def run_mode(run):
    return str(run.get("mode", "?"))


def run_seed(run):
    return run.get("seed", "?")


def modes_in_order(runs):
    seen = []
    for run in runs:
        m = run_mode(run)
        if m not in seen:
            seen.append(m)
    return seen


def num(x):
    """A finite float, or None."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def pairs(value):
    """[[a, b], ...] as a list of (float, float), skipping malformed entries."""
    out = []
    if not isinstance(value, list):
        return out
    for item in value:
        if isinstance(item, (list, tuple)) and len(item) >= 2:
            a, b = num(item[0]), num(item[1])
            if a is not None and b is not None:
                out.append((a, b))
    return out


TS_COLUMNS = ("mode", "seed", "t_us", "link", "util")


def is_uplink(link):
    return link.startswith("leaf") and ">spine" in link


def load_uplink_timeseries(path):
    """{mode: (seed, {link: ([t], [util])})} for the first seed of each mode, uplinks only."""
    try:
        f = open(path, "r", newline="", encoding="utf-8")
    except OSError as e:
        die(f"cannot read {path}: {e.strerror or e}")
    with f:
        reader = csv.reader(f)
        try:
            header = next(reader)
        except StopIteration:
            die(f"{path}: empty file (expected a header 'mode,seed,t_us,link,util,...')")
        except (csv.Error, UnicodeDecodeError) as e:
            die(f"{path}: not a readable CSV: {e}")
        header = [h.strip() for h in header]
        missing = [c for c in TS_COLUMNS if c not in header]
        if missing:
            die(f"{path}: header lacks column(s) {', '.join(missing)} (got: {','.join(header)})")
        im, iseed, it, ilink, iutil = (header.index(c) for c in TS_COLUMNS)
        width = max(im, iseed, it, ilink, iutil) + 1
        first_seed = {}
        series = {}
        bad = 0
        try:
            for row in reader:
                if len(row) < width:
                    if row:
                        bad += 1
                    continue
                mode = row[im]
                seed = row[iseed]
                chosen = first_seed.get(mode)
                if chosen is None:
                    first_seed[mode] = chosen = seed
                    series[mode] = {}
                if seed != chosen:
                    continue
                link = row[ilink]
                if not is_uplink(link):
                    continue
                try:
                    t = float(row[it])
                    u = float(row[iutil])
                except ValueError:
                    bad += 1
                    continue
                ts = series[mode].get(link)
                if ts is None:
                    ts = series[mode][link] = ([], [])
                ts[0].append(t)
                ts[1].append(u)
        except (csv.Error, UnicodeDecodeError) as e:
            die(f"{path}: line {reader.line_num}: {e}")
    if bad:
        note(f"{path}: ignored {bad} malformed row(s)")
    return {m: (first_seed[m], series[m]) for m in first_seed}


# ----------------------------------------------------------------------------- helpers


def natural_key(s):
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", s)]


def human_bytes(x, _pos=None):
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if x >= scale:
            v = x / scale
            return f"{v:.0f} {unit}" if v >= 10 or v == int(v) else f"{v:.1f} {unit}"
    return f"{x:.0f} B"


def ordered_modes(report_modes, extra):
    out = [m for m in report_modes if m in extra]
    out += sorted((m for m in extra if m not in report_modes), key=natural_key)
    return out


def colours(plt, n):
    cmap = plt.get_cmap("tab10" if n <= 10 else "tab20")
    return [cmap(i % cmap.N) for i in range(n)]


def save(fig, plt, out_dir, name, written):
    path = os.path.join(out_dir, name)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    written.append(path)
    print(path, flush=True)


# ----------------------------------------------------------------------------- plots


def plot_uplink_util(plt, ctx, out_dir, written):
    if ctx["ts_path"] is None:
        note("uplink_util.png skipped: no --timeseries given")
        return
    ts = ctx["timeseries"]
    modes = [m for m in ordered_modes(ctx["modes"], ts.keys()) if ts[m][1]]
    if not modes:
        note(f"uplink_util.png skipped: {ctx['ts_path']} has no leaf>spine uplink rows")
        return
    fig, axes = plt.subplots(len(modes), 1, figsize=(11, 1.2 + 2.6 * len(modes)), sharex=True,
                             squeeze=False)
    for ax, mode in zip(axes[:, 0], modes):
        seed, links = ts[mode]
        names = sorted(links, key=natural_key)
        cols = colours(plt, len(names))
        many = len(names) > 16
        for name, col in zip(names, cols):
            t, u = links[name]
            ax.plot(t, u, linewidth=0.5 if many else 0.7, alpha=0.7 if many else 1.0, color=col,
                    label=name)
        ax.set_title(f"{mode} (seed {seed}, {len(names)} uplinks)", fontsize=10)
        ax.set_ylabel("utilisation (0-1)")
        ax.set_ylim(-0.02, 1.05)
        ax.grid(True, alpha=0.3)
        if len(names) <= 16:
            ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    axes[-1, 0].set_xlabel("time (µs)")
    fig.suptitle("Uplink utilisation (leaf > spine) over time")
    fig.tight_layout()
    save(fig, plt, out_dir, "uplink_util.png", written)


def plot_fct_cdf(plt, ctx, out_dir, written):
    pooled = {}
    dropped = 0
    for run in ctx["runs"]:
        samples = run.get("fct_samples_us")
        if not isinstance(samples, list):
            continue
        vals = pooled.setdefault(run_mode(run), [])
        for s in samples:
            v = num(s)
            if v is not None and v > 0:
                vals.append(v)
            else:
                dropped += 1
    pooled = {m: v for m, v in pooled.items() if v}
    if not pooled:
        note("fct_cdf.png skipped: no run has 'fct_samples_us'")
        return
    if dropped:
        note(f"fct_cdf.png: ignored {dropped} non-positive or non-numeric FCT sample(s)")
    modes = ordered_modes(ctx["modes"], pooled.keys())
    fig, ax = plt.subplots(figsize=(8, 5))
    for mode, col in zip(modes, colours(plt, len(modes))):
        vals = sorted(pooled[mode])
        n = len(vals)
        # At most ~4000 points per line: the CDF's shape, not every sample.
        step = max(1, n // 4000)
        idx = list(range(0, n, step))
        if idx[-1] != n - 1:
            idx.append(n - 1)
        xs = [vals[i] for i in idx]
        ys = [(i + 1) / n for i in idx]
        p99 = vals[min(n - 1, int(math.ceil(0.99 * n)) - 1)]
        ax.plot(xs, ys, color=col, linewidth=1.4, drawstyle="steps-post",
                label=f"{mode} (n={n}, p50 {vals[(n - 1) // 2]:.3g} µs, p99 {p99:.3g} µs)")
    ax.set_xscale("log")
    ax.set_ylim(0, 1.01)
    ax.set_xlabel("message completion time (µs, log scale)")
    ax.set_ylabel("fraction of messages")
    ax.set_title("FCT CDF per mode (all seeds pooled)" + ctx["workload_suffix"])
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    save(fig, plt, out_dir, "fct_cdf.png", written)


def plot_slowdown(plt, FuncFormatter, ctx, out_dir, written):
    # mode -> bin_hi -> [count, sum(count*p50), sum(count*p99), seeds]
    per_mode = {}
    seeds = {}
    for run in ctx["runs"]:
        bins = run.get("slowdown")
        if not isinstance(bins, list) or not bins:
            continue
        mode = run_mode(run)
        acc = per_mode.setdefault(mode, {})
        seeds.setdefault(mode, set()).add(str(run_seed(run)))
        for b in bins:
            if not isinstance(b, dict):
                continue
            hi, p50, p99 = num(b.get("bin_hi_bytes")), num(b.get("p50")), num(b.get("p99"))
            count = num(b.get("count"))
            if hi is None or hi <= 0 or p50 is None or p99 is None:
                continue
            w = count if count is not None and count > 0 else 0.0
            a = acc.setdefault(hi, [0.0, 0.0, 0.0, 0.0, 0.0, 0])
            a[0] += w
            a[1] += w * p50
            a[2] += w * p99
            a[3] += p50  # unweighted fallback when every count is 0
            a[4] += p99
            a[5] += 1
    per_mode = {m: acc for m, acc in per_mode.items() if acc}
    if not per_mode:
        note("slowdown.png skipped: no run has 'slowdown' bins")
        return
    modes = ordered_modes(ctx["modes"], per_mode.keys())
    pooled_seeds = any(len(seeds[m]) > 1 for m in modes)
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.8), sharex=True)
    for col_i, (ax, which, label) in enumerate(zip(axes, (1, 2), ("p50", "p99"))):
        ymax = 1.0
        for mode, col in zip(modes, colours(plt, len(modes))):
            acc = per_mode[mode]
            xs = sorted(acc)
            ys = []
            for x in xs:
                a = acc[x]
                ys.append(a[which] / a[0] if a[0] > 0 else a[which + 2] / a[5])
            ymax = max(ymax, max(ys))
            ax.plot(xs, ys, marker="o", markersize=4, linewidth=1.4, color=col, label=mode)
        ax.axhline(1.0, color="grey", linewidth=0.8, linestyle=":")
        ax.set_xscale("log")
        if ymax > 20:
            ax.set_yscale("log")
        ax.xaxis.set_major_formatter(FuncFormatter(human_bytes))
        ax.set_xlabel("flow size, bin upper edge (bytes, log scale)")
        ax.set_ylabel(f"{label} FCT slowdown (FCT / ideal FCT)")
        ax.set_title(f"{label} slowdown per size bin")
        ax.grid(True, which="both", alpha=0.3)
        if col_i == 0:
            ax.legend(fontsize=8, loc="upper left")
    title = "FCT slowdown by flow size" + ctx["workload_suffix"]
    if pooled_seeds:
        title += " (count-weighted mean over seeds)"
    fig.suptitle(title)
    fig.tight_layout()
    save(fig, plt, out_dir, "slowdown.png", written)


def plot_reorder_depth(plt, ctx, out_dir, written):
    hist = {}
    stats = {}
    for run in ctx["runs"]:
        r = run.get("reorder")
        if not isinstance(r, dict):
            continue
        mode = run_mode(run)
        h = hist.setdefault(mode, {})
        for depth, count in pairs(r.get("depth_histogram")):
            h[depth] = h.get(depth, 0.0) + count
        s = stats.setdefault(mode, {"max": 0.0, "timeouts": 0.0})
        s["max"] = max(s["max"], num(r.get("max_depth")) or 0.0)
        s["timeouts"] += num(r.get("timeouts")) or 0.0
    hist = {m: {d: c for d, c in h.items() if c > 0} for m, h in hist.items()}
    hist = {m: h for m, h in hist.items() if h}
    if not hist:
        note("reorder_depth.png skipped: no run has a non-empty 'reorder' 'depth_histogram'")
        return
    modes = ordered_modes(ctx["modes"], hist.keys())
    fig, ax = plt.subplots(figsize=(8, 5))
    n = len(modes)
    width = 0.8 / n
    for i, (mode, col) in enumerate(zip(modes, colours(plt, n))):
        h = hist[mode]
        depths = sorted(h)
        counts = [h[d] for d in depths]
        total = sum(counts)
        cum, p99 = 0.0, depths[-1]
        for d, c in zip(depths, counts):
            cum += c
            if cum >= 0.99 * total:
                p99 = d
                break
        s = stats[mode]
        label = (f"{mode} (max {max(s['max'], depths[-1]):.0f}, p99 {p99:.0f}, "
                 f"timeouts {s['timeouts']:.0f})")
        offset = (i - (n - 1) / 2) * width
        if len(depths) <= 64:
            ax.bar([d + offset for d in depths], counts, width=width, color=col, label=label,
                   alpha=0.85)
        else:
            ax.plot(depths, counts, drawstyle="steps-mid", color=col, linewidth=1.2, label=label)
    ax.set_yscale("log")
    ax.set_xlabel("reorder depth (packets held)")
    ax.set_ylabel("occurrences (log scale)")
    ax.set_title("Reorder-buffer depth per mode (all seeds pooled)")
    ax.grid(True, axis="y", which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    save(fig, plt, out_dir, "reorder_depth.png", written)


def plot_pfc_timeline(plt, ctx, out_dir, written):
    chosen = {}
    for run in ctx["runs"]:
        p = run.get("pfc")
        if not isinstance(p, dict):
            continue
        mode = run_mode(run)
        if mode not in chosen:  # the first seed of each mode
            chosen[mode] = (run_seed(run), p, pairs(p.get("timeline")))
    if not any(tl for _, _, tl in chosen.values()):
        note("pfc_timeline.png skipped: no run has a non-empty 'pfc' 'timeline'")
        return
    modes = ordered_modes(ctx["modes"], chosen.keys())
    fig, axes = plt.subplots(len(modes), 1, figsize=(11, 1.2 + 2.2 * len(modes)), sharex=True,
                             squeeze=False)
    cols = colours(plt, len(modes))
    for ax, mode, col in zip(axes[:, 0], modes, cols):
        seed, p, tl = chosen[mode]
        frames = num(p.get("pause_frames"))
        paused = num(p.get("paused_us"))
        longest = num(p.get("longest_pause_us"))
        facts = []
        if frames is not None:
            facts.append(f"{frames:.0f} pause frames")
        if paused is not None:
            facts.append(f"{paused:.4g} µs paused")
        if longest is not None:
            facts.append(f"longest {longest:.4g} µs")
        ax.set_title(f"{mode} (seed {seed})" + (": " + ", ".join(facts) if facts else ""),
                     fontsize=10)
        if tl:
            tl.sort()
            ts = [t for t, _ in tl]
            cs = [c for _, c in tl]
            ax.step(ts, cs, where="post", color=col, linewidth=1.2, label=mode)
            ax.fill_between(ts, cs, step="post", color=col, alpha=0.25)
            ax.set_ylim(0, max(1.0, max(cs)) * 1.15)
        else:
            ax.set_ylim(0, 1.15)
            ax.text(0.5, 0.5, "no PFC pauses", transform=ax.transAxes, ha="center",
                    va="center", color="grey")
        ax.set_ylabel("paused ports")
        ax.grid(True, alpha=0.3)
    axes[-1, 0].set_xlabel("time (µs)")
    fig.suptitle("PFC: ports paused over time (first seed of each mode)")
    fig.tight_layout()
    save(fig, plt, out_dir, "pfc_timeline.png", written)


# ----------------------------------------------------------------------------- main


def main(argv=None):
    ap = argparse.ArgumentParser(prog="fabric_plots.py",
                                 description="Plot a fabric_emu report (PNG files).")
    ap.add_argument("--json", required=True, metavar="REPORT.json", help="fabric_emu report")
    ap.add_argument("--timeseries", metavar="TS.csv",
                    help="fabric_emu per-link time series (for uplink_util.png)")
    ap.add_argument("--out", required=True, metavar="DIR", help="directory for the PNG files")
    args = ap.parse_args(argv)

    plt, FuncFormatter = import_matplotlib()  # first: it may re-run the script
    report = load_report(args.json)
    timeseries = load_uplink_timeseries(args.timeseries) if args.timeseries else {}
    try:
        os.makedirs(args.out, exist_ok=True)
    except OSError as e:
        die(f"cannot create output directory {args.out}: {e.strerror or e}")

    runs = report["runs"]
    workloads = sorted({str(r["workload"]) for r in runs if "workload" in r})
    ctx = {
        "runs": runs,
        "modes": modes_in_order(runs),
        "timeseries": timeseries,
        "ts_path": args.timeseries,
        "workload_suffix": f" — workload {', '.join(workloads)}" if workloads else "",
    }
    if not runs:
        note(f"{args.json}: no runs")

    written = []
    failed = 0
    plots = (
        ("uplink_util.png", lambda: plot_uplink_util(plt, ctx, args.out, written)),
        ("fct_cdf.png", lambda: plot_fct_cdf(plt, ctx, args.out, written)),
        ("slowdown.png", lambda: plot_slowdown(plt, FuncFormatter, ctx, args.out, written)),
        ("reorder_depth.png", lambda: plot_reorder_depth(plt, ctx, args.out, written)),
        ("pfc_timeline.png", lambda: plot_pfc_timeline(plt, ctx, args.out, written)),
    )
    for name, fn in plots:
        try:
            fn()
        except Exception as e:  # bad data in one plot must not cost the others
            failed += 1
            plt.close("all")
            note(f"{name} failed: {type(e).__name__}: {e}")
    if not written:
        note("no plots written")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
