#!/usr/bin/env python3
"""The kill table of the broken clients over LNet (docs/mutants.md, "Broken clients over LNet"):
the suite's model client and each broken client of tests/client_models.py, run as a process
speaking LNet over TCP (tests/lnet_model_client.py) and certified with
`ptlrpc-conformance certify --client CMD --seed S` at each seed.

    python3 tools/client_kill_table.py [--seeds 1 2 3 4] [--out DIR] [--markdown FILE]

A broken client is killed at a seed when its own requirement fails there; it is charged
wrongly when any other requirement fails at any seed.  The correct model client must pass
every case at every seed.  Prints the table (Markdown) and exits 1 when a broken client is
never killed, is charged a requirement not its own, or the model client fails at a seed.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"
sys.path.insert(0, str(TESTS))

import client_models  # noqa: E402

MODEL = f"{sys.executable} {TESTS / 'lnet_model_client.py'} --addr {{addr}} --port {{port}}"


def certify(command: str, seed: int, out: Path) -> dict:
    """One `certify --client` run: its exit status, failing MUST requirements and the first
    failure's message per failed case."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, "-m", "ptlrpc_conformance", "certify", "--client", command,
                           "--seed", str(seed), "--out", str(out), "-q"],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, timeout=900)
    report = json.loads((out / "report.json").read_text()) if (out / "report.json").exists() else None
    if report is None:
        raise SystemExit(f"certify --client {command!r} --seed {seed}: no report (exit {proc.returncode}):\n"
                         + proc.stdout.decode("utf-8", "replace")[-2000:])
    failed = {rid: c["message"].splitlines()[-1] for c in report["cases"] if c["verdict"] == "fail"
              for rid in c.get("failed_requirements", [])}
    return {"rc": proc.returncode, "failing": sorted(report["level"]["failing_must"]), "failed": failed,
            "verdicts": {c["id"]: c["verdict"] for c in report["cases"]}}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4])
    p.add_argument("--out", type=Path, default=None, help="where the runs' reports go (default: a temporary directory)")
    p.add_argument("--markdown", type=Path, default=None, help="also write the table to this file")
    args = p.parse_args(argv)
    out = args.out or Path(tempfile.mkdtemp(prefix="client-kill-"))
    seeds = args.seeds
    span = f"{seeds[0]}-{seeds[-1]}" if seeds == list(range(seeds[0], seeds[-1] + 1)) else ",".join(map(str, seeds))
    bad = []
    model = {s: certify(MODEL, s, out / f"model-{s}") for s in seeds}
    passed = [s for s in seeds if model[s]["rc"] == 0 and set(model[s]["verdicts"].values()) == {"pass"}]
    if len(passed) != len(seeds):
        bad.append(f"the model client fails at seeds {[s for s in seeds if s not in passed]}: "
                   + "; ".join(f"{s}: {model[s]['failed']}" for s in seeds if s not in passed))
    lines = [f"| broken client | requirement | killed at seeds {span} | other requirements failed | "
             f"first failure (lowest killing seed) |", "|---|---|---|---|---|"]
    killed_all = 0
    for cls in client_models.ZOO:
        runs = {s: certify(f"{MODEL} --bug {cls.__name__}", s, out / f"{cls.__name__}-{s}") for s in seeds}
        kills = [s for s in seeds if cls.breaks in runs[s]["failing"]]
        others = sorted({r for s in seeds for r in runs[s]["failing"] if r != cls.breaks})
        first = f"seed {kills[0]}: {runs[kills[0]]['failed'][cls.breaks]}" if kills else "-"
        lines.append(f"| `{cls.__name__}` | {cls.breaks} | {len(kills)}/{len(seeds)} ({', '.join(map(str, kills))}) | "
                     f"{', '.join(others) or 'none'} | {first.replace('|', '/')} |")
        if kills and not others:
            killed_all += 1
        if not kills:
            bad.append(f"{cls.__name__} is never killed")
        if others:
            bad.append(f"{cls.__name__} is charged {others}, not only {cls.breaks}")
    lines += ["", f"Model client: passes every case at {len(passed)}/{len(seeds)} seeds ({span}). "
              f"Score: {killed_all}/{len(client_models.ZOO)} killed, each charged to its own requirement only."]
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if args.markdown:
        args.markdown.write_text(text)
    for b in bad:
        print("FAIL:", b, file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
