#!/usr/bin/env python3
"""scripts/claims.sh, the full run: every scenario, CLAIMS.md, claims.json and a plot each; and
the committed docs/CLAIMS.md is what a fresh run writes (the runs are deterministic, so a
difference means the code changed a measured figure or a verdict: regenerate and commit it).

FABRIC_EMU points at the program; SPRAYNET_SOURCE_DIR at the tree."""
import difflib
import json
import os
import subprocess
import tempfile
import unittest

EMU = os.environ.get("FABRIC_EMU", "build/fabric/fabric_emu")
SRC = os.environ.get("SPRAYNET_SOURCE_DIR", ".")


class Claims(unittest.TestCase):
    def test_fresh_run_matches_the_committed_table(self):
        names = subprocess.run([EMU, "--scenario", "list"], capture_output=True, text=True,
                               check=True).stdout.split("\n")
        # The claims are the scenarios; presets (marked [preset]) are studies, not claims, and
        # research claims ([research]) run with claims.sh --research (test_research_claims.py).
        names = [n.split()[0] for n in names
                 if n.strip() and n.split()[1:2] not in (["[preset]"], ["[research]"])]
        self.assertTrue(names)
        with tempfile.TemporaryDirectory() as d:
            env = dict(os.environ, FABRIC_EMU=os.path.abspath(EMU), CLAIMS_NO_BUILD="1")
            p = subprocess.run([os.path.join(SRC, "scripts", "claims.sh"), "--out", d],
                               capture_output=True, text=True, env=env, timeout=1500)
            self.assertEqual(p.returncode, 0, p.stderr)
            out = os.path.join(d, "claims")
            with open(os.path.join(out, "claims.json")) as f:
                claims = json.load(f)
            self.assertTrue(claims)
            for name in names:
                self.assertTrue(os.path.getsize(os.path.join(out, name + ".png")) > 0, name)
            with open(os.path.join(out, "CLAIMS.md")) as f:
                fresh = f.read()
        with open(os.path.join(SRC, "docs", "CLAIMS.md")) as f:
            committed = f.read()
        for name in names:
            self.assertIn("`" + name + "`", fresh)
        if fresh != committed:
            diff = "".join(difflib.unified_diff(committed.splitlines(True), fresh.splitlines(True),
                                                "docs/CLAIMS.md", "fresh CLAIMS.md"))
            self.fail("docs/CLAIMS.md differs from a fresh scripts/claims.sh run (regenerate it: "
                      "scripts/claims.sh && cp out/claims/CLAIMS.md docs/):\n" + diff[:20000])


if __name__ == "__main__":
    unittest.main(verbosity=2)
