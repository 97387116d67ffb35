"""A Markdown certification document from a report.json (`ptlrpc-conformance certification-doc`).

The document says what was certified (the IUT's hello), the level reached, the counts, the
verdict of every requirement, the failing cases grouped by reason with one representative
of each group explained, the harness errors, and what was not applicable.  Everything in it
comes from the report, so the same report always gives the same document.
"""
from __future__ import annotations

import json
import pathlib
import re
import shlex
import sys
from collections import Counter, defaultdict

from ptlrpc_conformance.harness.data import registry
from ptlrpc_conformance.harness.options import EXIT_OK, EXIT_USAGE, Parser
from ptlrpc_conformance.harness.outputs.report import FORMAT, SUITE_ERROR
from ptlrpc_conformance.harness.outputs.level import PARTIAL, scope_words
from ptlrpc_conformance.harness.outputs.level import words as level_in_words

MAX_LISTED = 25          # case ids listed per group before "... and N more"
MAX_EXCERPT_LINES = 45   # lines of a representative's failure message


class ReportError(ValueError):
    """The file is not a report this command can read."""


def load(path: str | pathlib.Path) -> dict:
    p = pathlib.Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise ReportError(f"{path}: cannot read: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise ReportError(f"{path}: not a report.json (not UTF-8 text)") from None
    try:
        report = json.loads(text)
    except ValueError as e:
        raise ReportError(f"{path}: not a report.json (not JSON: {e})") from None
    if isinstance(report, dict) and report.get("format") == MATRIX_FORMAT:
        if not isinstance(report.get("releases"), list) or not isinstance(report.get("differences"), list):
            raise ReportError(f"{path}: the release matrix report is damaged (no releases or differences)")
        return report
    if not isinstance(report, dict) or report.get("format") != FORMAT:
        got = report.get("format") if isinstance(report, dict) else type(report).__name__
        raise ReportError(f"{path}: not a report.json of format {FORMAT} (format is {got!r})")
    problems = _shape_problems(report)
    if problems:
        more = f"; ... and {len(problems) - MAX_PROBLEMS} more" if len(problems) > MAX_PROBLEMS else ""
        raise ReportError(f"{path}: the report is damaged: " + "; ".join(problems[:MAX_PROBLEMS]) + more)
    return report


MAX_PROBLEMS = 10
MATRIX_FORMAT = "ptlrpc-conformance-matrix/1"       # harness/outputs/matrix.py


def render_matrix(doc: dict, base_dir: pathlib.Path, command: str | None = None, notes: str | None = None) -> str:
    """The certification document of a release matrix (`certify --profile all`): the level per
    release, the differences followed, and for each release the failing requirements with a
    representative case (from the release's own report.json beside the matrix's)."""
    from ptlrpc_conformance.harness.data import registry
    requirements = registry.requirements()
    iut = doc.get("iut") or {}
    hello = iut.get("hello") if isinstance(iut.get("hello"), dict) else {}
    impl = " ".join(str(hello[k]) for k in ("name", "version") if hello.get(k)) or str(iut.get("spec") or "the IUT")
    suite = doc.get("suite") or {}
    from ptlrpc_conformance.harness.outputs.matrix import conformance_words
    conformance = conformance_words(doc)
    out = [f"# Release matrix: {impl}", "",
           f"Judged by ptlrpc-conformance {suite.get('version', '?')} (suite sha256 `{suite.get('sha256', '?')}`), "
           f"seed {doc.get('seed')}, under the profile of every Lustre release it knows. Every case ran under "
           f"{doc['base']}; another release ran again only the cases it judges differently and took "
           f"{doc['base']}'s verdicts for the rest.", "",
           f"**{conformance[0].upper()}{conformance[1:]}.**", ""]
    if doc.get("modes"):
        out += ["Relaxing modes: " + "; ".join(f"{m.get('mode')} ({m.get('by')})" for m in doc["modes"]), ""]
    if doc.get("incomplete"):
        out += ["**The run is incomplete: a release's session stopped early.**", ""]
    out += ["| Profile | Level | Cases run under it | Failing requirements |", "|---|---|---|---|"]
    for r in doc["releases"]:
        out.append(f"| {r['profile']} | {_cell(r['words'])} | {r['own_cases']} | "
                   f"{_cell(', '.join(r['failing_requirements']) or 'none')} |")
    out += ["", "## Differences between releases", "",
            "Which release's behaviour the implementation follows, difference by difference, from the verdicts of "
            "the cases each difference changes under each side's profile.", "",
            "| Difference | Releases | Lustre change | Follows | In practice |", "|---|---|---|---|---|"]
    for d in doc["differences"]:
        out.append(f"| {_cell(d['id'])}: {_cell(d.get('what') or '')} | {d['from']} → {d['to']} | "
                   f"{_cell(d.get('lu') or '')} | {_cell(d['follows'])} | {_cell(d.get('effect') or '')} |")
    for r in doc["releases"]:
        if not r["failing_requirements"]:
            continue
        out += ["", f"## {r['profile']}: what fails", ""]
        try:
            rep = json.loads((base_dir / r["report"]).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            out.append(f"(its report {r['report']} could not be read)")
            continue
        for rid in r["failing_requirements"]:
            failing = sorted((c for c in rep.get("cases", []) if c.get("verdict") in ("fail", "error")
                              and rid in (c.get("failed_requirements") or c.get("requirements") or [])), key=rank)
            req = requirements.get(rid)
            out.append(f"- **{rid}**{f' ({req.level}): {req.statement}' if req else ''} — {len(failing)} case(s); "
                       f"e.g. `{failing[0]['id']}`: {_cell(reason(failing[0])[1])}" if failing else f"- **{rid}**")
    if notes:
        out += ["", "## Certifier's notes", "", notes.strip()]
    if command:
        out += ["", f"Written by `{command}`."]
    return "\n".join(out) + "\n"


def _is_strs(value) -> bool:
    return isinstance(value, list) and all(isinstance(x, str) for x in value)


def _shape_problems(report: dict) -> list[str]:
    """What in the report has another shape than `render` reads, each named by its key
    (and a case by its index and id)."""
    problems = []
    for key in ("summary", "level", "requirements"):
        if not isinstance(report.get(key), dict):
            problems.append(f"'{key}' must be an object")
    for key in ("iut", "suite", "environment", "sha256"):
        present = report.get(key) is not None or (key == "suite" and key in report)   # render reads suite as is
        if present and not isinstance(report[key], dict):
            problems.append(f"'{key}' must be an object, not {type(report[key]).__name__}")
    iut = report.get("iut")
    if isinstance(iut, dict):
        hello = iut.get("hello")
        if hello is not None and not isinstance(hello, dict):
            problems.append(f"'iut.hello' must be an object, not {type(hello).__name__}")
        elif isinstance(hello, dict):
            problems += [f"'iut.hello.{k}' must be a list of strings" for k, v in hello.items()
                         if isinstance(v, list) and not _is_strs(v)]
    if report.get("reproduce") is not None and not _is_strs(report["reproduce"]):
        problems.append("'reproduce' must be a list of strings")
    smoke = report.get("smoke")
    if smoke is not None and not (isinstance(smoke, list) and all(isinstance(s, dict) for s in smoke)):
        problems.append("'smoke' must be a list of objects")
    level = report.get("level")
    if isinstance(level, dict):
        problems += [f"'level.{k}' must be a list of requirement ids" for k in
                     ("failing_must", "failing_should", "not_applicable")
                     if level.get(k) is not None and not _is_strs(level[k])]
    requirements = report.get("requirements")
    if isinstance(requirements, dict):
        for rid, entry in requirements.items():
            if not isinstance(entry, dict):
                problems.append(f"'requirements.{rid}' must be an object")
            elif entry.get("cases") is not None and not _is_strs(entry["cases"]):
                problems.append(f"'requirements.{rid}.cases' must be a list of case ids (strings)")
    cases = report.get("cases")
    if not isinstance(cases, list):
        problems.append("'cases' must be a list of objects with an id and a verdict")
        return problems
    for n, c in enumerate(cases):
        if not (isinstance(c, dict) and isinstance(c.get("id"), str) and isinstance(c.get("verdict"), str)):
            problems.append(f"'cases[{n}]' must be an object with an id and a verdict (strings)")
            continue
        where = f"'cases[{n}]' ({c['id']})"
        if c.get("message") is not None and not isinstance(c["message"], str):
            problems.append(f"{where}: 'message' must be a string")
        if c.get("requirements") is not None and not _is_strs(c["requirements"]):
            problems.append(f"{where}: 'requirements' must be a list of requirement ids")
        notes = c.get("notes")
        if notes is None:
            continue
        if not isinstance(notes, dict):
            problems.append(f"{where}: 'notes' must be an object, not {type(notes).__name__}")
            continue
        if notes.get("signature") is not None and not isinstance(notes["signature"], str):
            problems.append(f"{where}: 'notes.signature' must be a string")
        rep = notes.get("reproducer")
        if isinstance(rep, dict) and rep.get("requirements") is not None and not _is_strs(rep["requirements"]):
            problems.append(f"{where}: 'notes.reproducer.requirements' must be a list of requirement ids")
    return problems


# ------------------------------------------------------------------------------------
# grouping failures
# ------------------------------------------------------------------------------------

def _normalise(text: str) -> str:
    """Numbers that vary from case to case become N (not those in names such as R2 or v2)."""
    text = re.sub(r"0x[0-9a-fA-F]+", "0xN", text)
    return re.sub(r"(?<![A-Za-z_\d])\d+", "N", text).strip()


def _variant(title: str) -> str:
    """A derived variant's title without what names its origin: 'lm_buflens[0] +1 in <vector>'."""
    title = re.sub(r"\b[a-z][a-z0-9_]*(?:\.[a-z0-9][a-z0-9_+-]*)+", "<vector>", title)
    return re.sub(r"\bfirst \d+ bytes\b", "first N bytes", title).strip()


def _actual_line(message: str) -> str:
    m = re.search(r"^actual:\s*(.*)$", message, re.M)
    return m.group(1) if m else ""


def _shape_lines(message: str) -> list[str]:
    m = re.search(r"not a well-formed MESSAGE:\n((?:  .*\n?)+)", message)
    return [line.strip() for line in m.group(1).splitlines()] if m else []


def reason(case: dict) -> tuple[str, str]:
    """(group key, what the group is, in words) of a failing or erroring case."""
    notes = case.get("notes") or {}
    sig = notes.get("signature") or ""
    msg = case.get("message") or ""
    reqs = case.get("requirements") or []
    if case["verdict"] == SUITE_ERROR:
        return "suite-error", "a bug in ptlrpc-conformance itself (not the IUT's failure): please report it"
    if case["verdict"] == "error":
        kind = notes.get("outcome") or (sig.split(":", 1)[1] if sig.startswith("error:") else "trouble")
        return f"error:{kind}", f"harness/protocol trouble ({kind}): the IUT crashed, hung or garbled"
    if sig == "accepted":
        rep = notes.get("reproducer") if isinstance(notes.get("reproducer"), dict) else {}
        if f"{rep.get('id')}.decode" != case["id"] and rep.get("title"):     # a derived variant
            variant = _variant(str(rep["title"]))
            return (f"accepted:variant:{variant}",
                    f"accepted derived variants the suite requires to be rejected: {variant}")
        broken = ", ".join(rep.get("requirements") or reqs) or "?"
        return f"accepted:{broken}", f"accepted input that breaks {broken}, which the suite requires to be rejected"
    if sig.startswith("rejected:"):
        detail = _normalise(_actual_line(msg))
        return f"{sig}:{detail}", f"rejected a valid message: {detail or sig}"
    if sig == "field:malformed-result":
        lines = _shape_lines(msg)
        return f"{sig}:{'|'.join(lines)}", ("accepted, but the decode result is not a complete MESSAGE: "
                                           + "; ".join(lines) if lines else "accepted, but the result is malformed")
    if sig.startswith("field:"):
        return sig, f"decoded {sig[len('field:'):]} differently from the expected value"
    if sig.startswith("bytes@"):
        return "bytes", "encoded bytes differ from the canonical bytes"
    if sig.startswith("encode-"):
        return sig, f"encode: {sig[len('encode-'):]}"
    first_line = next((line for line in msg.splitlines()[1:] if line.strip()), msg.splitlines()[0] if msg else "")
    key = sig or _normalise(first_line)[:160] or "unexplained"
    return key, (sig or first_line[:200] or "failed without a message")


def rank(case: dict):
    """Representatives: a hand-written vector (its reproducer is the case's own vector) before a
    derived variant or a property example, then the fewest id segments, the shortest message."""
    rep = (case.get("notes") or {}).get("reproducer") or {}
    own = isinstance(rep, dict) and f"{rep.get('id')}.decode" == case["id"]
    return (not own, case["id"].count("."), len(case.get("message") or ""), case["id"])


def _excerpt(message: str) -> str:
    lines = message.rstrip().splitlines()
    if len(lines) > MAX_EXCERPT_LINES:
        lines = lines[:MAX_EXCERPT_LINES] + [f"... ({len(lines) - MAX_EXCERPT_LINES} more lines in report.json)"]
    return "\n".join(lines).replace("```", "'''")


def _explain(case: dict, impl: str, requirements: dict) -> str:
    notes = case.get("notes") or {}
    sig = notes.get("signature") or ""
    msg = case.get("message") or ""
    reqs = case.get("failed_requirements") or case.get("requirements") or []
    stated = "; ".join(f"{r} ({requirements[r].level}): {requirements[r].statement}" if r in requirements else r
                       for r in reqs)
    title = _title_line(msg, requirements) or case["id"]
    if case["verdict"] == "error":
        why = (f"The suite could not get an answer it can judge: {_actual_line(msg) or title}. Harness and "
               "protocol trouble is kept apart from conformance failures.")
    elif sig == "accepted":
        why = f"The input breaks a rule a receiver must enforce, so it must be rejected; {impl} accepted it."
    elif sig.startswith("rejected:"):
        why = (f"The input is a valid message, so it must be accepted; {impl} rejected it "
               f"({_actual_line(msg) or sig}).")
    elif sig == "field:malformed-result":
        why = (f"{impl} accepted the message, but its result lacks what every decoded MESSAGE carries "
               f"({'; '.join(_shape_lines(msg))}), so the suite cannot compare the decoded values.")
    elif sig.startswith("field:"):
        why = f"{impl} decoded the message, but `{sig[len('field:'):]}` differs from the value the suite expects."
    else:
        why = f"{impl} did not produce what the suite expects ({sig or 'see the message'})."
    return f"Representative `{case['id']}` — {title}\n\nRequirements: {stated or '(none)'}\n\n{why}"


def _title_line(message: str, requirements: dict) -> str:
    """The case's title line: the first line of a message after the requirement lines that
    head it ("HDR-TOTAL-1 (MUST): statement")."""
    for line in message.splitlines():
        head = line.split(" ", 1)[0]
        if head in requirements and line.startswith(f"{head} ("):
            continue
        return line
    return ""


def errno_mismatches(cases: list[dict]) -> tuple[list[dict], Counter]:
    """Every rejection that named another errno class than Lustre's in an errno-agnostic run,
    derived variants one by one ({"case", "in", "expected", "got", "requirements"}), and their
    count per requirement they are charged to."""
    out: list[dict] = []
    for c in cases:
        notes = c.get("notes") or {}
        found = notes.get("errno_class_mismatches")
        if isinstance(found, list):
            out += [dict(m, **{"in": c["id"]}) for m in found if isinstance(m, dict)]
        elif notes.get("errno_class_mismatch"):        # a report written before the list
            out.append({"case": c["id"], "in": c["id"], "requirements": list(c.get("requirements") or ())})
    per_requirement: Counter = Counter()
    for m in out:
        for rid in m.get("requirements") or ():
            per_requirement[rid] += 1
    return out, per_requirement


def level_words(level) -> str:
    return level_in_words(level) if isinstance(level, dict) else str(level or "?")


# ------------------------------------------------------------------------------------
# the document
# ------------------------------------------------------------------------------------

def _cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render(report: dict, command: str | None = None, notes: str | None = None) -> str:
    """The document; `notes` (Markdown) is the certifier's own section, kept as given."""
    try:
        known = registry.requirements()
    except registry.RegistryError:
        known = {}
    iut = report.get("iut") or {}
    hello = iut.get("hello") or {}
    name = hello.get("name") or iut.get("spec") or "the implementation"
    version = hello.get("version") or "?"
    impl = f"{name} {version}"
    summary = report["summary"]
    level = report["level"]
    cases = report["cases"]
    out: list[str] = []
    w = out.append

    w(f"# Certification: {impl}\n")
    if level.get("status") == PARTIAL:
        w(f"**A partial run: {_cell(scope_words(level))}. It does not certify "
          f"{', '.join(c for c, whole in (level.get('selection') or {}).get('complete', {}).items() if not whole)} "
          "as a whole.**\n")
    suite = report.get("suite") or {}
    w(f"Conformance of **{impl}** to PtlRPC message framing as checked by {suite.get('name', 'ptlrpc-conformance')} "
      f"{suite.get('version', '')}, verdicts following Lustre {report.get('lustre_version', '?')} "
      f"(profile `{report.get('profile', '?')}`).\n")
    if command:
        w(f"This document was generated by `{command}` from the report of the run below; "
          "regenerate it the same way after a new run.\n")
    if report.get("incomplete"):
        w("**The run was interrupted: the verdicts below are partial and certify nothing.**\n")

    w("## Implementation\n")
    w("| | |\n|---|---|")
    w(f"| name | {_cell(name)} |")
    w(f"| version | {_cell(version)} |")
    for key, value in hello.items():
        if key not in ("name", "version", "protocol"):
            w(f"| {_cell(key)} | {_cell(', '.join(value) if isinstance(value, list) else value)} |")
    w(f"| `--iut` | `{_cell(iut.get('spec', '?'))}` |")
    w("")

    w("## Result\n")
    w(f"Level: **{level_words(level)}**.")
    for mode in level.get("modes") or ():
        w(f"Relaxing mode **{_cell(mode.get('mode'))}**, asked for by {_cell(mode.get('by'))}: {_cell(mode.get('why'))}.")
    if level.get("not_run"):
        w(f"MUST requirements without evidence (not run, or run but not exercised) ({len(level['not_run'])}): "
          f"{', '.join(level['not_run'])}.")
    if level.get("failing_must"):
        w(f"Failing MUST requirements ({len(level['failing_must'])}): {', '.join(level['failing_must'])}.")
    if level.get("failing_should"):
        w(f"Failing SHOULD requirements ({len(level['failing_should'])}, warnings): "
          f"{', '.join(level['failing_should'])}.")
    w("")
    suite_errors = summary.get(SUITE_ERROR, 0)
    w("| pass | fail | error | " + ("suite error | " if suite_errors else "") + "not applicable | skipped | total |\n"
      "|---:|---:|---:|" + ("---:|" if suite_errors else "") + "---:|---:|---:|")
    w(f"| {summary.get('pass', 0)} | {summary.get('fail', 0)} | {summary.get('error', 0)} | "
      + (f"{suite_errors} | " if suite_errors else "")
      + f"{summary.get('not-applicable', 0)} | {summary.get('skipped', 0)} | {summary.get('total', len(cases))} |\n")
    if suite_errors:
        w(f"**{suite_errors} case(s) hit a bug in ptlrpc-conformance itself** (verdict `{SUITE_ERROR}`): they are "
          "charged to no requirement, and the run certifies nothing until the suite is fixed.\n")
    mismatches, per_requirement = errno_mismatches(cases)
    if hello.get("errno_agnostic") or mismatches:
        in_cases = len({m["in"] for m in mismatches})
        w("The run was errno-agnostic: a rejection passes whatever its errno class. Rejections that named "
          f"another class than Lustre's: {len(mismatches)}"
          + (f", in {in_cases} case{'s' if in_cases != 1 else ''}" if mismatches else "")
          + " (derived variants and property examples counted one by one)."
          + (" Per requirement: " + ", ".join(f"{rid} {n}" for rid, n in sorted(
              per_requirement.items(), key=lambda kv: (-kv[1], kv[0]))) + "." if per_requirement else "") + "\n")
    smoke = report.get("smoke") or []
    bad_smoke = [s for s in smoke if not s.get("ok")]
    if smoke:
        w("Protocol smoke check before the run: " + ("passed." if not bad_smoke else
          "problems: " + "; ".join(f"{s.get('check')}: {s.get('detail')}" for s in bad_smoke) + "."))
        w("")
    w("| | |\n|---|---|")
    w(f"| suite | {_cell(suite.get('name', 'ptlrpc-conformance'))} {_cell(suite.get('version', '?'))}, "
      f"code and data sha256 `{_cell(suite.get('sha256', 'not recorded'))}` |")
    w(f"| run started | {_cell(report.get('started', '?'))} ({report.get('duration_s', '?')} s) |")
    w(f"| reproduce | `{_cell(shlex.join(str(a) for a in report.get('reproduce') or []))}` |")
    env = report.get("environment") or {}
    w(f"| environment | Python {_cell(env.get('python', '?'))}, {_cell(env.get('platform', '?'))} |")
    w(f"| seed | {report.get('seed')} |")
    sha = report.get("sha256") or {}
    if sha.get("vectors"):
        w(f"| vectors sha256 | `{sha['vectors']}` |")
    w("")

    if notes and notes.strip():
        w("## Certifier's notes\n")
        w(notes.strip() + "\n")

    w("## Requirements\n")
    by_case = {c["id"]: c for c in cases}
    w("Each requirement's verdict comes from the cases that exercise it: *pass* the cases that passed and "
      "judged it, *fail* and *error* the cases charged with breaking it, *n/a* those that did not apply.\n")
    w("| requirement | level | verdict | pass | fail | error | n/a | statement |")
    w("|---|---|---|---:|---:|---:|---:|---|")
    for rid, entry in sorted(report["requirements"].items()):
        counts = Counter(by_case[c]["verdict"] for c in entry.get("cases", []) if c in by_case)
        failing = Counter(by_case[c]["verdict"] for c in entry.get("failing", []) if c in by_case) \
            if "failing" in entry else counts
        passing = len(entry["passing"]) if isinstance(entry.get("passing"), list) else counts.get("pass", 0)
        statement = known[rid].statement if rid in known else ""
        w(f"| {rid} | {entry.get('level') or '?'} | **{entry.get('verdict')}** | {passing} | "
          f"{failing.get('fail', 0)} | {failing.get('error', 0)} | {counts.get('not-applicable', 0)} | {_cell(statement)} |")
    w("")

    bad = [c for c in cases if c["verdict"] in ("fail", "error")]
    w("## Failing cases, by reason\n")
    if not bad:
        w("None: every applicable case passed.\n")
    else:
        groups: dict[str, list] = defaultdict(list)
        what: dict[str, str] = {}
        for c in bad:
            key, words = reason(c)
            groups[key].append(c)
            what[key] = words
        ordered = sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))
        w(f"{len(bad)} cases in {len(ordered)} groups. Each group names one representative and explains it; "
          "every case's full message, with the annotated hex dump, is in report.json and report.html, and each "
          "failing case is a reproducer vector (`--vectors DIR/reproducers`).\n")
        w("| # | cases | reason |\n|---:|---:|---|")
        for n, (key, members) in enumerate(ordered, 1):
            w(f"| {n} | {len(members)} | {_cell(what[key])} |")
        w("")
        for n, (key, members) in enumerate(ordered, 1):
            members.sort(key=rank)
            rep = members[0]
            w(f"### {n}. {what[key]}\n")
            ids = [f"`{c['id']}`" for c in members]
            more = f" ... and {len(ids) - MAX_LISTED} more" if len(ids) > MAX_LISTED else ""
            w(f"{len(members)} case(s): {', '.join(ids[:MAX_LISTED])}{more}.\n")
            w(_explain(rep, impl, known) + "\n")
            w("```\n" + _excerpt(rep.get("message") or "") + "\n```\n")

    na = [c for c in cases if c["verdict"] == "not-applicable"]
    w("## Not applicable\n")
    if not na:
        w("Every case applied.\n")
    else:
        w(f"{len(na)} cases did not apply: they need what the implementation does not declare. They are never "
          "passed and never failed.\n")
        why = Counter(c.get("message") or "(no reason given)" for c in na)
        w("| cases | why |\n|---:|---|")
        for text, count in sorted(why.items(), key=lambda kv: (-kv[1], kv[0])):
            w(f"| {count} | {_cell(text)} |")
        w("")
        if level.get("not_applicable"):
            w(f"Requirements none of whose cases applied: {', '.join(level['not_applicable'])}.\n")
    skipped = [c for c in cases if c["verdict"] == "skipped"]
    if skipped:
        w("## Skipped\n")
        for c in skipped:
            w(f"- `{c['id']}`: {_cell(c.get('message') or '')}")
        w("")
    return "\n".join(out).rstrip() + "\n"


def main(argv: list[str]) -> int:
    """`ptlrpc-conformance certification-doc REPORT.json [--out FILE]`; exit 0, or 2 on bad input."""
    p = Parser(prog="ptlrpc-conformance certification-doc",
                description="Write a Markdown certification document from a certify run's report.json.")
    p.add_argument("report", help="a report.json written by certify --out DIR")
    p.add_argument("--out", default="-", help="the Markdown file to write (default: standard output)")
    p.add_argument("--notes", default=None, metavar="FILE",
                   help="a Markdown file of the certifier's own notes, included as a section")
    p.add_argument("--allow-partial", action="store_true",
                   help="document a partial run (a selection, or MUST requirements without evidence); "
                        "the document then opens with what the run left out, in bold")
    args = p.parse_args(argv)
    try:
        report = load(args.report)
    except ReportError as e:
        print(f"ptlrpc-conformance certification-doc: {e}", file=sys.stderr)
        return EXIT_USAGE
    level = report.get("level") if isinstance(report.get("level"), dict) else {}
    matrix = report.get("format") == MATRIX_FORMAT
    if matrix:              # a partial matrix (a selection) is refused as a single profile's run is
        rows = [r.get("level") or {} for r in report["releases"] if isinstance(r, dict)]
        level = next((lv for lv in rows if isinstance(lv, dict) and lv.get("status") == PARTIAL), {})
    if level.get("status") == PARTIAL and not args.allow_partial:
        scope = scope_words(level)
        print(f"ptlrpc-conformance certification-doc: {args.report}: a partial run ({scope}) "
              "certifies no capability as a whole; run the whole suite, or pass --allow-partial to document "
              "it as partial", file=sys.stderr)
        return EXIT_USAGE
    notes = None
    if args.notes:
        try:
            notes = pathlib.Path(args.notes).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            print(f"ptlrpc-conformance certification-doc: cannot read the notes {args.notes}: "
                  f"{getattr(e, 'strerror', None) or e}", file=sys.stderr)
            return EXIT_USAGE
    given = [args.report] + (["--notes", args.notes] if args.notes else []) + (
        ["--allow-partial"] if args.allow_partial else []) + (["--out", args.out] if args.out != "-" else [])
    command = "ptlrpc-conformance certification-doc " + " ".join(shlex.quote(a) for a in given)
    try:
        text = (render_matrix(report, pathlib.Path(args.report).parent, command, notes) if matrix
                else render(report, command, notes))
    except (TypeError, AttributeError, KeyError, ValueError) as e:     # a shape load() did not foresee
        print(f"ptlrpc-conformance certification-doc: {args.report}: the report is damaged "
              f"({type(e).__name__}: {e})", file=sys.stderr)
        return EXIT_USAGE
    if args.out == "-":
        sys.stdout.write(text)
        return EXIT_OK
    try:
        out = pathlib.Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, encoding="utf-8")
    except OSError as e:
        print(f"ptlrpc-conformance certification-doc: cannot write {args.out}: {e.strerror or e}", file=sys.stderr)
        return EXIT_USAGE
    if matrix:
        print(f"certification-doc: {args.out} written (release matrix of {len(report['releases'])} profiles)",
              file=sys.stderr)
        return EXIT_OK
    print(f"certification-doc: {args.out} written ({len(report['cases'])} cases, level "
          f"{level_words(report['level'])})", file=sys.stderr)
    return EXIT_OK
