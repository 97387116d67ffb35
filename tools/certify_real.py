#!/usr/bin/env python3
"""Certify a real implementation and regenerate its published certification document.

    python3 tools/certify_real.py ktest --ktest /path/to/lustre_tcp_client.py
    python3 tools/certify_real.py ktest-client --ktest /path/to/lustre_tcp_client.py
    python3 tools/certify_real.py lustre --lustre /path/to/lustre-release [--lustre TREE ...]
    python3 tools/certify_real.py lustre --lustre /path/to/lustre-release --profile lustre-2.17.57

`ktest` certifies ktest's user-space Lustre client through examples/ktest-client, `lustre`
Lustre's own unpacking code through examples/lustre-testee (built into OUT/build with
`make sanitize`, so that a read past a message is an AddressSanitizer report in the case's
message).  Each
runs `ptlrpc-conformance certify` from the repository root into --out (default
/tmp/cert-ktest, /tmp/cert-lustre; certify exits 1 when cases fail, which is what the
document is about), then `ptlrpc-conformance certification-doc` with the implementation's
notes file, writing docs/certifications/<name>.md:

    ktest-lustre_tcp_client-<version>.md   notes: ktest-lustre_tcp_client-notes.md
    ktest-lustre_tcp_client-client-<version>.md  notes: ktest-lustre_tcp_client-client-notes.md

(`ktest-client` certifies the same file as a client under test: `certify --client`, its
mount and unmount against the suite's served OST and MGS at seed 1, as root for its
privileged source port.)
    lustre-<version>-pack_generic.md       notes: lustre-<version>-pack_generic-notes.md, else
                                           lustre-pack_generic-notes.md

A Lustre tree is certified under every release's profile in one run (`certify --profile
all`, the release matrix); its document is the run under its own release's profile (the
default profile for a version the suite has no profile for).  With the trees of several
releases, docs/certifications/lustre-release-matrix.md is written too: each release's code
against each release's profile, and which release's behaviour the code follows, difference
by difference.  `--profile NAME` certifies each tree under that one profile instead (into
OUT/treeN); its document is written only when NAME is the tree's own release's profile
(lustre-<version>), and the matrix not at all.

<version> comes from the testee's hello (ktest: the commit of the file, when its sha256 is
the one the shim knows; Lustre: the tree's version).  Nothing of ktest or Lustre is written
into the repository: the build of Lustre's code stays in OUT/build.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import shlex
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
CERTS = ROOT / "docs" / "certifications"
KTEST_SHIM = "examples/ktest-client/ktest_testee.py"
# this interpreter's ptlrpc-conformance (the checkout's, when it is installed editable), not
# whichever is first on PATH
COMMAND = [sys.executable, "-m", "ptlrpc_conformance.cli"]
LUSTRE_DIR = "examples/lustre-testee"


def run(cmd: list[str], env=None, ok=(0,)) -> int:
    print("+ " + " ".join(shlex.quote(c) for c in cmd), file=sys.stderr)
    rc = subprocess.run(cmd, cwd=ROOT, env=env).returncode
    if rc not in ok:
        what = ["ptlrpc-conformance"] + cmd[len(COMMAND):][:1] if cmd[:len(COMMAND)] == COMMAND else cmd[:2]
        raise SystemExit(f"certify_real: {' '.join(what)} exited {rc}")
    return rc


def certify(iut: str, out: str, env=None, extra=()) -> dict:
    # exit 0: every case passed; 1: cases failed (a certification of real code usually has some)
    run(COMMAND + ["certify", "--iut", iut, "--out", out, *extra], env=env, ok=(0, 1))
    try:
        report = json.loads(pathlib.Path(out, "report.json").read_text())
    except (OSError, ValueError) as e:
        raise SystemExit(f"certify_real: {out}/report.json: cannot read: {e}") from None
    if report.get("incomplete"):     # exit 1 is also a run that stopped early: never published
        raise SystemExit(f"certify_real: {out}/report.json: the run is incomplete "
                         f"({report.get('incomplete_reason') or 'interrupted'}); no document written")
    return report


def document(out: str, notes: str, name: str, allow_partial: bool = False) -> pathlib.Path:
    """certification-doc of the run in `out`; `allow_partial`: the run may be partial (a client
    whose workload leaves MUST requirements without evidence: the document says partial)."""
    target = CERTS / name
    run(COMMAND + ["certification-doc", f"{out}/report.json", "--notes",
         str((CERTS / notes).relative_to(ROOT)), *(["--allow-partial"] if allow_partial else []),
         "--out", str(target.relative_to(ROOT))])
    return target


def release_matrix(matrices: list[dict], trees: list[str]) -> str:
    """docs/certifications/lustre-release-matrix.md: each release's own unpacking code (a row)
    judged under each release's profile (a column), from the matrix runs' report.json; then,
    for each code, the differences between releases it follows."""
    matrices = sorted(matrices, key=lambda m: [int(x) for x in m["iut"]["hello"]["version"].split(".")])
    profiles = [r["profile"] for r in matrices[0]["releases"]]
    suite = matrices[0].get("suite") or {}
    out = ["# Lustre's own unpacking code, release by release",
           "",
           f"Each row is one Lustre release's `pack_generic.c` receive path, built from that release's tree by "
           f"[examples/lustre-testee](../../examples/lustre-testee/README.md) (`make sanitize`). Each column is "
           f"one release's profile. Every cell comes from one `certify --profile all` run of that code, with "
           f"ptlrpc-conformance {suite.get('version', '?')} (suite sha256 `{suite.get('sha256', '?')}`), "
           f"seed {matrices[0].get('seed')}. A cell gives the level and the failing MUST requirements.",
           "",
           f"| vectors sha256 | `{(matrices[0].get('sha256') or {}).get('vectors', '?')}` |",
           "|---|---|",
           "",
           "Every release's code fails two requirements under every profile, DEC-ROBUST-1 and HDR-BUFLEN-2. Both "
           "come from the wrap of a rounded buffer length (docs/divergences.md). Lustre accepts such a message and "
           "then reads past its end; the testee's guard page or AddressSanitizer turns that read into a crash. "
           "Every other failing requirement in a cell is a difference between the code's release and the "
           "profile's release. The table after this one explains each such difference.",
           "",
           "| code \\ profile | " + " | ".join(profiles) + " |",
           "|---|" + "---|" * len(profiles)]
    for m in matrices:
        cells = []
        for r in m["releases"]:
            status = (r["level"] or {}).get("status", "?")
            failing = ", ".join(r["failing_requirements"]) or "none"
            cells.append(f"{status}: {failing}")
        out.append(f"| Lustre {m['iut']['hello']['version']} | " + " | ".join(cells) + " |")
    out += ["", "## The differences each release's code follows", "",
            "For each change between neighbouring releases that the suite's cases exercise, the side each "
            "release's code follows is taken from the verdicts of the cases that change touches, under the "
            "profiles of the releases on each side. The change's `what it changes in practice` is from "
            "spec/release_differences.yaml, and docs/releases.md explains each one.", "",
            "| difference | Lustre change | " + " | ".join(f"Lustre {m['iut']['hello']['version']}" for m in matrices)
            + " | in practice |",
            "|---|---|" + "---|" * len(matrices) + "---|"]
    rows: dict[str, dict] = {}
    for m in matrices:
        for d in m["differences"]:
            rows.setdefault(d["id"], {"d": d, "by": {}})["by"][m["iut"]["hello"]["version"]] = d["follows"]
    for did, row in rows.items():
        if all(v == "not exercised" for v in row["by"].values()):
            continue
        d = row["d"]
        cells = [row["by"].get(m["iut"]["hello"]["version"], "") for m in matrices]
        out.append(f"| `{did}` ({d['from']} → {d['to']}): {d['what'].strip()} | {d.get('lu') or ''} | "
                   + " | ".join(cells) + f" | {(d.get('effect') or '').strip()} |")
    out += ["", "A `both` means the cases the difference changes pass under either release's rules, because "
            "their vectors do not exercise the changed field. A `neither` for the jobid is a code that hands "
            "out an unterminated jobid whole (2.12.9's): both plain profiles judge that as the Lustre bug it "
            "is, and only the `-literal` profiles tolerate it. `not exercised` rows are left out.",
            "", "Written by `python3 tools/certify_real.py lustre` with the trees "
            + ", ".join(f"`{pathlib.Path(t).name}`" for t in trees) + " (see examples/lustre-testee/README.md)."]
    return "\n".join(out) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="what", required=True)
    k = sub.add_parser("ktest", help="ktest's tools/lustre_tcp_client.py")
    k.add_argument("--ktest", required=True, help="path to ktest's tools/lustre_tcp_client.py")
    k.add_argument("--out", default="/tmp/cert-ktest")
    kc = sub.add_parser("ktest-client", help="ktest's tools/lustre_tcp_client.py as a client under test")
    kc.add_argument("--ktest", required=True, help="path to ktest's tools/lustre_tcp_client.py")
    kc.add_argument("--out", default="/tmp/cert-ktest-client")
    lu = sub.add_parser("lustre", help="Lustre's pack_generic.c unpacking, from lustre-release trees")
    lu.add_argument("--lustre", required=True, action="append", help="a lustre-release tree (repeatable)")
    lu.add_argument("--out", default="/tmp/cert-lustre")
    lu.add_argument("--profile", help="certify under this one profile (default: all, the release matrix)")
    args = ap.parse_args(argv)
    if args.what == "ktest-client":
        if not os.path.isfile(args.ktest):
            ap.error(f"--ktest {args.ktest}: no such file")
        import hashlib
        import importlib.util
        spec = importlib.util.spec_from_file_location("ktest_testee", ROOT / KTEST_SHIM)
        shim = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(shim)            # its known files: the commit of each sha256
        digest = hashlib.sha256(pathlib.Path(args.ktest).read_bytes()).hexdigest()
        version = shim.KNOWN_SHA256.get(digest, "unpinned")
        command = (f"python3 {os.path.abspath(args.ktest)} --server {{addr}} --port {{port}} "
                   "--fsname lustre --timeout 2")
        certify(f"client:{command}", args.out, extra=["--seed", "1", "--area", "client"])
        doc = document(args.out, "ktest-lustre_tcp_client-client-notes.md",
                       f"ktest-lustre_tcp_client-client-{version}.md", allow_partial=True)
    elif args.what == "ktest":
        if not os.path.isfile(args.ktest):
            ap.error(f"--ktest {args.ktest}: no such file")
        env = dict(os.environ, KTEST_LUSTRE_CLIENT=os.path.abspath(args.ktest))
        report = certify(f"exec:python3 {KTEST_SHIM}", args.out, env)
        version = report["iut"]["hello"]["version"]
        doc = document(args.out, "ktest-lustre_tcp_client-notes.md", f"ktest-lustre_tcp_client-{version}.md")
    else:
        matrices = []
        for i, tree in enumerate(args.lustre):
            out = os.path.join(args.out, f"tree{i}")
            build = os.path.join(out, "build")
            if not os.path.isfile(os.path.join(tree, "lustre/ptlrpc/pack_generic.c")):
                ap.error(f"--lustre {tree}: no lustre/ptlrpc/pack_generic.c")
            run(["make", "-C", LUSTRE_DIR, f"LUSTRE={os.path.abspath(tree)}", f"BUILD={build}", "sanitize"])
            if args.profile:
                report = certify(f"exec:{build}/lustre-testee-san", out, extra=["--profile", args.profile])
                version = report["iut"]["hello"]["version"]
                doc = pathlib.Path(out, "report.json")
                if args.profile == f"lustre-{version}":
                    notes = f"lustre-{version}-pack_generic-notes.md"
                    if not (CERTS / notes).is_file():
                        notes = "lustre-pack_generic-notes.md"
                    doc = document(out, notes, f"lustre-{version}-pack_generic.md")
                print(f"certify_real: Lustre {version} under {args.profile}: {doc}", file=sys.stderr)
                continue
            matrix = certify(f"exec:{build}/lustre-testee-san", out, extra=["--profile", "all"])
            version = matrix["iut"]["hello"]["version"]
            own = next((r for r in matrix["releases"] if r["release"] == version), None) or \
                next(r for r in matrix["releases"] if r["profile"] == matrix["base"])
            notes = f"lustre-{version}-pack_generic-notes.md"
            if not (CERTS / notes).is_file():
                notes = "lustre-pack_generic-notes.md"
            doc = document(os.path.join(out, own["profile"]), notes, f"lustre-{version}-pack_generic.md")
            print(f"certify_real: {doc.relative_to(ROOT)} written", file=sys.stderr)
            matrices.append(matrix)
        if args.profile:
            return 0
        if len(matrices) > 1:
            doc = CERTS / "lustre-release-matrix.md"
            doc.write_text(release_matrix(matrices, args.lustre), encoding="utf-8")
    print(f"certify_real: {doc.relative_to(ROOT)} written", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
