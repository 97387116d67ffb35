#!/usr/bin/env python3
"""Certify a real implementation and regenerate its published certification document.

    python3 tools/certify_real.py ktest --ktest /path/to/lustre_tcp_client.py
    python3 tools/certify_real.py lustre --lustre /path/to/lustre-release [--profile lustre-2.15.8]

`ktest` certifies ktest's user-space Lustre client through examples/ktest-client, `lustre`
Lustre's own unpacking code through examples/lustre-testee (built into OUT/build with
`make sanitize`, so that a read past a message is an AddressSanitizer report in the case's
message); the tree may be of any release the testee builds from (2.12.9, 2.15.8, 2.16.1,
2.17.0, 2.17.57), whose version is read from its LUSTRE-VERSION-GEN.  Each
runs `ptlrpc-conformance certify` from the repository root into --out (default
/tmp/cert-ktest, /tmp/cert-lustre; certify exits 1 when cases fail, which is what the
document is about; --profile NAME is handed to it, else it follows the suite's default
profile), then `ptlrpc-conformance certification-doc` with the implementation's
notes file, writing docs/certifications/<name>.md:

    ktest-lustre_tcp_client-<version>.md   notes: ktest-lustre_tcp_client-notes.md
    lustre-<version>-pack_generic.md       notes: lustre-pack_generic-notes.md

<version> comes from the testee's hello (ktest: the commit of the file, when its sha256 is
the one the shim knows; Lustre: the tree's version).  Nothing of ktest or Lustre is written
into the repository: the build of Lustre's code stays in OUT/build.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import re
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


def certify(iut: str, out: str, env=None, profile: str | None = None) -> dict:
    # exit 0: every case passed; 1: cases failed (a certification of real code usually has some)
    run(COMMAND + ["certify", "--iut", iut, "--out", out] + (["--profile", profile] if profile else []),
        env=env, ok=(0, 1))
    try:
        return json.loads(pathlib.Path(out, "report.json").read_text())
    except (OSError, ValueError) as e:
        raise SystemExit(f"certify_real: {out}/report.json: cannot read: {e}") from None


def document(out: str, notes: str, name: str) -> pathlib.Path:
    target = CERTS / name
    run(COMMAND + ["certification-doc", f"{out}/report.json", "--notes",
         str((CERTS / notes).relative_to(ROOT)), "--out", str(target.relative_to(ROOT))])
    return target


def lustre_release(tree: str) -> str:
    """The release of a lustre-release tree: DEFAULT_VERSION in its LUSTRE-VERSION-GEN."""
    gen = pathlib.Path(tree, "LUSTRE-VERSION-GEN")
    try:
        m = re.search(r"^DEFAULT_VERSION=(\S+)", gen.read_text(errors="replace"), re.M)
    except OSError as e:
        raise SystemExit(f"certify_real: {gen}: cannot read: {e.strerror or e}") from None
    if not m:
        raise SystemExit(f"certify_real: {gen}: no DEFAULT_VERSION")
    return m.group(1)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="what", required=True)
    k = sub.add_parser("ktest", help="ktest's tools/lustre_tcp_client.py")
    k.add_argument("--ktest", required=True, help="path to ktest's tools/lustre_tcp_client.py")
    k.add_argument("--out", default="/tmp/cert-ktest")
    lu = sub.add_parser("lustre", help="Lustre's pack_generic.c unpacking, from a lustre-release tree")
    lu.add_argument("--lustre", required=True, help="a lustre-release tree")
    lu.add_argument("--out", default="/tmp/cert-lustre")
    lu.add_argument("--profile", help="the profile the verdicts follow (default: the suite's default)")
    args = ap.parse_args(argv)
    if args.what == "ktest":
        if not os.path.isfile(args.ktest):
            ap.error(f"--ktest {args.ktest}: no such file")
        env = dict(os.environ, KTEST_LUSTRE_CLIENT=os.path.abspath(args.ktest))
        report = certify(f"exec:python3 {KTEST_SHIM}", args.out, env)
        version = report["iut"]["hello"]["version"]
        doc = document(args.out, "ktest-lustre_tcp_client-notes.md", f"ktest-lustre_tcp_client-{version}.md")
    else:
        if not os.path.isfile(os.path.join(args.lustre, "lustre/ptlrpc/pack_generic.c")):
            ap.error(f"--lustre {args.lustre}: no lustre/ptlrpc/pack_generic.c")
        release = lustre_release(args.lustre)
        if args.profile and not args.profile.startswith(f"lustre-{release}"):
            print(f"certify_real: warning: the tree is Lustre {release}, the profile {args.profile}", file=sys.stderr)
        print(f"certify_real: Lustre {release}, profile {args.profile or '(the default)'}", file=sys.stderr)
        build = os.path.join(args.out, "build")
        run(["make", "-C", LUSTRE_DIR, f"LUSTRE={os.path.abspath(args.lustre)}", f"BUILD={build}", "sanitize"])
        report = certify(f"exec:{build}/lustre-testee-san", args.out, profile=args.profile)
        version = report["iut"]["hello"]["version"]
        doc = document(args.out, "lustre-pack_generic-notes.md", f"lustre-{version}-pack_generic.md")
    print(f"certify_real: {doc.relative_to(ROOT)} written", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
