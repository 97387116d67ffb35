#!/usr/bin/env python3
"""Known-bug recall: does the suite tell Lustre's code before a wire fix from the code after it?

    python3 tools/recall.py --lustre-git DIR --out DIR [--corpus FILE] [--id LU-N ...] [--doc FILE]

For each entry of the corpus (tools/recall_corpus.yaml, or --corpus FILE):

- `kind: build` (code examples/lustre-testee compiles): the tree at the fix's parent and at
  the fix is read file by file from the lustre-release git directory (`git archive` fails on
  some mirrors) - only the folders the testee's build reads, taken from the paths
  examples/lustre-testee/extract.py names - into OUT/src/COMMIT; the testee is built from each
  (`make RELEASE=R`, the guard-page build reading structures with the layout table of the
  profile's release R, into OUT/build/COMMIT-R) and certified under the entry's profile, with only
  the cases of the entry's requirements (`certify --profile P --requirement R ...`).  When the
  code the testee extracted is the same at both commits, the two builds are the same program
  and nothing is certified: the fix changed code the testee does not compile.
- `kind: target` (server code): the independent OST of tests/independent_ost.py is certified
  as the code after the fix, and its mutant that behaves as the code before it as the parent.
  The mutant of an entry is the factory `before_<id>` of that module (LU-12605:
  `before_lu_12605`); an entry without one is a miss, with that reason.

The suite tells the two apart when a case fails on the parent and not on the fix; the
requirements those cases failed on the parent (and not on the fix) are what it charged.  An
entry is caught when it was told apart and every requirement the corpus expects was charged.

Writes OUT/summary.json (`entries`: id, fix, parent, kind, profile, selection, told_apart,
charged, expected, missing, caught, reason, cases) and the document (--doc, default
docs/certifications/recall.md): a table and the recall figure, caught / total, by kind.  A
miss's reason is the tool's own finding (the build failed, the code the testee compiles is
the same at both commits, no case of the selection applies to the IUT, no mutant) followed by
the one tools/recall_reasons.yaml gives for its id, if any.  A documented reason states the
finding it explains (told apart or not, what was charged) and may name functions the testee
does not compile; a reason for an entry the run caught, a finding other than the run's, or a
named function that a build of the entry compiles is refused (exit 2, the document is not
written).  With --id, --merge SUMMARY keeps a previous run's results for the other entries.
Exit status: 0 the run finished (misses included); 2 bad input (the corpus, the reasons, the
git directory).  Builds and certifications are reused from OUT on a second run.
"""
from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys

import yaml

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
from certify_real import COMMAND, LUSTRE_DIR  # noqa: E402  (the same certify and testee as certify_real)

CORPUS = ROOT / "tools" / "recall_corpus.yaml"
REASONS = ROOT / "tools" / "recall_reasons.yaml"
DOC = ROOT / "docs" / "certifications" / "recall.md"
FIELDS = ("id", "fix", "parent", "profile", "requirements", "what", "kind")
KINDS = ("build", "target")
OST_MODULE = "independent_ost"          # tests/independent_ost.py
HASH = re.compile(r"[0-9a-f]{7,40}")
LU_ID = re.compile(r"LU-[0-9]+")
# the verdicts of a case that did not fail (certify's report.json spells them so): a case not
# applicable to the parent did not run there, so it tells nothing apart
NOT_FAILED = ("pass", "skipped", "not-applicable")


class CorpusError(Exception):
    pass


# ---- the corpus ------------------------------------------------------------------------------

def load_corpus(path: pathlib.Path) -> list:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise CorpusError(f"{path}: cannot read: {e.strerror or e}") from None
    except yaml.YAMLError as e:
        raise CorpusError(f"{path}: not YAML: {e}") from None
    if not isinstance(data, list) or not data:
        raise CorpusError(f"{path}: expected a non-empty list of entries")
    return data


def git_has(git: str, commit: str) -> bool:
    proc = subprocess.run(["git", f"--git-dir={git}", "cat-file", "-e", f"{commit}^{{commit}}"],
                          capture_output=True, timeout=60)
    return proc.returncode == 0


def git_full(git: str, commit: str) -> str:
    proc = subprocess.run(["git", f"--git-dir={git}", "rev-parse", "--verify", f"{commit}^{{commit}}"],
                          capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        raise CorpusError(f"{git}: no commit {commit}")
    return proc.stdout.strip()


def git_parent(git: str, commit: str) -> str | None:
    proc = subprocess.run(["git", f"--git-dir={git}", "rev-parse", f"{commit}^"], capture_output=True, text=True,
                          timeout=60)
    return proc.stdout.strip() if proc.returncode == 0 else None


def first_release(git: str, commit: str) -> str | None:
    """The oldest release with a profile whose tag contains the commit (None: none does)."""
    from ptlrpc_conformance.harness.data import registry
    for rid in registry.releases():
        proc = subprocess.run(["git", f"--git-dir={git}", "merge-base", "--is-ancestor", commit,
                               registry.release(rid).tag], capture_output=True, timeout=120)
        if proc.returncode == 0:
            return rid
    return None


def corpus_errors(entries: list, where: str, git: str | None = None) -> list[str]:
    """Every problem of the corpus, each naming the file, the entry and the field: the exact
    field set, the kinds, a known profile, requirement ids that exist and belong to that
    profile, hashes that look like hashes - and, with the git directory, that both commits
    exist there and that `parent` is the fix's first parent."""
    from ptlrpc_conformance.harness.data import registry
    profiles = registry.profiles()[1]
    reqs = registry.requirements()
    errors, seen = [], set()
    for i, e in enumerate(entries):
        at = f"{where}: entry {i}" + (f" ({e.get('id')})" if isinstance(e, dict) and e.get("id") else "")
        if not isinstance(e, dict):
            errors.append(f"{at}: not a mapping")
            continue
        if set(e) != set(FIELDS):
            extra, lack = sorted(set(e) - set(FIELDS)), [f for f in FIELDS if f not in e]
            errors.append(f"{at}: fields must be exactly {', '.join(FIELDS)}"
                          + (f"; unknown: {', '.join(map(str, extra))}" if extra else "")
                          + (f"; missing: {', '.join(lack)}" if lack else ""))
            continue
        if not isinstance(e["id"], str) or not LU_ID.fullmatch(e["id"]):
            errors.append(f"{at}: id: {e['id']!r} is not a Lustre ticket like LU-12590")
        for f in ("fix", "parent"):
            if not isinstance(e[f], str) or not HASH.fullmatch(e[f]):
                errors.append(f"{at}: {f}: {e[f]!r} is not a commit hash: 7 to 40 lower-case hex digits, quoted")
        if (e["id"], e["fix"]) in seen:
            errors.append(f"{at}: the entry {e['id']} {e['fix']} is listed twice")
        seen.add((e["id"], e["fix"]))
        if e["kind"] not in KINDS:
            errors.append(f"{at}: kind: {e['kind']!r} is not one of {', '.join(KINDS)}")
        if e["profile"] not in profiles:
            errors.append(f"{at}: profile: unknown profile {e['profile']!r}")
        if not isinstance(e["what"], str) or not e["what"].strip():
            errors.append(f"{at}: what: one sentence saying what the bug was")
        rs = e["requirements"]
        if not isinstance(rs, list) or not rs or not all(isinstance(r, str) for r in rs):
            errors.append(f"{at}: requirements: a non-empty list of requirement ids")
            continue
        for r in rs:
            if r not in reqs:
                errors.append(f"{at}: requirements: unknown requirement {r!r}")
            elif e["profile"] in profiles and not reqs[r].in_profile(e["profile"]):
                errors.append(f"{at}: requirements: {r} does not belong to profile {e['profile']}")
        if git and all(isinstance(e[f], str) and HASH.fullmatch(e[f]) for f in ("fix", "parent")):
            for f in ("fix", "parent"):
                if not git_has(git, e[f]):
                    errors.append(f"{at}: {f}: no commit {e[f]} in {git}")
            parent = git_parent(git, e["fix"]) if git_has(git, e["fix"]) else None
            if parent and not parent.startswith(e["parent"]):
                errors.append(f"{at}: parent: {e['parent']} is not the first parent of {e['fix']} ({parent[:10]})")
            own = first_release(git, e["fix"]) if parent else None
            if own and e["profile"] in profiles and profiles[e["profile"]].release != own:
                errors.append(f"{at}: profile: {e['profile']} is not the profile of the code: the first release "
                              f"with a profile that contains {e['fix']} is {own}")
    return errors


REASON_FIELDS = ("told_apart", "charged", "not_compiled", "reason")


def load_reasons(path: pathlib.Path) -> dict:
    """{id: {told_apart, charged, not_compiled, reason}}: each documented reason states the
    finding it explains (whether the suite told the entry's fix from its parent, and what
    was charged) and the functions it says the testee does not compile; the tool holds both
    to every run (reason_errors), so a reason cannot outlive what it explains."""
    if not path.is_file():
        return {}
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as e:
        raise CorpusError(f"{path}: not YAML: {e}") from None
    if not isinstance(data, dict):
        raise CorpusError(f"{path}: expected a mapping of LU id to its reason")
    for key, r in data.items():
        at = f"{path}: {key}"
        if not isinstance(key, str) or not LU_ID.fullmatch(key):
            raise CorpusError(f"{at}: not a Lustre ticket like LU-12590")
        if not isinstance(r, dict) or set(r) - set(REASON_FIELDS) or not {"told_apart", "charged", "reason"} <= set(r):
            raise CorpusError(f"{at}: expected the fields told_apart, charged, reason (and not_compiled: a list "
                              f"of functions), got {sorted(r) if isinstance(r, dict) else type(r).__name__}")
        if not isinstance(r["told_apart"], bool):
            raise CorpusError(f"{at}: told_apart: true or false (the finding the reason explains)")
        for f in ("charged", "not_compiled"):
            if not isinstance(r.get(f, []), list) or not all(isinstance(x, str) for x in r.get(f, [])):
                raise CorpusError(f"{at}: {f}: a list of names")
        if not isinstance(r["reason"], str) or not r["reason"].strip():
            raise CorpusError(f"{at}: reason: the sentence(s) saying why the suite misses it")
    return data


def defines(code: str, function: str) -> bool:
    """Whether C source `code` defines `function` (a definition, not a call or a prototype)."""
    return re.search(rf"^[\w \t*]*\b{re.escape(function)}\s*\([^;{{}}]*\)\s*\{{", code, re.M) is not None


def reason_errors(row: dict, documented: dict | None, where: str) -> list[str]:
    """How the documented reason of `row`'s id contradicts the run's own finding: a reason
    for an entry the suite caught, a finding (told apart, charged) other than the run's, a
    function said not to be compiled that a build of the entry compiles."""
    if documented is None:
        return []
    at = f"{where}: {row['id']} (fix {row['fix'][:10]})"
    if row["caught"]:
        return [f"{at}: documents a reason for an entry the suite caught: remove it"]
    errors = []
    found = {"told_apart": row["told_apart"], "charged": sorted(row["charged"])}
    stated = {"told_apart": documented["told_apart"], "charged": sorted(documented["charged"])}
    if found != stated:
        errors.append(f"{at}: the reason explains told_apart={stated['told_apart']}, charged "
                      f"{stated['charged'] or 'nothing'}; the run found told_apart={found['told_apart']}, charged "
                      f"{found['charged'] or 'nothing'}: re-read the miss and rewrite the reason")
    for side, into in (row.get("builds") or {}).items():
        extracted = pathlib.Path(into) / "lustre_extract.c"
        if not extracted.is_file():          # a kept result whose build is gone: checked when it ran
            continue
        code = extracted.read_text(encoding="utf-8", errors="replace")
        for fn in documented.get("not_compiled") or []:
            if defines(code, fn):
                errors.append(f"{at}: not_compiled: the testee built from the {side} compiles {fn}")
    return errors


# ---- the trees -------------------------------------------------------------------------------

def build_folders() -> list[str]:
    """The folders of a lustre-release tree the testee's build reads: every folder holding a
    path examples/lustre-testee/extract.py names (its module-level string constants that are
    tree paths), and those folders themselves, plus the top-level version files.  Read from
    extract.py's source, so a file the extraction comes to need is taken along."""
    tree = ast.parse((ROOT / LUSTRE_DIR / "extract.py").read_text(encoding="utf-8"))
    paths = set()
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            for c in ast.walk(node.value):
                if isinstance(c, ast.Constant) and isinstance(c.value, str) \
                        and re.fullmatch(r"(lustre|lnet|include|libcfs)/[\w./-]+", c.value):
                    paths.add(c.value)
    folders = {p.rsplit("/", 1)[0] if re.search(r"\.[ch]$", p) else p for p in paths}
    return sorted(f for f in folders if not any(f.startswith(g + "/") for g in folders))


def version_name(git: str, commit: str) -> str:
    proc = subprocess.run(["git", f"--git-dir={git}", "describe", "--tags", "--match", "v[0-9]*", "--abbrev=10", commit],
                          capture_output=True, text=True, timeout=60)
    name = proc.stdout.strip() if proc.returncode == 0 else commit[:10]
    # v2_12_58-21-g268edb13d7 -> 2.12.58_21_g268edb13d7 (as extract.py turns git describe)
    m = re.fullmatch(r"v(\d+)_(\d+)_(\d+)(.*)", name)
    return (f"{m[1]}.{m[2]}.{m[3]}" + m[4].replace("-", "_")) if m else name


def extract_tree(git: str, commit: str, dest: pathlib.Path, folders: list[str]) -> None:
    """Write the files of `folders` at `commit` under dest, one blob at a time (git cat-file),
    and LUSTRE-VERSION-FILE naming the commit."""
    if (dest / ".complete").is_file():
        return
    if dest.exists():
        shutil.rmtree(dest)
    listing = subprocess.run(["git", f"--git-dir={git}", "ls-tree", "-r", "-z", commit, "--", *folders],
                             capture_output=True, timeout=300)
    if listing.returncode != 0:
        raise CorpusError(f"{git}: git ls-tree {commit}: {listing.stderr.decode(errors='replace').strip()}")
    blobs = []
    for item in listing.stdout.split(b"\0"):
        if not item:
            continue
        meta, path = item.split(b"\t", 1)
        mode, kind, sha = meta.split()
        if kind == b"blob" and mode != b"120000":
            blobs.append((sha.decode(), path.decode()))
    proc = subprocess.run(["git", f"--git-dir={git}", "cat-file", "--batch"],
                          input="".join(f"{sha}\n" for sha, _ in blobs).encode(), capture_output=True, timeout=600)
    if proc.returncode != 0:
        raise CorpusError(f"{git}: git cat-file {commit}: {proc.stderr.decode(errors='replace').strip()}")
    out, pos = proc.stdout, 0
    for sha, path in blobs:
        header_end = out.index(b"\n", pos)
        size = int(out[pos:header_end].split()[2])
        body = out[header_end + 1:header_end + 1 + size]
        pos = header_end + 1 + size + 1
        target = dest / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(body)
    (dest / "LUSTRE-VERSION-FILE").write_text(f"LUSTRE_VERSION = {version_name(git, commit)}\n")
    (dest / ".complete").write_text(commit + "\n")


def build(src: pathlib.Path, into: pathlib.Path, release: str) -> str | None:
    """Build the testee from src into `into` (`make`: messages against a guard page, so a read
    or write past a message faults; not the sanitize build, whose every crash costs seconds of
    AddressSanitizer report and the wrap of a rounded buffer length crashes every release
    dozens of times), its structures read with the layout table of `release` (`RELEASE=`:
    the release of the profile it is certified under, whose fields the cases expect; a
    structure whose sizeof in the tree differs from that table is declined by the testee);
    None, or why it could not be built.  make rebuilds only what changed."""
    proc = subprocess.run(["make", "-C", LUSTRE_DIR, f"LUSTRE={src}", f"BUILD={into}", f"RELEASE={release}"], cwd=ROOT,
                          capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        lines = [ln for ln in (proc.stderr or proc.stdout).splitlines() if ln.strip()]
        return "the testee does not build from this tree: " + (" / ".join(lines[-3:]) or f"make exited {proc.returncode}")
    return None


UAPI_FOLDERS = ("include/uapi", "lustre/include/uapi", "lnet/include/uapi")   # what main.c includes whole


def compiled_code(src: pathlib.Path, into: pathlib.Path) -> str:
    """What the testee compiles from the tree: the code extract.py copied (without the lines
    naming the tree, its version and its files' hashes), the compat header, and every uapi
    header (included whole).  Equal at two commits: the same program."""
    text = (into / "lustre_extract.c").read_text(encoding="utf-8", errors="replace")
    # (#line directives name where each function starts in the tree: a fix elsewhere in the
    # file moves them without changing the code)
    parts = ["\n".join(ln for ln in text.splitlines() if not re.match(r" \*   (tree|version|sha256)|#line ", ln)
                       and "LUSTRE_EXTRACT_" not in ln),
             (into / "lustre_compat.h").read_text(encoding="utf-8")]
    for folder in UAPI_FOLDERS:
        for path in sorted((src / folder).rglob("*")):
            if path.is_file():
                parts.append(f"{path.relative_to(src)}\n{path.read_text(encoding='utf-8', errors='replace')}")
    return "\n".join(parts)


# ---- certifying and comparing ----------------------------------------------------------------

def certify(iut: str, out: pathlib.Path, profile: str, requirements: list[str], code: pathlib.Path,
            env=None) -> dict:
    """report.json of one certification with the cases of `requirements`: reused when OUT holds
    it for the same command, suite (code and data) and IUT code (the file `code`)."""
    from ptlrpc_conformance.harness.outputs.report import suite_identity
    report = out / "report.json"
    argv = ["certify", "--iut", iut, "--out", str(out), "--profile", profile, "-q"]
    for r in requirements:
        argv += ["--requirement", r]
    identity = {"argv": argv, "suite": suite_identity(), "iut": hashlib.sha256(code.read_bytes()).hexdigest()}
    stamp = out / "recall-command.json"
    if report.is_file() and stamp.is_file() and json.loads(stamp.read_text()) == identity:
        return json.loads(report.read_text())
    print("recall: ptlrpc-conformance " + " ".join(argv), file=sys.stderr)
    proc = subprocess.run(COMMAND + argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=3600)
    try:
        data = json.loads(report.read_text())
    except (OSError, ValueError):
        raise CorpusError(f"certify --iut {iut} exited {proc.returncode} without a report: "
                          f"{(proc.stderr or proc.stdout).strip()[-500:]}") from None
    if proc.returncode not in (0, 1, 5):
        raise CorpusError(f"certify --iut {iut} exited {proc.returncode}: {(proc.stderr or '').strip()[-500:]}")
    stamp.write_text(json.dumps(identity))
    return data


def failures(report: dict) -> dict[str, set]:
    """case id -> the requirements it failed, for every case that failed: those the report
    names, else (a verdict that names none) every requirement the case tests, so that a case
    whose verdict differs always charges a requirement."""
    return {c["id"]: set(c.get("failed_requirements") or c.get("requirements") or []) for c in report["cases"]
            if c["verdict"] not in NOT_FAILED}


def compare(parent: dict, fix: dict) -> tuple[dict[str, list], list[str]]:
    """(the parent's extra failures: case id -> the requirements charged by it, every
    requirement charged): cases failing on the parent that pass on the fix, or that fail on
    the parent a requirement they do not fail on the fix."""
    before, after = failures(parent), failures(fix)
    extra = {}
    for case, reqs in before.items():
        if case not in after:
            extra[case] = sorted(reqs)
        elif reqs - after[case]:
            extra[case] = sorted(reqs - after[case])
    return extra, sorted({r for rs in extra.values() for r in rs})


def not_applied(report: dict) -> str | None:
    """Why no case of the selection applied to the IUT (certify's level "not certified"), or
    None when cases ran."""
    if any(c["verdict"] != "not-applicable" for c in report["cases"]):
        return None
    hello = report["iut"].get("hello") or {}
    why = next((c["message"] for c in report["cases"] if c.get("message")), "")
    return (f"no case of the selection applies to the IUT (its hello declares "
            f"{', '.join(hello.get('capabilities') or []) or 'no capability'}"
            + (f"; the cases say: {why}" if why else "") + "): not certified")


def mutant_name(entry_id: str) -> str:
    return "before_" + entry_id.lower().replace("-", "_")


def has_mutant(name: str) -> bool:
    sys.path.insert(0, str(ROOT / "tests"))
    try:
        import importlib
        return callable(getattr(importlib.import_module(OST_MODULE), name, None))
    finally:
        sys.path.remove(str(ROOT / "tests"))


def judge(entry: dict, git: str, out: pathlib.Path, folders: list[str]) -> dict:
    """One entry's result: the summary row."""
    row = {"id": entry["id"], "fix": entry["fix"], "parent": entry["parent"], "kind": entry["kind"],
           "profile": entry["profile"], "what": " ".join(entry["what"].split()),
           "selection": [f"--requirement {r}" for r in entry["requirements"]],
           "expected": sorted(entry["requirements"]), "told_apart": False, "charged": [], "cases": {},
           "reason": None}
    tag = f"{entry['id']}-{entry['fix'][:10]}"
    if entry["kind"] == "target":
        name = mutant_name(entry["id"])
        row["iuts"] = {"parent": f"python:{OST_MODULE}:{name}", "fix": f"python:{OST_MODULE}:testee"}
        if not has_mutant(name):
            row["reason"] = (f"no mutant of the independent OST behaves as the code before the fix yet "
                             f"(tests/{OST_MODULE}.py has no {name}())")
        else:
            env = dict(os.environ, PYTHONPATH=os.pathsep.join(
                [str(ROOT / "tests"), str(ROOT)] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
            reports = {side: certify(row["iuts"][side], out / "cert" / tag / side, entry["profile"],
                                     entry["requirements"], ROOT / "tests" / f"{OST_MODULE}.py", env)
                       for side in ("parent", "fix")}
            row["cases"], row["charged"] = compare(reports["parent"], reports["fix"])
            row["reason"] = not_applied(reports["parent"])
            row["suite"] = {k: reports["fix"][k] for k in ("suite", "seed")}
    else:
        bins = {}
        from ptlrpc_conformance.harness.data import registry
        release = registry.profiles()[1][entry["profile"]].release
        for side in ("parent", "fix"):
            commit = git_full(git, entry[side])
            src, into = out / "src" / commit, out / "build" / f"{commit}-{release}"
            extract_tree(git, commit, src, folders)
            why = build(src.resolve(), into.resolve(), release)
            if why:
                row["reason"] = f"{side} {commit[:10]}: {why}"
                break
            bins[side] = (src, into)
        row["iuts"] = {side: f"exec:{into.resolve()}/lustre-testee" for side, (_, into) in bins.items()}
        row["builds"] = {side: str(into.resolve()) for side, (_, into) in bins.items()}
        if row["reason"] is None:
            if compiled_code(*bins["parent"]) == compiled_code(*bins["fix"]):
                row["reason"] = ("the fix changes no code the testee compiles (the extracted functions, macros "
                                 "and uapi headers are the same at the parent and the fix): not certified")
            else:
                reports = {side: certify(row["iuts"][side], out / "cert" / tag / side, entry["profile"],
                                         entry["requirements"], bins[side][1] / "lustre-testee")
                           for side in ("parent", "fix")}
                row["suite"] = {k: reports["fix"][k] for k in ("suite", "seed")}
                row["cases"], row["charged"] = compare(reports["parent"], reports["fix"])
                row["reason"] = not_applied(reports["parent"])
                row["versions"] = {side: reports[side]["iut"].get("hello", {}).get("version") for side in reports}
    row["told_apart"] = bool(row["cases"])
    row["missing"] = sorted(set(row["expected"]) - set(row["charged"]))
    row["caught"] = row["told_apart"] and not row["missing"]
    return row


# ---- the outputs -----------------------------------------------------------------------------

def figure(rows: list[dict]) -> dict:
    out = {"all": {"caught": sum(r["caught"] for r in rows), "total": len(rows)}}
    for kind in KINDS:
        rs = [r for r in rows if r["kind"] == kind]
        out[kind] = {"caught": sum(r["caught"] for r in rs), "total": len(rs)}
    return out


def document(rows: list[dict], fig: dict, corpus_name: str) -> str:
    def cell(items):
        return ", ".join(items) or "none"
    lines = ["# Known-bug recall: Lustre's own wire fixes, told apart", "",
             "Each row is a fix of a wire-visible bug in Lustre (between v2_10_0 and v2_17_57). For a `build` "
             "entry, Lustre's own unpacking code at the fix's parent and at the fix is built into "
             "[examples/lustre-testee](../../examples/lustre-testee/README.md) (`make RELEASE=R`, the guard-page build "
             "reading structures with the layout table of the profile's release R) and each is "
             "certified under the entry's profile with only the cases of the requirements the fix must be "
             "charged to (`certify --profile P --requirement R ...`). For a `target` entry, the independent OST "
             "of tests/independent_ost.py stands for the code after the fix and its mutant `before_<id>` for "
             "the code before it. The suite *tells them apart* when a case fails on the parent and not on the "
             "fix; an entry is *caught* when it is told apart and every expected requirement is charged.", "",
             "Certified with " + (", ".join(sorted({f"ptlrpc-conformance {r['suite']['suite']['version']} (suite "
                                                    f"sha256 `{r['suite']['suite']['sha256']}`), seed {r['suite']['seed']}"
                                                    for r in rows if r.get("suite")})) or "nothing")
             + "; each certification's selection is `--requirement R` for every expected requirement R of its row.", "",
             f"**Recall: {fig['all']['caught']} / {fig['all']['total']}** (build: {fig['build']['caught']} / "
             f"{fig['build']['total']}, target: {fig['target']['caught']} / {fig['target']['total']}).", "",
             "| id | fix | parent | kind | profile | what | expected | charged | told apart | caught | reason |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['id']} | `{r['fix'][:10]}` | `{r['parent'][:10]}` | {r['kind']} | {r['profile']} | "
                     f"{r['what']} | {cell(r['expected'])} | {cell(r['charged'])} | "
                     f"{'yes' if r['told_apart'] else 'no'} | {'yes' if r['caught'] else '**no**'} | "
                     f"{r['reason'] or ''} |")
    lines += ["", "## The cases that told them apart", ""]
    for r in rows:
        if r["cases"]:
            lines.append(f"- {r['id']} `{r['fix'][:10]}`: " + "; ".join(
                f"`{c}` ({', '.join(reqs) or 'verdict only'})" for c, reqs in sorted(r["cases"].items())))
    lines += ["", f"Written by `python3 tools/recall.py --lustre-git DIR --out DIR` from `{corpus_name}`; "
              "the miss reasons the tool cannot find itself are in tools/recall_reasons.yaml.", ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--lustre-git", required=True, help="a lustre-release git directory (bare or .git)")
    ap.add_argument("--out", required=True, help="directory for the trees, builds, reports and summary.json")
    ap.add_argument("--corpus", default=str(CORPUS), help="the corpus (default tools/recall_corpus.yaml)")
    ap.add_argument("--reasons", default=str(REASONS), help="documented reasons of misses, by id")
    ap.add_argument("--id", action="append", help="only the entries of this id (repeatable)")
    ap.add_argument("--doc", default=str(DOC), help="the document to write (default docs/certifications/recall.md)")
    ap.add_argument("--merge", metavar="SUMMARY", action="append",
                    help="with --id: a previous run's summary.json whose results for the other entries (unchanged "
                         "in the corpus) the summary and the document keep (repeatable: a later one's row wins)")
    args = ap.parse_args(argv)
    git = args.lustre_git
    if subprocess.run(["git", f"--git-dir={git}", "rev-parse", "--git-dir"], capture_output=True).returncode != 0:
        print(f"recall: --lustre-git {git}: not a git directory", file=sys.stderr)
        return 2
    corpus = pathlib.Path(args.corpus)
    try:
        entries = load_corpus(corpus)
        errors = corpus_errors(entries, str(corpus), git)
        reasons = load_reasons(pathlib.Path(args.reasons))
    except CorpusError as e:
        print(f"recall: {e}", file=sys.stderr)
        return 2
    if errors:
        print("recall: " + "\nrecall: ".join(errors), file=sys.stderr)
        return 2
    if args.id:
        unknown = sorted(set(args.id) - {e["id"] for e in entries})
        if unknown:
            print(f"recall: --id {', '.join(unknown)}: not in {corpus}", file=sys.stderr)
            return 2
    kept = {}
    for path in args.merge or []:          # a later summary's row replaces an earlier one's
        try:
            kept.update({(r["id"], r["fix"]): dict(r, merged_from=path)
                         for r in json.loads(pathlib.Path(path).read_text())["entries"]})
        except (OSError, ValueError, KeyError, TypeError) as e:
            print(f"recall: --merge {path}: not a summary.json of this tool: {e}", file=sys.stderr)
            return 2
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    folders = build_folders()
    rows, errors = [], []
    for e in entries:
        if args.id and e["id"] not in args.id:
            if not args.merge:
                continue
            row = kept.get((e["id"], e["fix"]))
            same = row and (row["parent"], row["profile"], row["kind"], row["expected"]) == \
                (e["parent"], e["profile"], e["kind"], sorted(e["requirements"]))
            if not same:
                errors.append(f"--merge: no result for {e['id']} {e['fix']} as the corpus gives it "
                              f"now: run it (--id {e['id']})")
                continue
            # (a summary older than the "finding" field: its reason is kept as it was written)
            row = dict(row, reason=row.get("finding", row["reason"]), finding=row.get("finding", row["reason"]))
            print(f"recall: {e['id']} {e['fix'][:10]}: kept from {row.pop('merged_from')}", file=sys.stderr)
        else:
            try:
                row = judge(e, git, out, folders)
            except CorpusError as err:
                print(f"recall: {e['id']} {e['fix']}: {err}", file=sys.stderr)
                return 2
            print(f"recall: {e['id']} {e['fix'][:10]}: {'caught' if row['caught'] else 'missed'}"
                  f" (charged {', '.join(row['charged']) or 'nothing'})", file=sys.stderr)
        row.setdefault("finding", row["reason"])
        documented = reasons.get(e["id"])
        errors += reason_errors(row, documented, args.reasons)
        if not row["caught"] and not (row["reason"] and documented
                                      and " ".join(documented["reason"].split()) in row["reason"]):
            if row["reason"] is None:
                row["reason"] = documented["reason"] if documented else \
                    "not documented: the suite ran and did not see this bug"
            elif documented:
                row["reason"] += f". {' '.join(documented['reason'].split())}"
        rows.append(row)
    fig = figure(rows)
    summary = {"corpus": str(corpus), "folders": folders, "recall": fig, "entries": rows}
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    if errors:
        print("recall: " + "\nrecall: ".join(errors) + f"\nrecall: {args.doc} not written", file=sys.stderr)
        return 2
    doc = pathlib.Path(args.doc)
    doc.parent.mkdir(parents=True, exist_ok=True)
    name = str(corpus.resolve().relative_to(ROOT)) if corpus.resolve().is_relative_to(ROOT) else corpus.name
    doc.write_text(document(rows, fig, name), encoding="utf-8")
    print(f"recall: {fig['all']['caught']} / {fig['all']['total']} caught; {out / 'summary.json'}, {doc}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
