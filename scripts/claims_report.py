#!/usr/bin/env python3
"""Turns the scenario reports scripts/claims.sh collected (DIR/NAME.json, written by
fabric_emu --scenario NAME --json) into DIR/CLAIMS.md, DIR/claims.json and DIR/NAME.png.

The table gives each figure's mean ± sample standard deviation over seeds. The plots draw the
mean as a bar, the min..max over the seeds as the whisker (a figure's per-seed values come from
its expression over the measures; never past the data, so never below zero for a quantity that
cannot be negative) and each seed as a dot; an axis whose values are all 0 is a plain 0..1."""
import argparse
import json
import math
import os
import re


def fmt(v):
    if v is None or (isinstance(v, float) and (math.isnan(v) or math.isinf(v))):
        return str(v)
    a = abs(v)
    if a != 0 and (a >= 1e6 or a < 1e-3):
        return f"{v:.3g}"
    if a >= 100:
        return f"{v:.1f}"
    return f"{v:.3f}"


def measured(f):
    s = fmt(f["mean"])
    if f["seeds"] > 1:
        s += " ± " + fmt(f["stddev"])
    if f["unit"]:
        s += " " + f["unit"]
    return s


def cell(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


def article_number(text):
    """The article's figure as a number when it is one ("~0.60", ">0.95", "7/8 = 0.875")."""
    nums = re.findall(r"[-+]?\d*\.?\d+", text.replace(",", ""))
    if not nums or re.search(r"[a-zA-Z]{3,}", text.split("=")[-1]):
        return None
    return float(nums[-1])


def finite(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def figure_values(f, measures):
    """The figure's value per seed: its expression (+ - * / ( ), min, max, names of measures, numbers, the
    scenario's own grammar) evaluated over the seeds' measures as fabric_emu does; None when it
    cannot be (an unknown name, other syntax) or does not give the reported mean back."""
    import ast

    def ev(node):
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and finite(node.value):
            return [float(node.value)]
        if isinstance(node, ast.Name):
            v = measures.get(node.id)
            if not isinstance(v, list) or not v:
                raise ValueError(node.id)
            return [float(x) if finite(x) else math.nan for x in v]
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            a = ev(node.operand)
            return [-x for x in a] if isinstance(node.op, ast.USub) else a
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id in ("min", "max") and node.args and not node.keywords):
            args = [ev(x) for x in node.args]
            n = max(len(x) for x in args)
            if any(len(x) not in (1, n) for x in args):
                raise ValueError("seeds")
            pick = min if node.func.id == "min" else max
            return [pick(x[0 if len(x) == 1 else i] for x in args) for i in range(n)]
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.Div)):
            a, b = ev(node.left), ev(node.right)
            if len(a) != len(b) and len(a) != 1 and len(b) != 1:
                raise ValueError("seeds")
            out = []
            for i in range(max(len(a), len(b))):
                x, y = a[0 if len(a) == 1 else i], b[0 if len(b) == 1 else i]
                if isinstance(node.op, ast.Add):
                    out.append(x + y)
                elif isinstance(node.op, ast.Sub):
                    out.append(x - y)
                elif isinstance(node.op, ast.Mult):
                    out.append(x * y)
                elif y != 0:
                    out.append(x / y)
                else:  # as in C++: x / 0 is infinite, 0 / 0 NaN
                    out.append(math.nan if x == 0 or math.isnan(x) else math.copysign(math.inf, x))
            return out
        raise ValueError(type(node).__name__)

    try:
        vals = ev(ast.parse(str(f.get("value", "")), mode="eval"))
    except (SyntaxError, ValueError, TypeError, RecursionError):
        return None
    if len(vals) != f.get("seeds", len(vals)) or not all(math.isfinite(v) for v in vals):
        return None
    mean = sum(vals) / len(vals)
    if finite(f.get("mean")) and abs(mean - f["mean"]) > 1e-6 * max(1.0, abs(f["mean"])):
        return None
    return vals


def spread(mean, sd, vals):
    """(low, high) of the whisker: the seeds' min..max when known (never past the data, so
    never below zero for a quantity that cannot be), else mean ± sd with the low end held at
    zero for a mean that is not negative."""
    if vals:
        return min(vals), max(vals)
    lo = mean - sd
    if mean >= 0:
        lo = max(0.0, lo)
    return lo, mean + sd


def plain_axis(ax, which="x"):
    """No offset and no scientific notation (the "1e-9" over a panel of zeros)."""
    from matplotlib.ticker import ScalarFormatter
    fmt_ = ScalarFormatter(useOffset=False)
    fmt_.set_scientific(False)
    (ax.xaxis if which == "x" else ax.yaxis).set_major_formatter(fmt_)


def draw_spread(ax, ys, means, spreads, seeds):
    """Bars at the means, whiskers over `spreads` and a dot per seed."""
    ax.barh(ys, means, color="#4C72B0", height=0.6, zorder=2)
    for y, m, (lo, hi), vals in zip(ys, means, spreads, seeds):
        if hi > lo:
            ax.errorbar([m], [y], xerr=[[m - lo], [hi - m]], fmt="none", ecolor="black",
                        elinewidth=1.0, capsize=3, zorder=3)
        if vals and len(vals) > 1:
            ax.scatter(vals, [y] * len(vals), s=9, color="black", alpha=0.6, zorder=4,
                       linewidths=0)


def x_range(values):
    """x limits that hold every value (and 0) with a margin; (0, 1) when they are all 0."""
    lo, hi = min(values + [0.0]), max(values + [0.0])
    if hi - lo <= 0:
        return 0.0, 1.0
    pad = 0.12 * (hi - lo)
    return (lo - pad if lo < 0 else 0.0), hi + pad


def heading(name, s):
    """The plot's title: the scenario, its verdict (wrapped) and how to read the bars."""
    import textwrap
    return "\n".join(textwrap.wrap(f"{name}: {s['verdict']}", 100) +
                     ["(bar: mean over seeds, whisker: min-max over seeds, dots: each seed; "
                      "red line: the article's figure)"])


def plot(name, s, path):
    """One row per figure, each on its own scale: the measured mean with the range over seeds,
    and the article's figure as a red mark where it gives a number."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    figs = s["figures"]
    measures = s.get("measures") or {}
    fig, axes = plt.subplots(len(figs), 1, figsize=(8.5, 0.7 * len(figs) + 1.0), squeeze=False)
    for ax, f in zip(axes[:, 0], figs):
        mean = f["mean"] if finite(f["mean"]) else 0.0
        sd = f["stddev"] if finite(f["stddev"]) else 0.0
        vals = figure_values(f, measures) if f.get("seeds", 1) > 1 else None
        lo, hi = spread(mean, sd, vals)
        draw_spread(ax, [0], [mean], [(lo, hi)], [vals])
        ref = article_number(f["article"]) if f["article"] else None
        if ref is not None:
            ax.axvline(ref, color="#C44E52", lw=2, zorder=5)
        ax.set_xlim(*x_range([mean, lo, hi] + ([ref] if ref is not None else [])))
        ax.set_ylim(-0.6, 0.6)
        plain_axis(ax)
        ax.set_yticks([])
        label = f["label"] + (f" [{f['unit']}]" if f["unit"] else "")
        ax.set_ylabel(label, rotation=0, ha="right", va="center", fontsize=8)
        ax.tick_params(axis="x", labelsize=7)
        ax.grid(True, axis="x", alpha=0.3, zorder=0)
        ax.text(1.01, 0.5, fmt(f["mean"]) + (f"\narticle {f['article']}" if f["article"] else ""),
                transform=ax.transAxes, fontsize=7, va="center")
    fig.suptitle(heading(name, s), fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# Scenarios that compare one quantity across runs are drawn as groups on a common scale (the
# generic plot gives each figure its own axis, which hides a before/after). Each panel: a title,
# the article's figure for it if it gives one as a number (None otherwise), and (measure, label)
# pairs from the scenario's `measure:` section.
PANELS = {
    "reorder-retx": [
        ("retransmission rate", 0.127, [
            ("noreorder_0", "no reordering, cable spread 0"),
            ("noreorder", "no reordering, spread 500 ns"),
            ("noreorder_2000", "no reordering, spread 2000 ns"),
            ("reorder", "reorder engine, hold 500 us"),
            ("ooo", "out-of-order placement"),
            ("ecmp", "per-flow ECMP"),
            ("hold_1", "hold 1 us (spread 2000 ns)"),
            ("hold_2", "hold 2 us (spread 2000 ns)"),
            ("hold_5", "hold 5 us (spread 2000 ns)")]),
        ("throughput (fraction of line rate)", None, [
            ("tput_noreorder", "no reordering"),
            ("tput_reorder", "reorder engine"),
            ("tput_ooo", "out-of-order placement"),
            ("tput_hold_1", "hold 1 us (spread 2000 ns)")]),
    ],
    "pfc-storm": [
        ("longest pause [us]", None, [
            ("longest", "XOFF 80%, no fast feedback"), ("longest_65", "XOFF 65%"),
            ("longest_ff", "fast feedback"), ("longest_fix", "XOFF 65% + fast feedback")]),
        ("hosts' NICs paused, summed [us]", None, [
            ("nic_paused", "XOFF 80%, no fast feedback"), ("nic_paused_65", "XOFF 65%"),
            ("nic_paused_ff", "fast feedback"), ("nic_paused_fix", "XOFF 65% + fast feedback")]),
        ("storm: first pause to end of last [us]", None, [
            ("storm", "XOFF 80%, no fast feedback"), ("storm_fix", "XOFF 65% + fast feedback")]),
        ("goodput (fraction of line rate)", None, [
            ("tput", "XOFF 80%, no fast feedback"), ("tput_65", "XOFF 65%"),
            ("tput_ff", "fast feedback"), ("tput_fix", "XOFF 65% + fast feedback")]),
        ("incast alone (8 to 1): storm and hosts' NICs paused [us]", None, [
            ("incast_storm", "storm, XOFF 80%, no fast feedback"),
            ("incast_storm_fix", "storm, XOFF 65% + fast feedback"),
            ("incast_nic_paused", "NICs paused, XOFF 80%, no fast feedback"),
            ("incast_nic_paused_fix", "NICs paused, XOFF 65% + fast feedback")]),
    ],
    "layout-mismatch": [
        ("layout mismatches counted", None, [
            ("matched_mismatch", "every NIC ts-high"), ("all_mismatch", "h3 path-high, all 16 ids"),
            ("mismatch", "h3 path-high, 8 ids")]),
        ("lines the NICs logged", None, [
            ("matched_log", "every NIC ts-high"), ("all_log", "h3 path-high, all 16 ids"),
            ("log", "h3 path-high, 8 ids")]),
        ("packets unaccounted for / QPs cut off", None, [
            ("all_unaccounted", "unaccounted, all 16 ids"), ("unaccounted", "unaccounted, 8 ids"),
            ("all_cut", "QPs cut off, all 16 ids"), ("cut", "QPs cut off, 8 ids")]),
        ("throughput (fraction of line rate)", None, [
            ("matched_tput", "every NIC ts-high"), ("all_tput", "h3 path-high, all 16 ids"),
            ("tput", "h3 path-high, 8 ids")]),
    ],
    "checksum-filter": [
        ("packets the filter dropped", None, [
            ("spray_fabric_drops", "spraying, fabric side"), ("ecmp_fabric_drops", "ECMP, fabric side"),
            ("spray_host_drops", "spraying, host side, NIC restores"),
            ("spray_norestore_drops", "spraying, host side, no restore")]),
        ("QPs cut off (of 16)", None, [
            ("spray_none_cut", "spraying, no filter"), ("spray_cut", "spraying, fabric side"),
            ("ecmp_cut", "ECMP, fabric side"), ("spray_host_cut", "spraying, host side, NIC restores"),
            ("spray_norestore_cut", "spraying, host side, no restore")]),
        ("throughput (fraction of line rate)", None, [
            ("spray_tput", "spraying, no filter"), ("spray_fabric_tput", "spraying, fabric side"),
            ("spray_host_tput", "spraying, host side, NIC restores"),
            ("spray_norestore_tput", "spraying, host side, no restore"),
            ("ecmp_tput", "ECMP, no filter"), ("ecmp_fabric_tput", "ECMP, fabric side")]),
    ],
}


def mean_sd(v):
    m = sum(v) / len(v)
    sd = math.sqrt(sum((x - m) ** 2 for x in v) / (len(v) - 1)) if len(v) > 1 else 0.0
    return m, sd


def plot_panels(name, s, panels, path):
    """One panel per compared quantity, its runs side by side on one scale."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = sum(len(p[2]) for p in panels)
    fig, axes = plt.subplots(len(panels), 1, figsize=(8, 0.32 * rows + 0.9 * len(panels) + 0.6),
                             squeeze=False, gridspec_kw={"height_ratios": [len(p[2]) for p in panels]})
    for ax, (title, ref, bars) in zip(axes[:, 0], panels):
        seeds = [[x for x in s["measures"][m] if finite(x)] for m, _ in bars]
        means = [mean_sd(v)[0] if v else 0.0 for v in seeds]
        spreads = [(min(v), max(v)) if v else (0.0, 0.0) for v in seeds]
        ys = list(range(len(bars)))[::-1]
        draw_spread(ax, ys, means, spreads, seeds)
        ax.set_yticks(ys)
        ax.set_yticklabels([label for _, label in bars], fontsize=7)
        lo, top = x_range([v for sp in spreads for v in sp] + ([ref] if ref is not None else []))
        if ref is not None:
            ax.axvline(ref, color="#C44E52", lw=2, zorder=5)
        top *= 1.1  # room for the values on the right
        ax.set_xlim(lo, top)
        for y, a in zip(ys, means):
            ax.text(top - 0.01 * (top - lo), y, fmt(a), fontsize=7, va="center", ha="right")
        plain_axis(ax)
        ax.set_title(title, fontsize=8, loc="left")
        ax.tick_params(axis="x", labelsize=7)
        ax.grid(True, axis="x", alpha=0.3, zorder=0)
    fig.suptitle(heading(name, s), fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--research", action="store_true",
                    help="papers' headline claims (configs/research): RESEARCH.md, research.json, "
                         "each row with the wall time claims.sh measured (DIR/NAME.seconds)")
    ap.add_argument("names", nargs="+")
    a = ap.parse_args()
    rows, everything = [], {}
    for name in a.names:
        with open(os.path.join(a.dir, name + ".json")) as f:
            rep = json.load(f)
        s = rep["scenario"]
        everything[name] = s
        cmd = f"build/fabric/fabric_emu --scenario {name}" + (" --quick" if a.quick else "")
        cmd = f"`{cmd}`"
        took = os.path.join(a.dir, name + ".seconds")
        if a.research and os.path.exists(took):
            with open(took) as f:
                secs = int(f.read().split()[0])
            cmd += f"<br>{secs // 60} min {secs % 60} s on {os.cpu_count()} cores"
            s["wall_seconds"] = secs
        figs = "<br>".join(f"{cell(f['label'])}: **{measured(f)}**" + (f" ({'paper' if a.research else 'article'} {cell(f['article'])})" if f["article"] else "")
                           for f in s["figures"])
        verdict = f"**{cell(s['verdict'])}**" + (f"<br>{cell(s['why'])}" if s["why"] else "")
        rows.append(f"| `{name}` | {cell(s['claim'])} | {cell(s['article'])} | {figs} | {verdict} | {cmd} |")
        if name in PANELS:
            plot_panels(name, s, PANELS[name], os.path.join(a.dir, name + ".png"))
        else:
            plot(name, s, os.path.join(a.dir, name + ".png"))
    stem = "research" if a.research else "claims"
    with open(os.path.join(a.dir, stem + ".json"), "w") as f:
        json.dump(everything, f, indent=1, sort_keys=True)
        f.write("\n")
    if a.research:
        with open(os.path.join(a.dir, "RESEARCH.md"), "w") as f:
            f.write("# Papers' headline claims, measured on fabric_emu\n\n")
            f.write("Written by `scripts/claims.sh --research" + (" --quick" if a.quick else "") + "`: each "
                    "scenario (configs/research/NAME.yaml) measures a paper's headline claim on the "
                    "paper's set-up (a preset, docs/presets.md); every figure is a mean ± sample standard "
                    "deviation over its seeds, and the verdict is the first of its rules whose conditions "
                    "hold on the measured means. The full forms take minutes to an hour each: the "
                    "re-run column gives the wall time measured.\n\n")
            f.write("| scenario | claim | paper | measured | verdict | re-run |\n|---|---|---|---|---|---|\n")
            f.write("\n".join(rows) + "\n")
        return
    with open(os.path.join(a.dir, "CLAIMS.md"), "w") as f:
        f.write("# The articles' claims, measured on fabric_emu\n\n")
        f.write("Written by `scripts/claims.sh" + (" --quick" if a.quick else "") + "`; every figure is a mean ± sample "
                "standard deviation over the scenario's seeds, and the verdict is the first of the "
                "scenario's rules (configs/scenarios/NAME.yaml) whose conditions hold on the measured means.\n\n")
        f.write("| scenario | claim | article | measured | verdict | re-run |\n|---|---|---|---|---|---|\n")
        f.write("\n".join(rows) + "\n")


if __name__ == "__main__":
    main()
