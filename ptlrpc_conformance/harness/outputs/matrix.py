"""The release matrix: one IUT judged under the profile of every Lustre release
(`certify --profile all`), each case run once unless a release judges it differently.

How a run is planned:
- every release profile's cases are collected, and each case gets a fingerprint of what its
  judges read under that profile: its vectors as the profile sees them (verdict, errno
  classes, the expected decode as that release's code reads the bytes), the requirements it
  lists that belong to the profile, and the release facts its judges read
  (verdicts/release.py, judged_facts);
- the newest release's profile runs every selected case; another release's runs only the
  cases whose fingerprint differs (or that only it has); its report is composed of those and
  of the newest release's results for the rest, and its level is computed from that whole.

The matrix report (report.json, format ptlrpc-conformance-matrix/1) lists each release's
level and, for each known difference between releases (spec/release_differences.yaml),
which release's behaviour the implementation follows, from the verdicts of the cases that
difference changes; its page (report.html, write_matrix) shows the same in two tables.
"""
from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import pathlib
from importlib import resources

import jinja2

from ptlrpc_conformance.harness.data import registry
from ptlrpc_conformance.harness.outputs import write_atomically

FORMAT = "ptlrpc-conformance-matrix/1"
CONFORMANT = ("conformant", "fully conformant", "partial")    # level statuses without a failing MUST
WHOLE = ("conformant", "fully conformant")                      # ... of a run that covered its scope


# ---- fingerprints -----------------------------------------------------------------------
def _describe(param, run):
    """What a judge reads of a case's parameter under `run` (the profile's RunSettings)."""
    from ptlrpc_conformance.harness.data.vectors import Vector
    from ptlrpc_conformance.harness.verdicts import release
    from ptlrpc_conformance.harness.verdicts.derive import DerivedCase
    if isinstance(param, Vector):
        out = {"id": param.id, "verdict": param.verdict, "errno": list(param.errno),
               "expect": release.view(param.expect, run.release, run.literal)}
        if param.op == "decode_struct":
            out["not_applicable"] = release.struct_not_applicable(param, run.release)
            out["data"] = hashlib.sha256(param.data).hexdigest()
        return out
    if isinstance(param, (tuple, list)):
        ids = "+".join(p.id for p in param if isinstance(p, Vector))
        return {"id": ids, "items": [_describe(p, run) for p in param]} if ids else [_describe(p, run) for p in param]
    if isinstance(param, DerivedCase):
        return {"id": param.id, "cases": [_describe(v, run) for v in (param.origin, *param.variants)]}
    if isinstance(param, (str, int, float, bool, type(None))):
        return param
    return getattr(param, "id", type(param).__name__)


class FingerprintCollector:
    """A pytest plugin: once the cases are collected (under one profile), each case id with
    the fingerprint of what its judges read."""

    def __init__(self, profile: str):
        self.profile = profile
        self.fingerprints: dict[str, str] = {}

    def pytest_collection_finish(self, session):
        from ptlrpc_conformance.harness import settings
        from ptlrpc_conformance.harness.verdicts import release
        run = settings.of(session.config)          # the run's settings: --conformance-profile self.profile
        known = registry.requirements()
        for item in session.items:
            props = dict(item.user_properties)
            case = props.get("case_id")
            if not case:
                continue
            reqs = [r for r in props["requirements"].split(",") if r and r in known and known[r].in_profile(self.profile)]
            params = getattr(getattr(item, "callspec", None), "params", {}) or {}
            described = {k: _describe(v, run) for k, v in sorted(params.items())}
            what = {"requirements": reqs, "params": described}
            if not any(isinstance(v, dict) and "id" in v for v in described.values()):
                # no vector: a property or a stateful case, whose judges read the facts
                what["facts"] = release.judged_facts(case.split(".", 1)[0], self.profile)
            text = json.dumps(what, sort_keys=True, default=str)
            self.fingerprints[case] = hashlib.sha256(text.encode()).hexdigest()


def fingerprints(profile: str, vectors=()) -> dict[str, str]:
    """case id -> fingerprint, for every case a run under `profile` would collect."""
    import contextlib
    import io

    import pytest
    suites = resources.files("ptlrpc_conformance.suites")
    pargs = ["-c", str(suites.joinpath("pytest.ini")), "--rootdir", str(suites), "--pyargs",
             "ptlrpc_conformance.suites", "--collect-only", "-qq", "-p", "no:cacheprovider",
             "--conformance-profile", profile]
    for d in vectors or ():
        pargs += ["--conformance-vectors", d]
    plugin = FingerprintCollector(profile)
    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        rc = int(pytest.main(pargs, plugins=[plugin]))
    if rc != 0:
        raise RuntimeError(f"the cases of {profile} could not be collected (pytest exit status {rc}):\n"
                           f"{output.getvalue()[-2000:]}")
    return plugin.fingerprints


def to_rerun(mine: dict[str, str], base: dict[str, str], ran: set[str], selected: bool) -> list[str]:
    """The cases a profile runs itself, from its fingerprints (`mine`) and the base profile's:
    those whose fingerprint differs among the cases the base run ran, and, when no selection
    narrowed the run, those the base profile does not have."""
    return sorted(c for c, fp in mine.items()
                  if base.get(c) != fp and (c in ran or (c not in base and not selected)))


# ---- composed reports -------------------------------------------------------------------
def compose(base: dict, own: dict | None, profile: str, collected: list[str] | None = None) -> dict:
    """The report of `profile`: its own cases (`own`, a run of the cases it judges
    differently) and base's results for every other case it has (`collected`: the case ids
    it collects; None: the same as base's).  Requirements and level are computed anew."""
    from ptlrpc_conformance.harness.outputs import report as R
    own_cases = {c["id"]: c for c in (own or {}).get("cases", [])}
    wanted = set(collected) if collected is not None else {c["id"] for c in base["cases"]}
    cases = [dict(c, run_under=base["profile"]) for c in base["cases"]
             if c["id"] in wanted and c["id"] not in own_cases]
    cases += [dict(c, run_under=profile) for c in own_cases.values()]
    cases.sort(key=lambda c: c["id"])
    known = registry.requirements()
    hello = (base.get("iut") or {}).get("hello")
    agnostic_by_option = any(m.get("by") == "--ignore-errno-class" for m in base.get("modes") or ())
    modes = R.run_modes(profile, agnostic_by_option, hello)
    reqs = R.judged(R.requirement_verdicts(cases, known), cases, known, profile, hello, modes)
    incomplete = bool(base.get("incomplete") or (own or {}).get("incomplete"))
    reason = base.get("incomplete_reason") or (own or {}).get("incomplete_reason")
    doc = R.document(profile=profile, seed=base.get("seed"), user_vectors=(), reproduce=[],
                     iut=base.get("iut") or {}, smoke=base.get("smoke"), started=base.get("started", ""),
                     duration_s=round(float(base.get("duration_s") or 0) + float((own or {}).get("duration_s") or 0), 3),
                     exit_status=0, incomplete=incomplete, incomplete_reason=reason, requirements=reqs,
                     cases=cases, capabilities=(hello or {}).get("capabilities"),
                     selection=base.get("selection"), modes=modes)
    doc["sha256"] = base.get("sha256")
    doc["reproduce"] = [a if a != base["profile"] else profile for a in base.get("reproduce") or []]
    doc["matrix_run"] = {"own_cases": len(own_cases), "from": base["profile"],
                         "reused_cases": len(cases) - len(own_cases)}
    return doc


# ---- differences ------------------------------------------------------------------------
def known_differences() -> list[dict]:
    """spec/release_differences.yaml's differences (checked): what changed on the wire
    between neighbouring releases."""
    from ptlrpc_conformance.spec import release_differences
    return list(release_differences.load()["differences"])


def _side(report: dict | None, globs: list[str], fields: list[str], requirements: list[str],
          explained=lambda case_id: False) -> bool | None:
    """Whether the cases a difference changes pass under one side's profile: None when none of
    them exercised the difference's requirements.  A case counts when the report charges it
    with one of those requirements: a pass that exercised one, a failure on one.  A failure
    only on other decoded fields than the difference's (`fields`), or one `explained` as
    something else's (explains), is not this difference's."""
    entries = (report or {}).get("requirements") or {}
    passing, failing = set(), set()
    for r in requirements:
        passing |= set((entries.get(r) or {}).get("passing") or ())
        failing |= set((entries.get(r) or {}).get("failing") or ())
    judged = False
    for c in (report or {}).get("cases", []):
        if not any(fnmatch.fnmatchcase(c["id"], g) for g in globs):
            continue
        if c["id"] in failing:
            differ = ((c.get("notes") or {}) if isinstance(c.get("notes"), dict) else {}).get("fields_differ")
            if (fields and differ and not set(differ) & set(fields)) or explained(c["id"]):
                continue
            return False
        judged = judged or c["id"] in passing
    return True if judged else None


def explains(d: dict, end: str, reports: dict[str, dict]):
    """For difference `d` judged on its side `end` ("from" or "to"): whether a case's failure
    under that release is another difference's.  It is when the case passes under another
    release on the same side of `d` (as old as d's "from", or as new as its "to"): `d`'s rule
    is the same there, so what fails under the first release is something else."""
    key = registry.release_key
    same = [r for r in registry.releases() if r != d[end]
            and (key(r) <= key(d["from"]) if end == "from" else key(r) >= key(d["to"]))]
    passed = set()
    for r in same:
        passed |= {c["id"] for c in (_report_for(reports, f"lustre-{r}") or {}).get("cases", [])
                   if c.get("verdict") == "pass"}
    return passed.__contains__


def follows(reports: dict[str, dict]) -> list[dict]:
    """For each known difference whose cases ran: which side the implementation follows.
    `reports`: profile -> composed report.  A side is followed when every case the difference
    changes that was judged on its requirements passes under that side's release (a failure
    on other decoded fields only, or of a case that passes under another release on the
    same side, is not counted: see `explains`)."""
    out = []
    for d in known_differences():
        globs, fields, reqs = list(d.get("cases") or []), list(d.get("fields") or []), list(d.get("requirements") or [])
        old, new = (_side(_report_for(reports, f"lustre-{d[end]}"), globs, fields, reqs, explains(d, end, reports))
                    for end in ("from", "to"))
        if old is None and new is None:
            verdict = "not exercised"
        elif old and new:
            verdict = "both"            # its cases pass under both releases' rules
        elif new:
            verdict = f"{d['to']} and later" + (f" ({d['from']}'s side not judged)" if old is None else "")
        elif old:
            verdict = f"{d['from']} and earlier" + (f" ({d['to']}'s side not judged)" if new is None else "")
        else:
            verdict = "neither"
        out.append({"id": d["id"], "from": d["from"], "to": d["to"], "lu": d.get("lu"), "what": d.get("what"),
                    "effect": d.get("effect"), "requirements": list(d.get("requirements") or []),
                    "cases": globs, "fields": fields, "follows": verdict})
    return out


def _report_for(reports: dict[str, dict], base_profile: str) -> dict | None:
    """The report of the profile of that release (whatever modifiers the matrix used)."""
    for name, rep in reports.items():
        if registry.profile(name).base == base_profile:
            return rep
    return None


def document(reports: dict[str, dict], base: str, exit_status: int, matrix_name: str = "all") -> dict:
    """report.json of a matrix run (`--profile NAME`): each release's level, the differences
    followed, and the command that runs the matrix again (for verify-report)."""
    from ptlrpc_conformance.harness.outputs.level import words
    rows = []
    for name in sorted(reports, key=lambda n: registry.release_key(registry.profile(n).release)):
        rep = reports[name]
        lv = rep.get("level") or {}
        failing = sorted(rid for rid, e in (rep.get("requirements") or {}).items() if e.get("verdict") in ("fail", "error"))
        rows.append({"profile": name, "release": registry.profile(name).release, "level": lv,
                     "words": words(lv), "failing_requirements": failing, "summary": rep.get("summary"),
                     "own_cases": (rep.get("matrix_run") or {}).get("own_cases", len(rep.get("cases", []))),
                     "report": f"{name}/report.json"})
    base_rep = reports[base]
    from ptlrpc_conformance.harness.outputs.level import PARTIAL, scope_words
    partial = [r["level"] for r in rows if (r["level"] or {}).get("status") == PARTIAL]
    # a selection narrows every release's run alike: a partial matrix is conformant to no
    # release; it only says under which releases no MUST failed among the cases that ran
    matches = [r["release"] for r in rows if (r["level"] or {}).get("status") in (WHOLE if not partial else ())]
    unfailed = [r["release"] for r in rows if (r["level"] or {}).get("status") in CONFORMANT] if partial else []
    return {"format": FORMAT, "base": base, "exit_status": exit_status,
            "iut": base_rep.get("iut"), "suite": base_rep.get("suite"), "sha256": base_rep.get("sha256"),
            "seed": base_rep.get("seed"), "environment": base_rep.get("environment"),
            "reproduce": [matrix_name if a == base else a for a in base_rep.get("reproduce") or []],
            "selection": base_rep.get("selection"), "modes": base_rep.get("modes"),
            "incomplete": any(r.get("incomplete") for r in reports.values()),
            "partial": scope_words(partial[0]) if partial else None, "no_failing_must_in": unfailed,
            "conformant_to": matches, "releases": rows, "differences": follows(reports)}


def literal_note(doc: dict) -> str | None:
    """For a matrix without the -literal modifier in which a release fails: what the -literal
    profiles tolerate, under which a release's own code (a port of pack_generic.c) is judged."""
    prof = registry.profile(doc["releases"][-1]["profile"]) if doc.get("releases") else None
    if prof is None or "literal" in prof.modifiers or not any(r["failing_requirements"] for r in doc["releases"]):
        return None
    literal = registry.profile("-".join([prof.base, "literal", *prof.modifiers]))
    return (f"a release's own code is judged under its -literal profile (--profile "
            f"{'-'.join(['all', 'literal', *prof.modifiers])}): {literal.relaxes}")


def conformance_words(doc: dict) -> str:
    """"conformant to: 2.15.8, 2.17.0", or for a partial matrix what the selected cases showed."""
    if doc.get("partial"):
        unfailed = ", ".join(doc.get("no_failing_must_in") or []) or "no release"
        return (f"conformant to: no release as a whole (a partial run: {doc['partial']}); "
                f"no MUST failed among the cases that ran under: {unfailed}")
    return f"conformant to: {', '.join(doc.get('conformant_to') or []) or 'no release'}"


def verdict_lines(doc: dict, path=None) -> list[str]:
    """The verdict block of a matrix run: a line per release, then the differences."""
    iut = doc.get("iut") or {}
    hello = iut.get("hello") if isinstance(iut.get("hello"), dict) else {}
    named = " ".join(str(hello[k]) for k in ("name", "version") if hello.get(k))
    out = ["", "== ptlrpc-conformance release matrix ==",
           f"iut: {named + ' ' if named else ''}(--iut {iut.get('spec') or 'reference'})"]
    width = max((len(r["profile"]) for r in doc["releases"]), default=0)
    for r in doc["releases"]:
        failing = r["failing_requirements"]
        tail = f"; failing: {', '.join(failing[:8])}{' ...' if len(failing) > 8 else ''}" if failing else ""
        out.append(f"  {r['profile']:<{width}}  {r['words']}  ({r['own_cases']} case(s) run under it{tail})")
    judged = [d for d in doc["differences"] if d["follows"] != "not exercised"]
    if judged:
        out.append("differences between releases (which behaviour this implementation follows):")
        for d in judged:
            out.append(f"  {d['id']} ({d['lu'] or 'no LU'}, {d['from']} -> {d['to']}): {d['follows']}"
                       + (f" - {d['effect']}" if d.get("effect") else ""))
    out.append(conformance_words(doc))
    if literal_note(doc):
        out.append(f"note: {literal_note(doc)}")
    if path is not None:
        out.append(f"report: {path} (each release's report in its own folder beside it)")
    out.append(f"exit status: {doc['exit_status']}")
    return out


# ---- the page ---------------------------------------------------------------------------

_MATRIX = jinja2.Environment(autoescape=True).from_string("""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>ptlrpc-conformance release matrix: {{ iut }}</title>
<style>
body { font-family: sans-serif; margin: 2em; max-width: 75em; }
table { border-collapse: collapse; margin: 1em 0; }
th, td { border: 1px solid #bbb; padding: .3em .6em; text-align: left; vertical-align: top; }
th { background: #eee; }
.conformant { background: #dfd; } .partial { background: #ffe9b3; } .notc { background: #fdd; }
code { font-size: 95%; }
</style></head><body>
<h1>Release matrix: {{ iut }}</h1>
<p><strong>{{ conformance[0] | upper }}{{ conformance[1:] }}</strong>.
Every case ran under {{ doc.base }}; another release ran again only the cases it judges differently, and took
{{ doc.base }}'s verdicts for the rest. Exit status {{ doc.exit_status }}.</p>
<table><tr><th>Profile</th><th>Level</th><th>Cases run under it</th><th>Failing requirements</th><th>Report</th></tr>
{% for r in doc.releases %}<tr class="{{ 'partial' if r.level.status == 'partial' else 'conformant'
  if r.level.status in ('conformant', 'fully conformant') else 'notc' }}">
<td>{{ r.profile }}</td><td>{{ r.words }}</td><td>{{ r.own_cases }}</td>
<td>{{ r.failing_requirements | join(', ') or 'none' }}</td><td><a href="{{ r.profile }}/report.html">{{ r.profile }}/report.html</a></td></tr>
{% endfor %}</table>
<h2>Differences between releases</h2>
<p>For each difference the suite knows, which release's behaviour this implementation follows, from the verdicts
of the cases it changes under each side's profile.</p>
<table><tr><th>Difference</th><th>Releases</th><th>Lustre change</th><th>Follows</th><th>What it changes in practice</th><th>Requirements</th></tr>
{% for d in doc.differences %}<tr><td><code>{{ d.id }}</code><br>{{ d.what }}</td><td>{{ d['from'] }} &rarr; {{ d.to }}</td>
<td>{{ d.lu or '' }}</td><td>{{ d.follows }}</td><td>{{ d.effect or '' }}</td><td>{{ d.requirements | join(', ') }}</td></tr>
{% endfor %}</table>
</body></html>
""")


def write_matrix(doc: dict, path: str | os.PathLike) -> pathlib.Path:
    """The release matrix's report.html: a row per release, a row per known difference."""
    iut = doc.get("iut") or {}
    hello = iut.get("hello") if isinstance(iut.get("hello"), dict) else {}
    name = " ".join(str(hello[k]) for k in ("name", "version") if hello.get(k)) or iut.get("spec") or "?"
    return write_atomically(path, _MATRIX.render(doc=doc, iut=name, conformance=conformance_words(doc)))
