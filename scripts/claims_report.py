#!/usr/bin/env python3
"""Turns the scenario reports scripts/claims.sh collected (DIR/NAME.json, written by
fabric_emu --scenario NAME --json) into DIR/CLAIMS.md, DIR/claims.json and DIR/NAME.png."""
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


def plot(name, s, path):
    """One row per figure, each on its own scale: the measured mean with its spread over seeds,
    and the article's figure as a red mark where it gives a number."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    figs = s["figures"]
    fig, axes = plt.subplots(len(figs), 1, figsize=(8, 0.62 * len(figs) + 1.0), squeeze=False)
    for ax, f in zip(axes[:, 0], figs):
        ax.barh([0], [f["mean"]], xerr=[f["stddev"]], color="#4C72B0", capsize=3, height=0.6)
        top = max(abs(f["mean"]) + f["stddev"], 1e-9)
        ref = article_number(f["article"]) if f["article"] else None
        if ref is not None:
            ax.axvline(ref, color="#C44E52", lw=2)
            top = max(top, abs(ref))
        lo = min(0.0, f["mean"] - f["stddev"], ref if ref is not None else 0.0)
        ax.set_xlim(lo * 1.15, top * 1.15)
        ax.set_yticks([])
        label = f["label"] + (f" [{f['unit']}]" if f["unit"] else "")
        ax.set_ylabel(label, rotation=0, ha="right", va="center", fontsize=8)
        ax.tick_params(axis="x", labelsize=7)
        ax.text(1.01, 0.5, fmt(f["mean"]) + (f"\narticle {f['article']}" if f["article"] else ""),
                transform=ax.transAxes, fontsize=7, va="center")
    axes[0, 0].set_title(f"{name}: {s['verdict']}  (blue: measured ± sd over seeds; red: article)", fontsize=9)
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
        stats = [mean_sd(s["measures"][m]) for m, _ in bars]
        ys = list(range(len(bars)))[::-1]
        ax.barh(ys, [a for a, _ in stats], xerr=[b for _, b in stats], color="#4C72B0", capsize=3, height=0.6)
        ax.set_yticks(ys)
        ax.set_yticklabels([label for _, label in bars], fontsize=7)
        top = max([a + b for a, b in stats] + [ref or 0])
        if top <= 0:
            top = 1.0  # every bar 0: a plain axis, not one scaled to nothing
        if ref is not None:
            ax.axvline(ref, color="#C44E52", lw=2)
        ax.set_xlim(0, top * 1.2)
        for y, (a, _) in zip(ys, stats):
            ax.text(top * 1.19, y, fmt(a), fontsize=7, va="center", ha="right")
        ax.set_title(title, fontsize=8, loc="left")
        ax.tick_params(axis="x", labelsize=7)
    fig.suptitle(f"{name}: {s['verdict']}  (mean ± sd over seeds; red: article)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("names", nargs="+")
    a = ap.parse_args()
    rows, everything = [], {}
    for name in a.names:
        with open(os.path.join(a.dir, name + ".json")) as f:
            rep = json.load(f)
        s = rep["scenario"]
        everything[name] = s
        cmd = f"build/fabric/fabric_emu --scenario {name}" + (" --quick" if a.quick else "")
        figs = "<br>".join(f"{cell(f['label'])}: **{measured(f)}**" + (f" (article {cell(f['article'])})" if f["article"] else "")
                           for f in s["figures"])
        verdict = f"**{cell(s['verdict'])}**" + (f"<br>{cell(s['why'])}" if s["why"] else "")
        rows.append(f"| `{name}` | {cell(s['claim'])} | {cell(s['article'])} | {figs} | {verdict} | `{cmd}` |")
        if name in PANELS:
            plot_panels(name, s, PANELS[name], os.path.join(a.dir, name + ".png"))
        else:
            plot(name, s, os.path.join(a.dir, name + ".png"))
    with open(os.path.join(a.dir, "claims.json"), "w") as f:
        json.dump(everything, f, indent=1, sort_keys=True)
        f.write("\n")
    with open(os.path.join(a.dir, "CLAIMS.md"), "w") as f:
        f.write("# The articles' claims, measured on fabric_emu\n\n")
        f.write("Written by `scripts/claims.sh" + (" --quick" if a.quick else "") + "`; every figure is a mean ± sample "
                "standard deviation over the scenario's seeds, and the verdict is the first of the "
                "scenario's rules (configs/scenarios/NAME.yaml) whose conditions hold on the measured means.\n\n")
        f.write("| scenario | claim | article | measured | verdict | re-run |\n|---|---|---|---|---|---|\n")
        f.write("\n".join(rows) + "\n")


if __name__ == "__main__":
    main()
