#!/usr/bin/env python3
"""Watches a running nic_emu's RC traffic engine over DPDK telemetry until its messages are done.

    scripts/rc_watch.py PREFIX [--timeout S] [--period-ms MS]

Connects once to /var/run/dpdk/PREFIX/dpdk_telemetry.v2 (DPDK's telemetry v2 protocol:
SOCK_SEQPACKET, a JSON greeting, one JSON reply per command) and reads /spraynet/rc every
period. Goodput is measured on this side's clock between the first reading with acknowledged
bytes and the first reading that says done: bytes acknowledged in between over that time, so
the start-up before the first reading is left out. Prints one JSON object and exits 0 when
done, 1 on timeout or a lost connection (the last reading is printed either way), 2 on bad use.
"""
import argparse
import json
import os
import socket
import sys
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("prefix")
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--period-ms", type=float, default=10.0)
    a = ap.parse_args()
    path = os.path.join("/var/run/dpdk", a.prefix, "dpdk_telemetry.v2")
    try:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        sock.settimeout(10)
        sock.connect(path)
        max_len = json.loads(sock.recv(1024).decode())["max_output_len"]
    except (OSError, ValueError, KeyError) as e:
        print(f"rc_watch.py: {path}: {e}", file=sys.stderr)
        return 1
    deadline = time.monotonic() + a.timeout
    first = None  # (time, bytes_acked) of the first reading with bytes acknowledged
    last = {}
    while True:
        try:
            sock.send(b"/spraynet/rc")
            rc = json.loads(sock.recv(max_len).decode())["/spraynet/rc"]
        except (OSError, ValueError, KeyError) as e:
            print(json.dumps({"done": False, "error": str(e), "last": last}))
            return 1
        now = time.monotonic()
        if "error" in rc:
            print(f"rc_watch.py: {a.prefix}: {rc['error']}", file=sys.stderr)
            return 1
        last = rc
        acked = rc["requester/bytes_acked"]
        if first is None and acked > 0:
            first = (now, acked)
        if rc["done"]:
            out = {"done": True, "reading": rc}
            if first is not None and now > first[0]:
                out["window_s"] = round(now - first[0], 3)
                out["goodput_gbps"] = round((acked - first[1]) * 8 / (now - first[0]) / 1e9, 4)
            print(json.dumps(out))
            return 0
        if now > deadline:
            print(json.dumps({"done": False, "error": f"not done within {a.timeout} s",
                              "last": last}))
            return 1
        time.sleep(a.period_ms / 1000)


if __name__ == "__main__":
    sys.exit(main())
