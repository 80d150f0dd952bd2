#!/usr/bin/env python3
"""scripts/claims_report.py on small synthetic scenario reports (no fabric_emu needed): it
writes CLAIMS.md, claims.json and a PNG per scenario; in its plots no whisker goes below zero
for values that are not negative (a spread wider than the mean, as a recovery time of 800 us on
one seed and 0 on the other gives), a figure whose every seed is 0 gets a plain 0..1 axis (no
"1e-9" offset), and a figure's whisker spans its seeds' values, worked out from its expression.

Run: python3 tests/fabric/test_claims_report.py   (CLAIMS_REPORT=path overrides the script)
"""

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from system_python import use_python_with_matplotlib  # noqa: E402

use_python_with_matplotlib(__file__)  # the in-process checks draw the figures themselves

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.environ.get("CLAIMS_REPORT", os.path.join(REPO, "scripts", "claims_report.py"))
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def load_script():
    spec = importlib.util.spec_from_file_location("claims_report_under_test", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def mean_sd(v):
    m = sum(v) / len(v)
    sd = (sum((x - m) ** 2 for x in v) / (len(v) - 1)) ** 0.5 if len(v) > 1 else 0.0
    return m, sd


def figure(label, value, vals, article="", unit=""):
    m, sd = mean_sd(vals)
    return {"label": label, "value": value, "mean": m, "stddev": sd, "seeds": len(vals),
            "article": article, "unit": unit}


def generic_scenario():
    """Like failover --quick: a recovery time of 800 and 0 us, zeros, a ratio of measures."""
    measures = {"rec": [800.0, 0.0], "zero": [0.0, 0.0], "after": [0.42, 0.62],
                "before": [0.61, 0.52], "lost": [5.0, 11.0]}
    ratio = [a / b for a, b in zip(measures["after"], measures["before"])]
    figs = [figure("time to recover", "rec", measures["rec"], "a few ms", "us"),
            figure("DLB time to recover", "zero", measures["zero"], "", "us"),
            figure("goodput after / before", "after / before", ratio, "7/8 = 0.875"),
            figure("packets lost", "lost", measures["lost"]),
            figure("timeouts (all modes)", "zero + zero + zero", [0.0, 0.0], "0 (none)")]
    return {"name": "synthetic", "claim": "a claim", "article": "an article", "source": "",
            "scaled": "", "verdict": "holds", "why": "", "conditions": [], "figures": figs,
            "measures": measures}


def panel_scenario(mod, name):
    """A scenario drawn as panels: every measure its PANELS entry names, with spreads wider
    than their means, one panel's runs all zero."""
    measures = {}
    for i, (_title, _ref, bars) in enumerate(mod.PANELS[name]):
        for j, (m, _label) in enumerate(bars):
            measures[m] = [0.0, 0.0] if i == 0 else [0.0, 0.0, 3.0 + j]
    figs = [figure("first", next(iter(measures)), measures[next(iter(measures))])]
    return {"name": name, "claim": "c", "article": "", "source": "", "scaled": "",
            "verdict": "holds", "why": "", "conditions": [], "figures": figs,
            "measures": measures}


class ClaimsReportTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="claims_report_test_")
        self.dir = self.tmp.name
        self.mod = load_script()

    def tearDown(self):
        self.tmp.cleanup()

    def capture(self, draw):
        """Runs `draw()` (which saves and closes one figure) and returns that figure."""
        from matplotlib.figure import Figure
        saved = []
        original = Figure.savefig

        def keep(fig, *a, **kw):
            fig.canvas.draw()
            saved.append(fig)
            return original(fig, *a, **kw)

        Figure.savefig = keep
        try:
            draw()
        finally:
            Figure.savefig = original
        self.assertEqual(len(saved), 1)
        return saved[0]

    def check_axes(self, fig, negative_ok=()):
        from matplotlib.container import ErrorbarContainer
        whiskers = 0
        for ax in fig.axes:
            label = ax.get_ylabel() or ax.get_title(loc="left")
            self.assertEqual(ax.xaxis.get_offset_text().get_text(), "", label)
            for t in ax.get_xticklabels():
                for bad in ("e-", "e+", "$", "^"):
                    self.assertNotIn(bad, t.get_text(), f"{label}: tick {t.get_text()!r}")
            if label in negative_ok:
                continue
            self.assertGreaterEqual(ax.get_xlim()[0], 0.0, label)
            for c in ax.containers:
                if isinstance(c, ErrorbarContainer):
                    for lc in c.lines[2]:
                        for seg in lc.get_segments():
                            whiskers += 1
                            self.assertGreaterEqual(min(x for x, _ in seg), 0.0,
                                                    f"{label}: whisker below zero")
        return whiskers

    def test_script_writes_the_report_and_plots(self):
        names = ["synthetic", "layout-mismatch"]
        for name, s in (("synthetic", generic_scenario()),
                        ("layout-mismatch", panel_scenario(self.mod, "layout-mismatch"))):
            with open(os.path.join(self.dir, name + ".json"), "w") as f:
                json.dump({"runs": [], "scenario": s}, f)
        r = subprocess.run([sys.executable, SCRIPT, "--dir", self.dir, "--quick", *names],
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        for name in names:
            with open(os.path.join(self.dir, name + ".png"), "rb") as f:
                self.assertEqual(f.read(8), PNG_MAGIC, name)
        with open(os.path.join(self.dir, "CLAIMS.md")) as f:
            md = f.read()
        self.assertIn("`synthetic`", md)
        self.assertIn("400.0 ± 565.7 us", md)  # the table keeps mean ± sd
        with open(os.path.join(self.dir, "claims.json")) as f:
            self.assertEqual(sorted(json.load(f)), sorted(names))

    def test_generic_plot_no_negative_whisker_no_offset(self):
        s = generic_scenario()
        fig = self.capture(lambda: self.mod.plot("synthetic", s, os.path.join(self.dir, "g.png")))
        self.assertGreaterEqual(self.check_axes(fig), 3)
        by_label = {ax.get_ylabel(): ax for ax in fig.axes}
        rec = by_label["time to recover [us]"]
        self.assertEqual(rec.get_xlim()[0], 0.0)  # 400 ± 566 would start at -166
        for label in ("DLB time to recover [us]", "timeouts (all modes)"):
            self.assertEqual(by_label[label].get_xlim(), (0.0, 1.0), label)
        # The ratio's whisker spans its seeds' values, evaluated from "after / before".
        ratio = [a / b for a, b in zip(s["measures"]["after"], s["measures"]["before"])]
        ax = by_label["goodput after / before"]
        xs = [x for c in ax.containers if hasattr(c, "lines") and c.lines[2]
              for lc in c.lines[2] for seg in lc.get_segments() for x, _ in seg]
        self.assertAlmostEqual(min(xs), min(ratio), places=9)
        self.assertAlmostEqual(max(xs), max(ratio), places=9)

    def test_panels_no_negative_whisker_no_offset(self):
        s = panel_scenario(self.mod, "layout-mismatch")
        fig = self.capture(lambda: self.mod.plot_panels("layout-mismatch", s,
                                                        self.mod.PANELS["layout-mismatch"],
                                                        os.path.join(self.dir, "p.png")))
        self.assertGreater(self.check_axes(fig), 0)
        zero = [ax for ax in fig.axes if ax.get_title(loc="left") == self.mod.PANELS["layout-mismatch"][0][0]]
        self.assertEqual(len(zero), 1)
        self.assertEqual(zero[0].get_xlim()[0], 0.0)
        self.assertGreater(zero[0].get_xlim()[1], 0.5)  # a plain axis, not one scaled to 1e-9

    def test_negative_values_keep_their_range(self):
        # A quantity that can be negative (a difference): the whisker reaches its lowest seed.
        s = generic_scenario()
        s["measures"]["gain"] = [-0.2, 0.4]
        s["figures"] = [figure("gain", "gain", s["measures"]["gain"])]
        fig = self.capture(lambda: self.mod.plot("neg", s, os.path.join(self.dir, "n.png")))
        self.check_axes(fig, negative_ok=("gain",))
        self.assertLess(fig.axes[0].get_xlim()[0], -0.2)

    def test_figure_values(self):
        m = {"a": [1.0, 3.0], "b": [2.0, 4.0], "z": [0.0, 0.0]}
        fv = self.mod.figure_values
        self.assertEqual(fv(figure("x", "a / b", [0.5, 0.75]), m), [0.5, 0.75])
        self.assertEqual(fv(figure("x", "-(a - b) * 2 + 1", [3.0, 3.0]), m), [3.0, 3.0])
        self.assertIsNone(fv(figure("x", "nosuch", [1.0, 1.0]), m))
        self.assertIsNone(fv(figure("x", "a / z", [1.0, 1.0]), m))  # infinite: no range
        self.assertIsNone(fv(figure("x", "a", [5.0, 5.0]), m))  # not the reported mean
        self.assertIsNone(fv(figure("x", "__import__('os')", [1.0, 1.0]), m))
        self.assertEqual(self.mod.spread(400.0, 565.7, None), (0.0, 965.7))
        self.assertEqual(self.mod.spread(-1.0, 2.0, None), (-3.0, 1.0))
        self.assertEqual(self.mod.spread(400.0, 565.7, [800.0, 0.0]), (0.0, 800.0))


if __name__ == "__main__":
    unittest.main(verbosity=2)
