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
