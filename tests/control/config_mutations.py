#!/usr/bin/env python3
"""Feeds a program mutated copies of a config and checks that each one is refused with a clear
`FILE: KEY: reason` error (exit status 2) or accepted and run to a clean exit: never a crash, a
hang, an uncaught exception or a silent misreading of a value out of range.

Mutations are drawn, with a fixed seed, from every place in the config: each scalar replaced by a
wrong type, a negative, zero, a huge number, an empty string, null, a list or a map; each map given
an unknown key or losing one; each list emptied, its first element doubled, or repeated thousands
of times (the limits on ports, rules, QPs and windows).

  config_mutations.py --program build/switch_emu/switch_emu --config configs/x.yaml \
      [--count N] [--seed S] [--kind switch|nic|fabric]

Accepted configs run for a moment (switch_emu / nic_emu: --duration-ms; fabric_emu: a short
--duration), so that what the loader lets through is also what the program can build.
"""
import argparse
import copy
import os
import random
import re
import subprocess
import sys
import tempfile

import yaml

HUGE = 10**30
SCALAR_MUTATIONS = ["x", -1, 0, HUGE, 2**64, "", None, [], {}, True, 0.5, "1e400", "0x"]


def paths(node, prefix=()):
    """Every (path, value) in the tree, maps and lists included."""
    yield prefix, node
    if isinstance(node, dict):
        for k, v in node.items():
            yield from paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from paths(v, prefix + (i,))


def get(tree, path):
    for p in path:
        tree = tree[p]
    return tree


def put(tree, path, value):
    if not path:
        return value
    get(tree, path[:-1])[path[-1]] = value
    return tree


def mutations(base, rng, count):
    """`count` (description, tree) pairs, each one mutation of `base`."""
    places = [(p, v) for p, v in paths(base)]
    out = []
    while len(out) < count:
        path, value = rng.choice(places)
        tree = copy.deepcopy(base)
        where = ".".join(str(p) for p in path) or "(top)"
        if isinstance(value, dict):
            choice = rng.randrange(3)
            if choice == 0 or not value:
                get(tree, path)["bogus_key"] = 1
                what = f"{where}: unknown key"
            elif choice == 1:
                key = rng.choice(list(value))
                del get(tree, path)[key]
                what = f"{where}: without {key}"
            else:
                tree = put(tree, path, rng.choice(["x", 7, []]))
                what = f"{where}: map replaced by a scalar or list"
        elif isinstance(value, list):
            choice = rng.randrange(4)
            if choice == 0 or not value:
                tree = put(tree, path, [])
                what = f"{where}: empty list"
            elif choice == 1:
                get(tree, path).insert(0, copy.deepcopy(value[0]))
                what = f"{where}: first element doubled"
            elif choice == 2:
                tree = put(tree, path, [copy.deepcopy(value[0]) for _ in range(5000)])
                what = f"{where}: first element x5000"
            else:
                tree = put(tree, path, {"a": 1})
                what = f"{where}: list replaced by a map"
        else:
            if not path:
                continue
            m = rng.choice(SCALAR_MUTATIONS)
            tree = put(tree, path, m)
            what = f"{where}: {value!r} -> {m!r}"
        out.append((what, tree))
    return out


def fixed_cases(kind, base):
    """(description, tree, expected stderr ending) for mistakes a random draw rarely makes."""
    cases = []
    if kind == "switch" and len(base.get("ports", [])) >= 2:
        t = copy.deepcopy(base)
        t["ports"][1]["device"] = t["ports"][0]["device"]
        cases.append(("two ports on one device", t,
                      f'ports[1].device: "{t["ports"][0]["device"]}" is already port '
                      f'"{t["ports"][0]["name"]}"\'s device'))
    if kind == "nic" and len(base["nic"].get("uplinks", [])) >= 2:
        t = copy.deepcopy(base)
        up = t["nic"]["uplinks"]
        up[1]["device"] = up[0]["device"]
        cases.append(("two uplinks on one device", t,
                      f'nic.uplinks[1].device: "{up[0]["device"]}" is already port '
                      f'"{up[0]["name"]}"\'s device'))
    return cases


def run_one(program, kind, config_path, prefix):
    if kind == "fabric":
        # Long enough for the example's event at 200 us: an event past the end is refused.
        cmd = [program, "--config", config_path, "--duration", "250us", "--seeds", "1",
               "--quiet"]
    else:
        cmd = [program, "--no-huge", "-m", "512", "--no-pci", "--file-prefix", prefix,
               "--log-level", "*:error", "--", "--config", config_path, "--duration-ms", "30",
               "--log-level", "error"]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return None, "", "timeout"
    return r.returncode, r.stdout, r.stderr


def check(kind, prog_name, config_path, rc, stderr):
    """None if the outcome is acceptable, else why not."""
    if rc is None:
        return "hung (60 s)"
    if rc < 0 or rc >= 128:
        return f"crashed (status {rc})"
    if "terminate called" in stderr or "Segmentation" in stderr or "Aborted" in stderr:
        return "uncaught exception or abort"
    if rc == 0:
        return None
    lines = [l for l in stderr.strip().splitlines() if l.strip()]
    last = lines[-1] if lines else ""
    if rc == 2:
        # A config error names the program, the file and (but for YAML syntax) the key.
        if not last.startswith(f"{prog_name}: {config_path}: "):
            return f"exit 2 without a `{prog_name}: {config_path}: key: reason` line: {last!r}"
        return None
    # Exit 1: the config was valid but the program could not run it (e.g. not enough memory for
    # the pool it asked for): it must say so in one line naming the program.
    if not any(l.startswith(f"{prog_name}: ") for l in lines):
        return f"exit {rc} without a `{prog_name}: ...` error line: {last!r}"
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--program", required=True)
    ap.add_argument("--config", required=True)
    ap.add_argument("--kind", choices=["switch", "nic", "fabric"], required=True)
    ap.add_argument("--count", type=int, default=60)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--show", action="store_true",
                    help="print every outcome's mutation and last stderr line")
    args = ap.parse_args()
    args.program = os.path.abspath(args.program)

    with open(args.config) as f:
        base = yaml.safe_load(f)
    rng = random.Random(args.seed)
    prog_name = os.path.basename(args.program)
    failures = []
    outcomes = {"refused": 0, "accepted": 0, "could not run": 0}
    with tempfile.TemporaryDirectory() as tmp:
        cwd = os.getcwd()
        os.chdir(tmp)  # relative pcap paths and out/ land here
        os.makedirs("out", exist_ok=True)

        def attempt(tag, tree):
            """Writes `tree` as config `tag` and runs the program on it: (path, rc, stderr)."""
            path = os.path.join(tmp, f"{tag}.yaml")
            with open(path, "w") as f:
                yaml.safe_dump(tree, f, default_flow_style=None, sort_keys=False)
            rc, _, err = run_one(args.program, args.kind, path, f"cfgmut{os.getpid()}_{tag}")
            return path, rc, err

        try:
            for j, (what, tree, expected) in enumerate(fixed_cases(args.kind, base)):
                _, rc, err = attempt(f"fixed{j}", tree)
                if rc != 2 or not err.strip().endswith(expected):
                    failures.append(f"{what}: exit {rc}, wanted 2 and `...{expected}`, got "
                                    f"{err.strip()[-300:]!r}")
                    print(f"FAIL {failures[-1]}", file=sys.stderr)
            for i, (what, tree) in enumerate(mutations(base, rng, args.count)):
                path, rc, err = attempt(f"m{i}", tree)
                why = check(args.kind, prog_name, path, rc, err)
                if args.show:
                    tail = (err.strip().splitlines() or [""])[-1]
                    print(f"\n[{rc}] {what}\n    {tail}", file=sys.stderr)
                if why:
                    failures.append(f"{what}: {why}")
                    print(f"FAIL {what}: {why}", file=sys.stderr)
                else:
                    outcomes["refused" if rc == 2 else "accepted" if rc == 0 else
                             "could not run"] += 1
                print(f"\r{i + 1}/{args.count} mutations", end="", file=sys.stderr, flush=True)
        finally:
            os.chdir(cwd)
    print("", file=sys.stderr)
    print(f"{prog_name}: {args.count} mutations of {args.config}: " +
          ", ".join(f"{v} {k}" for k, v in outcomes.items()) + f", {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
