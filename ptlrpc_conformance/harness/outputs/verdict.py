"""The verdict block that ends every run (`certify`, `run`, the plugin): the level reached,
the failing MUST and SHOULD requirements with one line each, the regression gate's verdict,
where the report is and the exit status — read from report.json's content, on lines of
their own after pytest's summary.

The level is the one outputs/level.py names and report.json records; nothing here judges.
"""
from __future__ import annotations

import os

WIDTH = 120          # a requirement's line is cut to this many characters


def level_name(level) -> str:
    """The level in words, as outputs/level.py says it (`words`: the status and the certified
    capabilities); else its `status`, or `name` (the shape before), or the value itself (an
    older report's plain string)."""
    from ptlrpc_conformance.harness.outputs import level as rule
    words = getattr(rule, "words", None)
    if words is not None:
        return words(level)
    if isinstance(level, dict):
        return str(level.get("status") or level.get("name") or "unknown")
    return str(level or "unknown")


def _statement(rid: str) -> str:
    try:
        from ptlrpc_conformance.harness.data.registry import requirements
        req = requirements().get(rid)
    except Exception:           # the block must print even when the registry cannot load
        req = None
    return req.statement if req else ""


def _requirement_line(rid: str, report: dict) -> str:
    """`  RID  statement…  (N failing cases)`, cut to WIDTH characters."""
    entry = (report.get("requirements") or {}).get(rid) or {}
    failing = len(entry.get("failing") or ())       # the cases whose failure was charged to it
    head = f"  {rid:<18} "
    tail = f"  ({failing} failing case{'s' if failing != 1 else ''})" if failing else ""
    text = _statement(rid)
    room = WIDTH - len(head) - len(tail)
    if len(text) > room:
        text = text[:max(room - 1, 0)].rstrip() + "…"
    return head + text + tail


def _gate_lines(gate: dict) -> list[str]:
    lines = []
    update = gate.get("update")
    if update:
        verb = "written" if update.get("written") else "not rewritten"
        lines.append(f"known-failures file {update.get('file')} {verb} ({update.get('mode')}):")
        lines += [f"  {change}" for change in update.get("changes") or ()]
    if gate.get("ok"):
        known = len(gate.get("known_failures") or ())
        lines.append(f"regression gate: passed ({known} known failure(s), no new ones)")
    else:
        problems = gate.get("problems") or []
        lines.append("regression gate: FAILED" + ("" if problems else " (the run is incomplete)"))
        for problem in problems:    # its own lines keep their indentation: YAML to paste as it is
            first, *rest = str(problem).splitlines() or [""]
            lines += ["  " + first] + rest
    not_run = list(gate.get("not_run") or ())
    if not_run:
        lines.append(f"known-failures entries not run by this run ({len(not_run)}: outside its selection or its "
                     f"collection, or not reached; kept, not judged): {', '.join(not_run[:8])}" + (" …" if len(not_run) > 8 else ""))
    return lines


def _of_this_run(path: str, report: dict) -> bool:
    """Whether `path` exists and was written by the run of `report` (not before it started:
    an earlier run's file in the same folder is not this run's output)."""
    import datetime as dt
    try:
        written = os.stat(path).st_mtime
        started = dt.datetime.fromisoformat(str(report.get("started"))).timestamp()
    except (OSError, ValueError, TypeError):
        return os.path.exists(path)
    return written >= started - 1.0          # `started` is kept to the second


def scope_lines(level) -> list[str]:
    """What a level rests on beyond its name: the selection of a partial run, the MUST
    requirements no case exercised, and each relaxing mode with who asked for it."""
    if not isinstance(level, dict):
        return []
    out = []
    if level.get("status") == "partial":
        complete = (level.get("selection") or {}).get("complete") or {}
        short = [c for c, whole in complete.items() if not whole]
        out.append(f"partial: {', '.join(short) or 'the suite'} not covered whole, so not certified "
                   "(a complete run certifies)")
    not_run = list(level.get("not_run") or ())
    if not_run:
        shown = ", ".join(not_run[:8]) + (f" and {len(not_run) - 8} more" if len(not_run) > 8 else "")
        out.append(f"MUST requirements without evidence (not run or not exercised): {shown}")
    for mode in level.get("modes") or ():
        if isinstance(mode, dict):
            out.append(f"mode: {mode.get('mode')} (asked by {mode.get('by')}): {mode.get('why')}")
    return out


def lines(report: dict | None, exit_status: int, report_path: str | os.PathLike | None = None) -> list[str]:
    """The block, one string per line."""
    out = ["", "== ptlrpc-conformance verdict =="]
    report = report or {}
    start_failure = (report.get("iut") or {}).get("start_failure")
    level = report.get("level") or {}
    name = level_name(level)
    if start_failure:
        out.append(f"level: incomplete (the IUT could not start: {start_failure})")
    elif report.get("incomplete"):
        out.append(f"level: {name} (the run stopped early: {report.get('incomplete_reason') or 'interrupted'})")
    else:
        out.append(f"level: {name}")
    iut = report.get("iut") or {}
    hello = iut.get("hello") if isinstance(iut.get("hello"), dict) else {}
    if iut:
        named = " ".join(str(hello[k]) for k in ("name", "version") if hello.get(k))
        if not named and (iut.get("spec") or "reference") == "reference":
            named = "the bundled reference implementation"    # judged without its hello read first
        out.append(f"iut: {named + ' ' if named else ''}(--iut {iut.get('spec') or 'reference'})")
    if report.get("profile"):           # what the level was judged against
        out.append(f"profile: {report['profile']}")
    out += scope_lines(level)
    summary = report.get("summary") or {}
    if summary.get("total"):
        counts = ", ".join(f"{summary[k]} {k}" for k in ("pass", "fail", "error", "error (suite)", "not-applicable",
                                                        "skipped", "interrupted") if summary.get(k))
        out.append(f"cases: {summary['total']} ({counts})")
    for lvl in (() if start_failure else ("MUST", "SHOULD")):
        failing = (level.get(f"failing_{lvl.lower()}") or []) if isinstance(level, dict) else []
        warn = " (warnings: they change the exit status only with --strict)" if lvl == "SHOULD" and failing else ""
        out.append(f"failing {lvl} requirements: {len(failing) if failing else 'none'}{warn}")
        out += [_requirement_line(rid, report) for rid in failing]
    if isinstance(report.get("gate"), dict):
        out += _gate_lines(report["gate"])
    if report_path:
        path = os.fspath(report_path)
        if os.path.exists(path):
            directory = os.path.dirname(os.path.abspath(path))
            others = [n for n in ("report.html", "junit.xml") if _of_this_run(os.path.join(directory, n), report)]
            others += ["reproducers/"] if report.get("reproducers") else []     # this run's, not an old run's
            out.append(f"report: {path}" + (f" (and {', '.join(others)})" if others else ""))
        else:
            out.append("report: none written")
    out.append(f"exit status: {int(exit_status)}")
    return out
