#!/usr/bin/env python3
"""Plots of a fabric_emu report: per-link utilisation, throughput per mode, FCT CDF, FCT
slowdown per size bin, reorder depth, PFC pauses and goodput over time, one PNG each,
comparing load-balancing modes side by side.

Usage:
    fabric_plots.py --json REPORT.json [--timeseries TS.csv] --out DIR

Writes into DIR (created if needed), printing each PNG's path as it is written:
    link_util_heatmap.png  every link of the time series (rows, grouped by tier: host > leaf,
                       leaf > spine, spine > leaf, leaf > host) against time (columns), colour =
                       utilisation 0-1; a link idle in a sample is white, a sample missing is
                       grey hatched; one panel per mode (its first seed); needs --timeseries
    uplink_util.png    leaf > spine uplink utilisation over time, one panel per mode (first
                       seed): one line per uplink up to 16 uplinks, beyond that the mean, the
                       25-75 % band and the shares of uplinks at >= 90 % and < 1 %;
                       needs --timeseries
    throughput.png     per mode, mean over seeds with the min-max range and each seed: goodput
                       (fraction of line rate); for an all-reduce the bus bandwidth (Gbit/s),
                       busbw / line rate and the job completion time
    fct_cdf.png        CDF of message completion times ("fct_samples_us"), all seeds pooled
    slowdown.png       mean, p50 and p99 FCT slowdown per flow-size bin ("slowdown"), per mode
    reorder_depth.png  reorder-depth histogram per mode, all seeds pooled ("reorder")
    pfc_timeline.png   paused ports over time per mode, first seed ("pfc" "timeline")
    goodput_timeline.png  fabric goodput over time per mode, first seed ("goodput_timeline"),
                       with the config's timed events marked
    cc_rates.png       congestion control, one panel per mode (first seed, "cc_timeline"): the
                       QPs' rates over time (Gbit/s, a line per QP) above the busiest lossless
                       queue's depth (KB) with the ECN thresholds kmin and kmax dashed

The time series' "qp:SRC>DST/N" rows (a QP's rate, not a link) are left out of the link plots.

Log axes carry plain tick labels (100 µs, 1 ms; 10, 100, 1k); minor ticks are unlabelled.

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
        from matplotlib import ticker

        return plt, ticker
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
    if isinstance(runs, dict) and "scenario" in report:
        # A scenario's report: {run name: {config, runs, summary}}. Its runs are plotted side by
        # side as "run:mode", as the time series names them; the first run's config (events).
        flat = []
        for name, sub in runs.items():
            if not isinstance(sub, dict) or not isinstance(sub.get("runs"), list):
                die(f"{path}: scenario run '{name}' has no list 'runs'")
            if "config" not in report and isinstance(sub.get("config"), dict):
                report["config"] = sub["config"]
            for run in sub["runs"]:
                if isinstance(run, dict):
                    run = dict(run, mode=f"{name}:{run.get('mode', '?')}")
                flat.append(run)
        runs = flat
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


def node_kind(end):
    """'host', 'leaf', 'spine' or '' for one end of a link name ("p1.leaf0", "h3", "spine2")."""
    end = re.sub(r"^p\d+\.", "", end.strip())
    m = re.match(r"[A-Za-z]+", end)
    word = m.group(0).lower() if m else ""
    if word in ("h", "host"):
        return "host"
    if word in ("leaf", "spine"):
        return word
    return ""


# Tiers of links, in row order: (source kind, destination kind), title.
TIERS = (
    (("host", "leaf"), "host > leaf"),
    (("leaf", "spine"), "leaf > spine"),
    (("spine", "leaf"), "spine > leaf"),
    (("leaf", "host"), "leaf > host"),
)


def link_ends(link):
    name = link.split("#", 1)[0]
    for sep in (">", "-"):
        if sep in name:
            a, b = name.split(sep, 1)
            return a, b
    return name, ""


def link_tier(link):
    """The index into TIERS of a link name, len(TIERS) for anything else."""
    a, b = link_ends(link)
    kinds = (node_kind(a), node_kind(b))
    for i, (k, _) in enumerate(TIERS):
        if k == kinds:
            return i
    return len(TIERS)


def tier_title(i):
    return TIERS[i][1] if i < len(TIERS) else "other"


def link_plane(link):
    """The plane of a link ("p1.leaf0>p1.spine3#0": 1; no prefix: plane 0)."""
    m = re.match(r"p(\d+)\.", link)
    return int(m.group(1)) if m else 0


def is_uplink(link):
    return link_tier(link) == 1


QP_ROW_PREFIX = "qp:"


def is_qp_row(link):
    """A time-series row of one QP's rate ("qp:h0>h9/0"), not of a link."""
    return link.strip().startswith(QP_ROW_PREFIX)


def load_timeseries(path):
    """{mode: (seed, {link: ([t], [util])})} for the first seed of each mode, every link (the
    QPs' "qp:" rows left out: no link plot draws a QP's rate)."""
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
        irun = header.index("run") if "run" in header else None  # a scenario's time series
        width = max(im, iseed, it, ilink, iutil, irun or 0) + 1
        first_seed = {}
        series = {}
        bad = 0
        try:
            for row in reader:
                if len(row) < width:
                    if row:
                        bad += 1
                    continue
                if is_qp_row(row[ilink]):
                    continue
                mode = row[im] if irun is None else f"{row[irun]}:{row[im]}"
                seed = row[iseed]
                chosen = first_seed.get(mode)
                if chosen is None:
                    first_seed[mode] = chosen = seed
                    series[mode] = {}
                if seed != chosen:
                    continue
                link = row[ilink]
                try:
                    t = float(row[it])
                    u = float(row[iutil])
                except ValueError:
                    bad += 1
                    continue
                if not (math.isfinite(t) and math.isfinite(u)):
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


def human_count(x, _pos=None):
    """1, 20, 500, 1k, 20k, 1M: a tick label for counts and ratios."""
    if x == 0:
        return "0"
    a = abs(x)
    for suffix, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if a >= scale:
            return f"{x / scale:.4g}{suffix}"
    return f"{x:.4g}"


def human_us(x, _pos=None):
    """A time in µs as a tick label: 500 ns, 20 µs, 1 ms, 2.5 s."""
    if x == 0:
        return "0"
    a = abs(x)
    if a >= 1e6:
        return f"{x / 1e6:.4g} s"
    if a >= 1e3:
        return f"{x / 1e3:.4g} ms"
    if a >= 1:
        return f"{x:.4g} µs"
    return f"{x * 1e3:.4g} ns"


def log_ticks(ax, ticker, which, fmt):
    """Plain labels on a log axis: majors at 1 (and 2, 5 when the range is short) per decade,
    labelled by `fmt`; minors unlabelled. Call once the data is plotted."""
    axis = ax.xaxis if which == "x" else ax.yaxis
    lo, hi = sorted(ax.get_xlim() if which == "x" else ax.get_ylim())
    def inside(subs):
        if not (lo > 0 and hi > lo):
            return 4
        k0, k1 = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
        return sum(1 for k in range(k0, k1 + 1) for s in subs if lo <= s * 10.0 ** k <= hi)

    # The sparsest set of majors that still puts four ticks on the axis.
    for subs in ((1.0,), (1.0, 2.0, 5.0), (1.0, 2.0, 3.0, 5.0, 7.0)):
        if inside(subs) >= 4:
            axis.set_major_locator(ticker.LogLocator(base=10.0, subs=subs, numticks=12))
            axis.set_minor_locator(ticker.LogLocator(base=10.0, subs=tuple(range(2, 10)),
                                                     numticks=12))
            break
    else:  # under about half a decade: evenly spaced plain ticks
        axis.set_major_locator(ticker.MaxNLocator(nbins=5))
        axis.set_minor_locator(ticker.NullLocator())
    axis.set_major_formatter(ticker.FuncFormatter(fmt))
    axis.set_minor_formatter(ticker.NullFormatter())


def plain_linear(ax, ticker, which="y"):
    """A linear axis without matplotlib's offset (the "1e-9" above a panel of zeros)."""
    axis = ax.xaxis if which == "x" else ax.yaxis
    f = ticker.ScalarFormatter(useOffset=False)
    f.set_scientific(False)
    axis.set_major_formatter(f)


def ordered_modes(report_modes, extra):
    out = [m for m in report_modes if m in extra]
    out += sorted((m for m in extra if m not in report_modes), key=natural_key)
    return out


def colours(plt, n):
    cmap = plt.get_cmap("tab10" if n <= 10 else "tab20")
    return [cmap(i % cmap.N) for i in range(n)]


def mode_colours(plt, ctx, modes):
    """One colour per mode, the same in every plot (by the mode's place in the report)."""
    every = ordered_modes(ctx["modes"], set(ctx["modes"]) | set(modes))
    table = dict(zip(every, colours(plt, len(every))))
    return [table[m] for m in modes]


def save(fig, plt, out_dir, name, written):
    path = os.path.join(out_dir, name)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    written.append(path)
    print(path, flush=True)


def seed_label(seed):
    return f"seed {seed}"


# ----------------------------------------------------------------------------- plots


def timeseries_modes(ctx, name, want):
    """The modes (in report order) whose first seed has links passing `want`, or None (noted)."""
    if ctx["ts_path"] is None:
        note(f"{name} skipped: no --timeseries given")
        return None
    ts = ctx["timeseries"]
    modes = [m for m in ordered_modes(ctx["modes"], ts.keys())
             if any(want(link) for link in ts[m][1])]
    if not modes:
        what = "link" if name.startswith("link") else "leaf>spine uplink"
        note(f"{name} skipped: {ctx['ts_path']} has no {what} rows "
             "(a run shorter than one --sample-us interval has no samples)")
        return None
    return modes


def cell_edges(times):
    """Column edges for samples at `times` (sorted, unique): sample i covers (t[i-1], t[i]]."""
    if len(times) == 1:
        w = times[0] if times[0] > 0 else 1.0
        return [times[0] - w, times[0]]
    first = times[0] - (times[1] - times[0])
    return [first] + list(times)


IDLE_VALUE = -1.0  # what an idle sample is drawn as: below the scale, the cmap's "under" colour


def heatmap_rows(links):
    """Row order of the heat map: by tier, then plane, then name (numbers in order)."""
    return sorted(links, key=lambda l: (link_tier(l), link_plane(l), natural_key(l)))


def heatmap_grid(rows, data):
    """(times, cells): the sorted sample times of `data` ({link: ([t], [util])}) and per row of
    `rows` a list over those times of the utilisation, None where the link has no sample."""
    times = sorted({t for t_list, _ in data.values() for t in t_list})
    col_of = {t: j for j, t in enumerate(times)}
    row_of = {l: i for i, l in enumerate(rows)}
    cells = [[None] * len(times) for _ in rows]
    for link, (t_list, u_list) in data.items():
        r = row_of.get(link)
        if r is None:
            continue
        for t, u in zip(t_list, u_list):
            cells[r][col_of[t]] = u
    return times, cells


def plot_link_heatmap(plt, ticker, ctx, out_dir, written):
    name = "link_util_heatmap.png"
    modes = timeseries_modes(ctx, name, lambda link: True)
    if modes is None:
        return
    import numpy as np
    from matplotlib.colors import Normalize
    from matplotlib.patches import Patch, Rectangle

    ts = ctx["timeseries"]
    # Every link any panel knows of gets a row in every panel (a link the time series lacks
    # for one mode shows as missing there): the time series' links and the report's uplinks.
    links = set(ctx["report_links"])
    for m in modes:
        links.update(ts[m][1].keys())
    rows = heatmap_rows(links)
    tiers = [link_tier(l) for l in rows]
    n = len(rows)

    panel_h = min(7.0, max(1.9, 0.075 * n + 0.9))
    total_cap = 30.0
    if panel_h * len(modes) + 1.2 > total_cap:
        panel_h = max(1.5, (total_cap - 1.2) / len(modes))
    fig, axes = plt.subplots(len(modes), 1, figsize=(12, 1.2 + panel_h * len(modes)),
                             sharex=True, squeeze=False, constrained_layout=True)
    cmap = plt.get_cmap("viridis").copy()
    cmap.set_under("white")   # idle: exactly 0
    cmap.set_bad((0, 0, 0, 0))  # missing: transparent, the hatched background shows
    norm = Normalize(vmin=0.0, vmax=1.0)
    max_labels = max(6, int(panel_h * 72 / 10))  # about one label per 10 pt of height
    step = max(1, math.ceil(n / max_labels))
    label_font = 7 if step == 1 and n <= 24 else 6
    mesh = None
    for ax, mode in zip(axes[:, 0], modes):
        seed, data = ts[mode]
        times, cells = heatmap_grid(rows, data)
        grid = np.array([[math.nan if u is None else u for u in row] for row in cells],
                        dtype=float).reshape(n, len(times))
        shown = np.where(grid <= 0.0, IDLE_VALUE, grid)  # idle: under the colour scale
        ax.add_patch(Rectangle((0, 0), 1, 1, transform=ax.transAxes, facecolor="#d9d9d9",
                               edgecolor="#9a9a9a", hatch="///", linewidth=0, zorder=0))
        mesh = ax.pcolormesh(cell_edges(times), np.arange(n + 1), np.ma.masked_invalid(shown),
                             cmap=cmap, norm=norm, shading="flat", zorder=1, rasterized=True)
        ax.set_ylim(n, 0)
        # Tier boundaries (black) and source-node groups within a tier (thin white).
        groups = 0
        for i in range(1, n):
            if tiers[i] != tiers[i - 1]:
                ax.axhline(i, color="black", linewidth=1.2, zorder=2)
            elif link_ends(rows[i])[0] != link_ends(rows[i - 1])[0]:
                groups += 1
        if groups <= 64:
            for i in range(1, n):
                if tiers[i] == tiers[i - 1] and link_ends(rows[i])[0] != link_ends(rows[i - 1])[0]:
                    ax.axhline(i, color="white", linewidth=0.5, zorder=2)
        spans = []  # [tier, first row, end row]
        for i in range(n):
            if i == 0 or tiers[i] != tiers[i - 1]:
                spans.append([tiers[i], i, i + 1])
            else:
                spans[-1][2] = i + 1
        # Row labels: each tier's first row, then every step-th row of it, none so close to
        # the next tier's first label that the two would overlap.
        ticks, labels = [], []
        for _, a, b in spans:
            for i in range(a, b, step):
                if i == a or b - i >= max(1, 0.6 * step):
                    ticks.append(i + 0.5)
                    labels.append(rows[i])
        ax.set_yticks(ticks)
        ax.set_yticklabels(labels, fontsize=label_font)
        ax.tick_params(axis="y", length=2)
        # Tier names on the right.
        sec = ax.secondary_yaxis("right")
        sec.set_yticks([(a + b) / 2 for _, a, b in spans])
        sec.set_yticklabels([f"{tier_title(t)}\n({b - a})" if b - a >= 2 * step or n < 40
                             else tier_title(t) for t, a, b in spans], fontsize=7)
        sec.tick_params(axis="y", length=0)
        # Title: how many links were idle throughout and how loaded the uplinks were.
        present = ~np.isnan(grid)
        idle_rows = int(np.sum(np.all((grid <= 0.0) | ~present, axis=1) & np.any(present, axis=1)))
        missing_rows = int(np.sum(~np.any(present, axis=1)))
        up = [i for i in range(n) if tiers[i] == 1]
        facts = [f"{n} links", f"{idle_rows} idle throughout"]
        if missing_rows:
            facts.append(f"{missing_rows} without samples")
        if up and np.any(present[up]):
            facts.append(f"leaf>spine mean {np.nanmean(grid[up]):.2f}")
        ax.set_title(f"{mode} ({seed_label(seed)}): " + ", ".join(facts), fontsize=10)
        mark_events(ax, ctx, label=ax is axes[0, 0])
    axes[-1, 0].set_xlabel("time (sample interval end)")
    axes[-1, 0].xaxis.set_major_formatter(ticker.FuncFormatter(human_us))
    cbar = fig.colorbar(mesh, ax=axes[:, 0].tolist(), fraction=0.025, pad=0.01, aspect=40,
                        extend="min")
    cbar.set_label("utilisation (fraction of line rate)")
    fig.legend(handles=[Patch(facecolor="white", edgecolor="black", label="idle (0)"),
                        Patch(facecolor="#d9d9d9", edgecolor="#9a9a9a", hatch="///",
                              label="no sample (run over, or link not sampled)")],
               loc="upper right", fontsize=8, ncol=2, frameon=False)
    fig.suptitle("Per-link utilisation over time (first seed of each mode)" +
                 ctx["workload_suffix"], fontsize=11, x=0.02, ha="left")
    save(fig, plt, out_dir, name, written)


def plot_uplink_util(plt, ticker, ctx, out_dir, written):
    name = "uplink_util.png"
    modes = timeseries_modes(ctx, name, is_uplink)
    if modes is None:
        return
    ts = ctx["timeseries"]
    fig, axes = plt.subplots(len(modes), 1, figsize=(11, 1.2 + 2.6 * len(modes)), sharex=True,
                             squeeze=False)
    for ax, mode in zip(axes[:, 0], modes):
        seed, links = ts[mode]
        names = sorted((l for l in links if is_uplink(l)), key=natural_key)
        if len(names) <= 16:
            for lname, col in zip(names, colours(plt, len(names))):
                t, u = links[lname]
                ax.plot(t, u, linewidth=0.8, color=col, label=lname)
            ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
        else:
            by_t = {}
            for lname in names:
                for t, u in zip(*links[lname]):
                    by_t.setdefault(t, []).append(u)
            times = sorted(by_t)

            def q(vals, p):
                vals = sorted(vals)
                return vals[min(len(vals) - 1, max(0, int(round(p * (len(vals) - 1)))))]

            p25 = [q(by_t[t], 0.25) for t in times]
            p75 = [q(by_t[t], 0.75) for t in times]
            mean = [sum(by_t[t]) / len(by_t[t]) for t in times]
            idle = [sum(1 for u in by_t[t] if u < 0.01) / len(by_t[t]) for t in times]
            full = [sum(1 for u in by_t[t] if u >= 0.9) / len(by_t[t]) for t in times]
            ax.fill_between(times, p25, p75, color="#4C72B0", alpha=0.25, linewidth=0,
                            label="25-75 % of uplinks")
            ax.plot(times, mean, color="#1f3b73", linewidth=1.6, label="mean utilisation")
            ax.plot(times, full, color="#55A868", linewidth=1.1, linestyle="--",
                    label="share of uplinks ≥ 90 %")
            ax.plot(times, idle, color="#C44E52", linewidth=1.1, linestyle="--",
                    label="share of uplinks < 1 %")
            ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
        ax.set_title(f"{mode} ({seed_label(seed)}, {len(names)} uplinks)", fontsize=10)
        mark_events(ax, ctx, label=ax is axes[0, 0])
        ax.set_ylabel("utilisation (0-1)" if len(names) <= 16 else "utilisation, share (0-1)")
        ax.set_ylim(-0.02, 1.05)
        plain_linear(ax, ticker)
        ax.grid(True, alpha=0.3)
    axes[-1, 0].set_xlabel("time")
    axes[-1, 0].xaxis.set_major_formatter(ticker.FuncFormatter(human_us))
    fig.suptitle("Uplink utilisation (leaf > spine) over time" + ctx["workload_suffix"])
    fig.tight_layout()
    save(fig, plt, out_dir, name, written)


# (key, panel title, y label, kind): kind "fraction" is drawn on 0..1, "rate"/"time" from 0.
THROUGHPUT_METRICS = {
    "throughput_fraction": ("goodput", "fraction of line rate", "fraction"),
    "busbw_gbps": ("all-reduce bus bandwidth", "Gbit/s", "rate"),
    "collective_bw_fraction": ("bus bandwidth ÷ line rate", "fraction of line rate", "fraction"),
    "virtual_us": ("job completion time", "virtual time", "time"),
}


def spread_panel(ax, ticker, modes, values, cols, kind, ylabel, title):
    """Per mode: a bar at the mean, a whisker over min..max (never past the data, so never
    below zero for a quantity that cannot be), and a dot per seed."""
    top = 0.0
    for x, (mode, col) in enumerate(zip(modes, cols)):
        vals = values.get(mode, [])
        if not vals:
            continue
        mean = sum(vals) / len(vals)
        lo, hi = min(vals), max(vals)
        top = max(top, hi, mean)
        ax.bar([x], [mean], width=0.6, color=col, alpha=0.55, edgecolor=col)
        if len(vals) > 1:
            ax.errorbar([x], [mean], yerr=[[mean - lo], [hi - mean]], fmt="none",
                        ecolor="black", elinewidth=1.0, capsize=4)
        jitter = [(i - (len(vals) - 1) / 2) * min(0.05, 0.4 / max(1, len(vals)))
                  for i in range(len(vals))]
        ax.scatter([x + j for j in jitter], vals, s=12, color="black", zorder=3)
        text = human_us(mean) if kind == "time" else f"{mean:.3g}"
        ax.annotate("mean " + text, (x, hi), xytext=(0, 5), textcoords="offset points",
                    ha="center", va="bottom", fontsize=7)
    if kind == "fraction":
        ax.set_ylim(0, max(1.08, top * 1.15))
    else:
        ax.set_ylim(0, top * 1.18 if top > 0 else 1.0)
    if kind == "time":
        ax.yaxis.set_major_formatter(ticker.FuncFormatter(human_us))
    else:
        plain_linear(ax, ticker)
    ax.set_xticks(range(len(modes)))
    ax.set_xticklabels(modes, fontsize=9, rotation=20 if len(modes) > 4 else 0)
    ax.set_xlim(-0.6, len(modes) - 0.4)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(True, axis="y", alpha=0.3)


def plot_throughput(plt, ticker, ctx, out_dir, written):
    name = "throughput.png"
    runs = ctx["runs"]
    allreduce = any(num(r.get("busbw_gbps")) is not None for r in runs)
    finite_job = allreduce or any(num(r.get("messages_expected")) for r in runs)
    keys = ["busbw_gbps", "collective_bw_fraction"] if allreduce else ["throughput_fraction"]
    if finite_job:
        keys.append("virtual_us")
    panels = []
    for key in keys:
        values = {}
        for r in runs:
            v = num(r.get(key))
            if v is not None:
                values.setdefault(run_mode(r), []).append(v)
        if values:
            panels.append((key, values))
    if not panels:
        note(f"{name} skipped: no run has 'throughput_fraction' or 'busbw_gbps'")
        return
    modes = ordered_modes(ctx["modes"], {m for _, v in panels for m in v})
    cols = mode_colours(plt, ctx, modes)
    seeds = max(len(v) for _, vals in panels for v in vals.values())
    fig, axes = plt.subplots(1, len(panels), figsize=(1.5 + (2.2 + 0.55 * len(modes)) * len(panels),
                                                      4.6), squeeze=False)
    for ax, (key, values) in zip(axes[0], panels):
        title, ylabel, kind = THROUGHPUT_METRICS[key]
        spread_panel(ax, ticker, modes, values, cols, kind, ylabel, title)
    what = "All-reduce bus bandwidth" if allreduce else "Throughput"
    fig.suptitle(f"{what} per mode" + ctx["workload_suffix"] +
                 f"\nbar: mean over seeds (up to {seeds}), whisker: min-max, dots: each seed",
                 fontsize=10)
    fig.tight_layout()
    save(fig, plt, out_dir, name, written)


def plot_fct_cdf(plt, ticker, ctx, out_dir, written):
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
    for mode, col in zip(modes, mode_colours(plt, ctx, modes)):
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
                label=f"{mode} (n={n}, p50 {human_us(vals[(n - 1) // 2])}, p99 {human_us(p99)})")
    ax.set_xscale("log")
    lo, hi = min(min(v) for v in pooled.values()), max(max(v) for v in pooled.values())
    if hi / lo < 1.5:  # every message about the same time: a readable span around it
        mid = math.sqrt(lo * hi)
        lo, hi = min(lo, mid / 1.3), max(hi, mid * 1.3)
    ax.set_xlim(lo / 1.08, hi * 1.08)
    log_ticks(ax, ticker, "x", human_us)
    ax.set_ylim(0, 1.01)
    plain_linear(ax, ticker)
    what = "message" if "allreduce" not in ctx["workloads"] else "message (all-reduce step)"
    ax.set_xlabel(f"{what} completion time (log scale)")
    ax.set_ylabel("fraction of messages")
    ax.set_title("FCT CDF per mode (all seeds pooled)" + ctx["workload_suffix"])
    ax.grid(True, which="major", alpha=0.35)
    ax.grid(True, which="minor", alpha=0.12)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    save(fig, plt, out_dir, "fct_cdf.png", written)


def plot_slowdown(plt, ticker, ctx, out_dir, written):
    # mode -> bin_hi -> [count, sum(count*mean), sum(count*p50), sum(count*p99), then the
    # unweighted sums of the three, runs]. Mean and p99 per bin are what ConWeave's Figure 12
    # plots (conweave-ns3 analysis/plot_fct.py); p50 beside them.
    per_mode = {}
    seeds = {}
    for run in ctx["runs"]:
        sd = run.get("slowdown")
        # {"bins": [...]} (the old reports: the list itself, with bin_hi_bytes)
        bins = sd.get("bins") if isinstance(sd, dict) else sd
        if not isinstance(bins, list) or not bins:
            continue
        mode = run_mode(run)
        acc = per_mode.setdefault(mode, {})
        seeds.setdefault(mode, set()).add(str(run_seed(run)))
        for b in bins:
            if not isinstance(b, dict):
                continue
            hi = num(b.get("hi_bytes", b.get("bin_hi_bytes")))
            p50, p99 = num(b.get("p50")), num(b.get("p99"))
            mean = num(b.get("mean"))
            count = num(b.get("count"))
            if hi is None or hi <= 0 or p50 is None or p99 is None:
                continue
            if count is not None and count == 0:
                continue  # an empty bin has no slowdown (its figures read 0)
            if mean is None:
                mean = p50  # the old reports have no mean
            w = count if count is not None and count > 0 else 0.0
            a = acc.setdefault(hi, [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0])
            a[0] += w
            a[1] += w * mean
            a[2] += w * p50
            a[3] += w * p99
            a[4] += mean  # unweighted fallback when every count is 0
            a[5] += p50
            a[6] += p99
            a[7] += 1
    per_mode = {m: acc for m, acc in per_mode.items() if acc}
    if not per_mode:
        note("slowdown.png skipped: no run has 'slowdown' bins")
        return
    modes = ordered_modes(ctx["modes"], per_mode.keys())
    pooled_seeds = any(len(seeds[m]) > 1 for m in modes)
    fig, axes = plt.subplots(1, 3, figsize=(17, 4.8), sharex=True)
    for col_i, (ax, which, label) in enumerate(zip(axes, (1, 2, 3), ("mean", "p50", "p99"))):
        ymax, ymin = 1.0, 1.0
        for mode, col in zip(modes, mode_colours(plt, ctx, modes)):
            acc = per_mode[mode]
            xs = sorted(acc)
            ys = []
            for x in xs:
                a = acc[x]
                ys.append(a[which] / a[0] if a[0] > 0 else a[which + 3] / a[7])
            ymax = max(ymax, max(ys))
            ymin = min(ymin, min(ys))
            ax.plot(xs, ys, marker="o", markersize=4, linewidth=1.4, color=col, label=mode)
        ax.axhline(1.0, color="grey", linewidth=0.8, linestyle=":")
        ax.set_xscale("log")
        if ymax > 20 and ymin > 0:
            ax.set_yscale("log")
            log_ticks(ax, ticker, "y", human_count)
            ax.set_ylabel(f"{label} FCT slowdown (FCT / ideal FCT, log scale)")
        else:
            ax.set_ylim(min(0.0, ymin * 1.1), ymax * 1.1)
            plain_linear(ax, ticker)
            ax.set_ylabel(f"{label} FCT slowdown (FCT / ideal FCT)")
        log_ticks(ax, ticker, "x", human_bytes)
        ax.set_xlabel("flow size, bin upper edge (log scale)")
        ax.set_title(f"{label} slowdown per size bin")
        ax.grid(True, which="major", alpha=0.35)
        ax.grid(True, which="minor", alpha=0.12)
        if col_i == 0:
            ax.legend(fontsize=8, loc="upper left")
    title = "FCT slowdown by flow size" + ctx["workload_suffix"]
    if pooled_seeds:
        title += " (count-weighted mean over seeds)"
    fig.suptitle(title)
    fig.tight_layout()
    save(fig, plt, out_dir, "slowdown.png", written)


def plot_reorder_depth(plt, ticker, ctx, out_dir, written):
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
    cmax, cmin = 1.0, None
    for i, (mode, col) in enumerate(zip(modes, mode_colours(plt, ctx, modes))):
        h = hist[mode]
        depths = sorted(h)
        counts = [h[d] for d in depths]
        cmax = max(cmax, max(counts))
        cmin = min(counts) if cmin is None else min(cmin, min(counts))
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
    ax.set_axisbelow(True)
    ax.set_yscale("log")
    ax.set_ylim(max(0.5, min(1.0, cmin or 1.0) * 0.7), cmax * 1.6)
    log_ticks(ax, ticker, "y", human_count)
    ax.xaxis.set_major_locator(ticker.MaxNLocator(integer=True))
    ax.set_xlabel("reorder depth (packets held)")
    ax.set_ylabel("occurrences (log scale)")
    ax.set_title("Reorder-buffer depth per mode (all seeds pooled)" + ctx["workload_suffix"])
    ax.grid(True, axis="y", which="major", alpha=0.35)
    ax.grid(True, axis="y", which="minor", alpha=0.12)
    ax.legend(fontsize=8)
    fig.tight_layout()
    save(fig, plt, out_dir, "reorder_depth.png", written)


def plot_pfc_timeline(plt, ticker, ctx, out_dir, written):
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
    cols = mode_colours(plt, ctx, modes)
    for ax, mode, col in zip(axes[:, 0], modes, cols):
        seed, p, tl = chosen[mode]
        frames = num(p.get("pause_frames"))
        paused = num(p.get("paused_us"))
        longest = num(p.get("longest_pause_us"))
        facts = []
        if frames is not None:
            facts.append(f"{frames:.0f} pause frames")
        if paused is not None:
            facts.append(f"{human_us(paused)} paused")
        if longest is not None:
            facts.append(f"longest {human_us(longest)}")
        ax.set_title(f"{mode} ({seed_label(seed)})" + (": " + ", ".join(facts) if facts else ""),
                     fontsize=10)
        tl = sorted(tl)
        cs = [c for _, c in tl]
        if tl:  # drawn even when all 0: the time axis spans the run
            ts = [t for t, _ in tl]
            ax.step(ts, cs, where="post", color=col, linewidth=1.2, label=mode)
            ax.fill_between(ts, cs, step="post", color=col, alpha=0.25)
        if tl and max(cs) > 0:
            ax.set_ylim(0, max(1.0, max(cs)) * 1.15)
        else:
            ax.set_ylim(0, 1.15)
            ax.text(0.5, 0.5, "no PFC pauses", transform=ax.transAxes, ha="center",
                    va="center", color="grey")
        ax.yaxis.set_major_locator(ticker.MaxNLocator(integer=True))
        plain_linear(ax, ticker)
        ax.set_ylabel("paused ports")
        mark_events(ax, ctx, label=ax is axes[0, 0])
        ax.grid(True, alpha=0.3)
    axes[-1, 0].set_xlabel("time")
    axes[-1, 0].xaxis.set_major_formatter(ticker.FuncFormatter(human_us))
    fig.suptitle("PFC: ports paused over time (first seed of each mode)" + ctx["workload_suffix"])
    fig.tight_layout()
    save(fig, plt, out_dir, "pfc_timeline.png", written)


def event_times(report):
    """[(t_us, text)] of the config's timed events ("link-down:leaf0-spine3@100us")."""
    out = []
    cfg = report.get("config")
    events = cfg.get("events") if isinstance(cfg, dict) else None
    if not isinstance(events, list):
        return out
    scale = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}
    for e in events:
        if not isinstance(e, str):
            continue
        m = re.search(r"@\s*([0-9.]+)\s*(ns|us|ms|s)?\b", e)
        if not m:
            continue
        try:
            t = float(m.group(1)) * scale[m.group(2) or "us"]
        except ValueError:
            continue
        out.append((t, e.split("@")[0]))
    return out


def mark_events(ax, ctx, label=False):
    """The config's timed events as dashed red lines (named at the top when `label`)."""
    for i, (t, what) in enumerate(event_times(ctx["report"])):
        ax.axvline(t, color="#E8231F", linewidth=1.3, linestyle="--", zorder=3)
        if label:
            ax.annotate(what, (t, 1), xycoords=("data", "axes fraction"),
                        xytext=(3, -3 - 12 * i), textcoords="offset points", fontsize=7,
                        color="#B01010", va="top", zorder=4,
                        bbox=dict(facecolor="white", alpha=0.85, edgecolor="none", pad=1.0))


def plot_goodput_timeline(plt, ticker, ctx, out_dir, written):
    name = "goodput_timeline.png"
    chosen = {}
    for run in ctx["runs"]:
        mode = run_mode(run)
        tl = pairs(run.get("goodput_timeline"))
        if mode not in chosen and tl:
            chosen[mode] = (run_seed(run), sorted(tl))
    if not chosen:
        note(f"{name} skipped: no run has a non-empty 'goodput_timeline'")
        return
    modes = ordered_modes(ctx["modes"], chosen.keys())
    fig, ax = plt.subplots(figsize=(10, 4.6))
    top = 1.0
    for mode, col in zip(modes, mode_colours(plt, ctx, modes)):
        seed, tl = chosen[mode]
        ts = [t for t, _ in tl]
        gs = [g for _, g in tl]
        top = max(top, max(gs))
        if len(ts) > 1:  # the first interval's start
            ts.insert(0, max(0.0, ts[0] - (ts[1] - ts[0])))
            gs.insert(0, gs[0])
        # Each sample is the interval that ends at its time.
        ax.step(ts, gs, where="pre", color=col, linewidth=1.3,
                label=f"{mode} ({seed_label(seed)})")
    mark_events(ax, ctx, label=True)
    ax.set_ylim(0, top * 1.08)
    plain_linear(ax, ticker)
    ax.xaxis.set_major_formatter(ticker.FuncFormatter(human_us))
    ax.set_xlabel("time")
    ax.set_ylabel("goodput (fraction of the hosts' line rate)")
    ax.set_title("Fabric goodput over time (first seed of each mode)" + ctx["workload_suffix"])
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    save(fig, plt, out_dir, name, written)


def cc_timeline(run):
    """A run's "cc_timeline" as (times, queue bytes, {QP: Gbit/s}) of equal-length float lists
    (NaN where a value is missing or malformed; samples without a time dropped), or None when
    the run has none."""
    tl = run.get("cc_timeline")
    if not isinstance(tl, dict) or not isinstance(tl.get("t_us"), list):
        return None
    times = [num(t) for t in tl["t_us"]]
    keep = [i for i, t in enumerate(times) if t is not None]
    if not keep:
        return None

    def series(values):
        values = values if isinstance(values, list) else []
        out = []
        for i in keep:
            v = num(values[i]) if i < len(values) else None
            out.append(math.nan if v is None else v)
        return out

    rates = {}
    by_qp = tl.get("qp_rate_gbps")
    if isinstance(by_qp, dict):
        for qp in sorted(by_qp, key=lambda q: natural_key(str(q))):
            if isinstance(by_qp[qp], list):
                rates[str(qp)] = series(by_qp[qp])
    return [times[i] for i in keep], series(tl.get("queue_bytes")), rates


def envelope(xs, ys, limit=2400):
    """At most about `limit` points of a long series that keep its shape: per bucket of
    samples its lowest and its highest point, in time order (a queue's peak is never lost)."""
    n = len(xs)
    if n <= limit:
        return xs, ys
    k = math.ceil(n / (limit // 2))
    ox, oy = [], []
    for a in range(0, n, k):
        idx = [i for i in range(a, min(n, a + k)) if not math.isnan(ys[i])]
        if not idx:
            ox.append(xs[a])
            oy.append(math.nan)
            continue
        lo = min(idx, key=lambda i: ys[i])
        hi = max(idx, key=lambda i: ys[i])
        for i in sorted({lo, hi}):
            ox.append(xs[i])
            oy.append(ys[i])
    return ox, oy


def finite_max(values, default=0.0):
    vals = [v for v in values if not math.isnan(v)]
    return max(vals) if vals else default


def plot_cc_rates(plt, ticker, ctx, out_dir, written):
    name = "cc_rates.png"
    import textwrap

    chosen = {}
    for run in ctx["runs"]:
        mode = run_mode(run)
        if mode in chosen:  # the first seed of each mode
            continue
        tl = cc_timeline(run)
        if tl is not None:
            chosen[mode] = (run, tl)
    if not chosen:
        note(f"{name} skipped: no run has a 'cc_timeline' (fabric_emu records one "
             "with --timeseries or --plots; its QPs' rates with congestion control on)")
        return
    modes = ordered_modes(ctx["modes"], chosen.keys())
    n = len(modes)
    ncols = 1 if n == 1 else 2 if n in (2, 4) else 3
    nrows = math.ceil(n / ncols)
    fig = plt.figure(figsize=(1.0 + 5.8 * ncols, 1.0 + 5.0 * nrows), constrained_layout=True)
    outer = fig.add_gridspec(nrows, ncols)
    cfg = ctx["report"].get("config")
    line_gbps = num(cfg.get("link_gbps")) if isinstance(cfg, dict) else None
    cc_modes = []
    for i, (mode, col) in enumerate(zip(modes, mode_colours(plt, ctx, modes))):
        run, (times, queue, rates) = chosen[mode]
        inner = outer[i // ncols, i % ncols].subgridspec(2, 1, height_ratios=(3, 2), hspace=0.04)
        ax_r = fig.add_subplot(inner[0])
        ax_q = fig.add_subplot(inner[1], sharex=ax_r)
        cc = run.get("cc") if isinstance(run.get("cc"), dict) else {}
        qb = run.get("queue_bytes") if isinstance(run.get("queue_bytes"), dict) else {}
        cc_off = str(cc.get("mode")) == "none"
        if cc.get("mode") and str(cc["mode"]) not in cc_modes:
            cc_modes.append(str(cc["mode"]))

        # Top: each QP's rate.
        top = line_gbps or 0.0
        for (qp, gbps), qcol in zip(rates.items(), colours(plt, len(rates))):
            xs, ys = envelope(times, gbps)
            top = max(top, finite_max(ys))
            ax_r.plot(xs, ys, color=qcol, linewidth=1.1, label=qp)
        if line_gbps:
            ax_r.axhline(line_gbps, color="grey", linewidth=0.8, linestyle=":", zorder=1)
        legend_rows = math.ceil(len(rates) / 4)
        qps = num(cc.get("qps"))
        shown = (f"{len(rates)} of {qps:.0f} QPs" if qps is not None and qps > len(rates)
                 else f"{len(rates)} QPs")
        ax_r.set_ylim(0, (top or 1.0) * (1.08 + 0.11 * legend_rows))  # the legend above the lines
        if rates:
            ax_r.legend(fontsize=7, loc="upper center", ncol=min(4, len(rates)), frameon=True,
                        framealpha=0.85, handlelength=1.5, columnspacing=1.0, borderpad=0.3,
                        title=f"QP source>destination/index ({shown})",
                        title_fontsize=7)
        else:
            ax_r.text(0.5, 0.5, "no QP rates: congestion control off" if cc_off
                      else "no QP rates recorded",
                      transform=ax_r.transAxes, ha="center", va="center", color="grey")
        ax_r.set_ylabel("QP rate (Gbit/s)")
        plain_linear(ax_r, ticker)
        ax_r.tick_params(axis="x", labelbottom=False)
        ax_r.grid(True, alpha=0.3)
        mark_events(ax_r, ctx, label=i == 0)

        # Bottom: the busiest lossless queue, in KB, with the ECN thresholds.
        kb = [q / 1e3 for q in queue]
        xs, ys = envelope(times, kb)
        ax_q.fill_between(xs, ys, step="post", color=col, alpha=0.3, linewidth=0)
        ax_q.step(xs, ys, where="post", color=col, linewidth=1.1)
        qtop = finite_max(ys)
        for key, style in (("kmin", (0, (5, 3))), ("kmax", (0, (2, 2)))):
            k = num(qb.get(key))
            if k is None or k <= 0:
                continue
            qtop = max(qtop, k / 1e3)
            ax_q.axhline(k / 1e3, color="#B01010", linewidth=1.2, linestyle=style, zorder=3)
            ax_q.annotate(f"{key} {human_bytes(k)}", (1, k / 1e3),
                          xycoords=("axes fraction", "data"), xytext=(-3, 2),
                          textcoords="offset points", ha="right", va="bottom", fontsize=7,
                          color="#B01010", zorder=4,
                          bbox=dict(facecolor="white", alpha=0.8, edgecolor="none", pad=0.8))
        ax_q.set_ylim(0, (qtop or 1.0) * 1.15)
        plain_linear(ax_q, ticker)
        ax_q.set_ylabel("queue depth (KB)")
        ax_q.set_xlabel("time")
        ax_q.xaxis.set_major_formatter(ticker.FuncFormatter(human_us))
        ax_q.grid(True, alpha=0.3)
        mark_events(ax_q, ctx)
        if times[-1] > min(0.0, times[0]):
            ax_q.set_xlim(min(0.0, times[0]), times[-1])  # from the run's start

        port = qb.get("port")
        facts = [f"busiest queue {port}" if port else "busiest lossless queue"]
        mean_rate = num(cc.get("mean_rate_fraction"))
        if cc_off:
            facts.append("congestion control off")
        else:
            # Each algorithm's own signals: DCQCN's CNPs and cuts, DCTCP's marked ACKs and
            # cuts, TIMELY's gradient and T_high decreases, HPCC's INT records and
            # multiplicative updates (runs[].cc.<mode>.total).
            algo = cc.get("mode", "dcqcn")
            total = cc.get(algo, {}).get("total", {}) if isinstance(cc.get(algo), dict) else {}
            signals = {
                "dctcp": [("marked_acks", "marked ACKs"), ("rate_cuts", "rate cuts")],
                "timely": [("gradient_decreases", "gradient decreases"),
                           ("t_high_decreases", "T_high decreases")],
                "hpcc": [("int_hops_seen", "INT records read"),
                         ("multiplicative", "multiplicative updates")],
            }.get(algo)
            if signals:
                for key, label in signals:
                    v = num(total.get(key))
                    if v is not None:
                        facts.append(f"{v:.0f} {label}")
            else:
                cuts, cnps = num(cc.get("rate_cuts")), num(cc.get("cnps_sent"))
                if cuts is not None:
                    facts.append(f"{cuts:.0f} rate cuts")
                if cnps is not None:
                    facts.append(f"{cnps:.0f} CNPs")
            if mean_rate is not None:
                facts.append(f"mean rate {mean_rate:.2f} of line")
        title = f"{mode} ({seed_label(run_seed(run))}): " + ", ".join(facts)
        ax_r.set_title("\n".join(textwrap.wrap(title, 70)), fontsize=10)
    what = f"Congestion control ({', '.join(cc_modes)})" if cc_modes else "Congestion control"
    config = ctx["report"].get("config", {}) if isinstance(ctx["report"], dict) else {}
    if config.get("transport") == "irn":
        what += ", transport irn (PFC off)"
    fig.suptitle("\n".join(textwrap.wrap(
        f"{what}: QP rates and the busiest lossless queue over time (first seed of each mode)" +
        ctx["workload_suffix"], 40 + 45 * ncols)), fontsize=11)
    save(fig, plt, out_dir, name, written)


# ----------------------------------------------------------------------------- main


def main(argv=None):
    ap = argparse.ArgumentParser(prog="fabric_plots.py",
                                 description="Plot a fabric_emu report (PNG files).")
    ap.add_argument("--json", required=True, metavar="REPORT.json", help="fabric_emu report")
    ap.add_argument("--timeseries", metavar="TS.csv",
                    help="fabric_emu per-link time series (for the link utilisation plots)")
    ap.add_argument("--out", required=True, metavar="DIR", help="directory for the PNG files")
    args = ap.parse_args(argv)

    plt, ticker = import_matplotlib()  # first: it may re-run the script
    report = load_report(args.json)
    timeseries = load_timeseries(args.timeseries) if args.timeseries else {}
    try:
        os.makedirs(args.out, exist_ok=True)
    except OSError as e:
        die(f"cannot create output directory {args.out}: {e.strerror or e}")

    runs = report["runs"]
    workloads = sorted({str(r["workload"]) for r in runs if "workload" in r})
    report_links = set()
    for r in runs:
        by_link = r.get("uplink_util_by_link")
        if isinstance(by_link, dict):
            report_links.update(str(k) for k in by_link)
    ctx = {
        "report": report,
        "runs": runs,
        "modes": modes_in_order(runs),
        "timeseries": timeseries,
        "ts_path": args.timeseries,
        "report_links": report_links,
        "workloads": workloads,
        "workload_suffix": f" — workload {', '.join(workloads)}" if workloads else "",
    }
    if not runs:
        note(f"{args.json}: no runs")

    written = []
    failed = 0
    plots = (
        ("link_util_heatmap.png", plot_link_heatmap),
        ("uplink_util.png", plot_uplink_util),
        ("throughput.png", plot_throughput),
        ("fct_cdf.png", plot_fct_cdf),
        ("slowdown.png", plot_slowdown),
        ("reorder_depth.png", plot_reorder_depth),
        ("pfc_timeline.png", plot_pfc_timeline),
        ("goodput_timeline.png", plot_goodput_timeline),
        ("cc_rates.png", plot_cc_rates),
    )
    for name, fn in plots:
        try:
            fn(plt, ticker, ctx, args.out, written)
        except Exception as e:  # bad data in one plot must not cost the others
            failed += 1
            plt.close("all")
            note(f"{name} failed: {type(e).__name__}: {e}")
    if not written:
        note("no plots written")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
