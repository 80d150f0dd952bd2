#!/usr/bin/env python3
"""scripts/pcap-demo.sh (the pcap walk-through: switch_emu ECMP, nic_emu spraying and
reordering of the same 64 QPs) runs to the end and says what it should."""
import os
import re
import subprocess
import sys
import tempfile
import unittest

SRC = os.environ.get("SPRAYNET_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))


class PcapDemo(unittest.TestCase):
    def test_walk_through(self):
        with tempfile.TemporaryDirectory() as d:
            p = subprocess.run(["bash", os.path.join(SRC, "scripts", "pcap-demo.sh"), d],
                               capture_output=True, text=True, timeout=600, cwd=SRC)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            ecmp = [int(m) for m in re.findall(r"uplink \d: +\d+ QPs +(\d+) packets", p.stdout)]
            self.assertEqual(len(ecmp), 16, p.stdout)  # 8 ECMP uplinks, then 8 sprayed
            self.assertEqual(sum(ecmp[:8]), 64 * 8 * 16)
            self.assertEqual(set(ecmp[8:]), {64 * 8 * 16 // 8})  # spraying: exactly even
            m = re.search(r"delivered to the host: (\d+) packets, (\d+) out of PSN order", p.stdout)
            self.assertIsNotNone(m, p.stdout)
            self.assertEqual(m.group(1), str(64 * 8 * 16))
            self.assertEqual(m.group(2), "0")
            for f in ("roce.pcap", "stats.json", "spray/delivered.pcap"):
                self.assertTrue(os.path.exists(os.path.join(d, f)), f)


if __name__ == "__main__":
    unittest.main(verbosity=2)
