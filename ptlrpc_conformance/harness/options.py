"""Command-line plumbing shared by every command: the exit statuses (`EXIT_STATUSES`, the one
statement of what each means), an argparse parser that exits with status 2 and the program's
prefix, the argument types, and the option table.

The option table (`OPTIONS`) describes each option of a certification run once: its name on
the command line and as a pytest option, type, default, help, and whether report.json's
`reproduce` command repeats it.  Everything else is built from it: the parser of `certify` and
`run` and the options `list`, `decode`, `requirements` and `export` share with it (cli/), the
plugin's pytest options (plugin/), the pytest arguments the command line passes on
(`pytest_args`) and the `reproduce` command (`reproduce_argv`, used by outputs/report.py).

The checks of a run's inputs before its first case (where the report goes, the vector files,
the ids a run names) close the module; the command line and the plugin share them.  The
known-failures file is checked by the regression gate that reads it (outputs/gate.py,
`file_problems`).
"""
from __future__ import annotations

import argparse
import os
import pathlib
import sys
import tempfile
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

from ptlrpc_conformance.harness.transport import DEFAULT_TIMEOUT

EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_IUT = 0, 1, 2, 3
EXIT_NOT_CERTIFIED = 5            # certify: a valid selection in which no MUST case applied
EXIT_SUITE = 6                    # a case hit a bug in the suite's own code (pytest's statuses end at 5)

# What each exit status of the command means, said once: the command's --help (`exit_status_text`)
# and the tables of README.md and docs/report.md (`exit_status_table`, tests/test_exit_statuses.py
# checks them) are written from it.  Markdown: `code` is plain text in --help.
EXIT_STATUSES: tuple[tuple[int, str], ...] = (
    (EXIT_OK, "every applicable MUST case passed (SHOULD failures are warnings, unless `--strict`)"),
    (EXIT_FAIL, "a MUST case failed (with `--strict`, a SHOULD case too), the IUT crashed, hung or garbled "
                "mid-run, or the run stopped early (`--max-fail`, `--time-budget`, Ctrl-C; the report is marked "
                "incomplete)"),
    (EXIT_USAGE, "usage or input error: a bad option, unknown ids (`--requirement`, `--area`, `--case`, "
                 "requirements named by a case's marker), bad or empty input files (vectors, scenarios, "
                 "known-failures)"),
    (EXIT_IUT, "the IUT could not start, or its hello was missing, invalid or not protocol 1"),
    (EXIT_NOT_CERTIFIED, "(`certify`) a valid selection in which no MUST case applied to the IUT: level "
                         "`not certified` (an IUT that declares no capability gets this)"),
    (EXIT_SUITE, "a case hit a bug in ptlrpc-conformance itself (verdict `error (suite)`, charged to no "
                 "requirement), or the suite's cases could not be collected: the run's verdicts cannot be "
                 "trusted until the suite is fixed; it outranks 0, 1 and 5 and the regression gate; please "
                 "report it"),
)


def exit_status_table() -> str:
    """EXIT_STATUSES as the Markdown table the documents show."""
    rows = [f"| {code} | {meaning} |" for code, meaning in EXIT_STATUSES]
    return "\n".join(["| status | meaning |", "|---|---|"] + rows)


def exit_status_text(width: int = 92) -> str:
    """EXIT_STATUSES as the paragraph that ends the command's --help."""
    import re
    import textwrap
    plain = [re.sub(r"`([^`]*)`", lambda m: f'"{m[1]}"' if " " in m[1] else m[1], meaning)   # `not certified`
             for _, meaning in EXIT_STATUSES]
    said = "; ".join(f"{code} {meaning}" for (code, _), meaning in zip(EXIT_STATUSES, plain))
    return textwrap.fill(f"Exit status: {said}.", width)
DEFAULT_SEED = 20261122           # of the property tests, unless --seed says otherwise
DEFAULT_EXAMPLES = 200            # examples per property test


class Parser(argparse.ArgumentParser):
    """argparse that exits with status 2 and our prefix on usage errors."""

    def error(self, message):
        self.print_usage(sys.stderr)
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        sys.exit(EXIT_USAGE)


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not _NUMBER_RULES[positive_int][0](value):
        raise argparse.ArgumentTypeError(f"{value} {_NUMBER_RULES[positive_int][1]}")
    return value


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not _NUMBER_RULES[positive_float][0](value):
        raise argparse.ArgumentTypeError(f"{text} {_NUMBER_RULES[positive_float][1]}")
    return value


# each number type's rule: (the test, what a value that fails it "is not")
_NUMBER_RULES: dict[Callable, tuple[Callable[[Any], bool], str]] = {
    positive_int: (lambda v: v >= 1, "is not at least 1"),
    positive_float: (lambda v: 0 < v < float("inf"), "is not a positive number of seconds"),
}


# ------------------------------------------------------------------------------------------
# The option table
# ------------------------------------------------------------------------------------------

_SAME = object()


@dataclass(frozen=True)
class Option:
    """One option of a certification run.  `help` may name `{default}`."""

    dest: str                          # the attribute of the command line's parsed arguments
    help: str
    cli: tuple[str, ...] = ()          # its names on the command line; () for a pytest-only option
    pytest: str | None = None          # its pytest option; None for a command-line-only option
    plugin: bool = True                # False: an option of pytest or xdist itself (-k, -n)
    pytest_dest: str | None = None     # pytest's attribute, where it is not derived from the name
    type: Callable | None = None       # the command line's type; the plugin takes the plain number
    default: Any = None
    pytest_default: Any = _SAME        # where the plugin must tell "not given" from the default
    choices: tuple[str, ...] | None = None
    action: str | None = None          # "append" or "store_true"
    nargs: str | None = None
    const: Any = None
    metavar: str | None = None
    path: bool = False                 # a file or directory: passed on and reproduced absolute
    reproduce: bool = False            # part of report.json's `reproduce` command
    commands: frozenset[str] = frozenset()   # other commands that take it (list, decode, ...)

    @property
    def config_dest(self) -> str:
        """The name under which pytest's config holds the value (`config.getoption`)."""
        return self.pytest_dest or self.pytest.lstrip("-").replace("-", "_")

    def help_text(self) -> str:
        default = self.default
        return self.help.format(default=f"{default:g}" if isinstance(default, float) else default)

    def kwargs(self, for_pytest: bool = False) -> dict:
        """Keyword arguments of argparse's add_argument (or pytest's addoption)."""
        kw: dict[str, Any] = {"help": self.help_text()}
        default = self.pytest_default if for_pytest and self.pytest_default is not _SAME else self.default
        if self.action == "append":
            kw.update(action="append", default=list(default or ()))
        elif self.action == "store_true":
            kw.update(action="store_true", default=False)
        else:
            kw["default"] = default
        if self.type is not None:
            kw["type"] = _PLAIN_TYPES.get(self.type, self.type) if for_pytest else self.type
        for key in ("choices", "nargs", "const", "metavar"):
            if getattr(self, key) is not None:
                kw[key] = getattr(self, key)
        if not for_pytest:
            kw["dest"] = self.dest
        return kw

    def show(self, value) -> str:
        return os.path.abspath(value) if self.path else str(value)

    def argv(self, name: str, value) -> list[str]:
        """`value` written as arguments of option `name` (nothing for an option not given)."""
        if self.action == "store_true":
            return [name] if value else []
        if self.action == "append":
            return [x for v in value or () for x in (name, self.show(v))]
        return [] if value is None or value == "" else [name, self.show(value)]


# pytest parses these as plain numbers; the plugin checks them with number_problems, so that
# its messages name the pytest option
_PLAIN_TYPES = {positive_int: int, positive_float: float}


def number_problems(getoption: Callable[[str], Any]) -> list[str]:
    """The plugin's number options (`config.getoption`) checked by the rule of their command-line
    type, a line each naming the pytest option."""
    problems = []
    for o in OPTIONS:
        if o.pytest and o.plugin and o.type in _NUMBER_RULES:
            value = getoption(o.config_dest)
            test, what = _NUMBER_RULES[o.type]
            if value is not None and not test(value):
                problems.append(f"argument {o.pytest}: {value:g} {what}")
    return problems

_LIST, _DECODE, _REQUIREMENTS, _EXPORT = "list", "decode", "requirements", "export"

# In the order of the `reproduce` command (as written since format 1), then the others.
OPTIONS: tuple[Option, ...] = (
    Option("iut", "implementation under test: reference (the default; reference:RELEASE behaves as that "
                  "Lustre release's code, e.g. reference:2.15.8), python:package.module:factory, "
                  "exec:COMMAND, tshark[:PROGRAM] (Wireshark's Lustre dissector, decode only), "
                  "lnet-tcp:NID?target=UUID&... (a live OST over LNet TCP, read-only by default: docs/live.md), "
                  "or client:COMMAND (a client the suite runs: --client)",
           cli=("--iut",), pytest="--iut", default="reference", pytest_default=None, metavar="SPEC",
           reproduce=True, commands=frozenset({_DECODE})),
    Option("client", "certify a client: the suite serves its OST on 127.0.0.1, runs COMMAND (its placeholders "
                     "addr, port and nid, each in braces, replaced by serve's) under a fault schedule drawn from "
                     "--seed and judges what it sends against the client rules (the same as --iut "
                     "'client:COMMAND', with --area client)",
           cli=("--client",), metavar="COMMAND"),
    Option("profile", "profile the verdicts follow: lustre-RELEASE[-literal][-reconstruct] (default: the one "
                      "spec/profiles.yaml names, the current Lustre code); certify and run also take all[-MODIFIER], "
                      "every release's profile in one run (the release matrix)",
           cli=("--profile",), pytest="--conformance-profile", metavar="NAME", reproduce=True,
           commands=frozenset({_LIST, _REQUIREMENTS, _EXPORT})),
    Option("seed", "seed of the property tests (default {default}); recorded in the report",
           cli=("--seed",), pytest="--conformance-seed", type=int, default=DEFAULT_SEED, metavar="N",
           reproduce=True),
    Option("examples", "examples per property test (default {default})",
           cli=("--examples",), pytest="--conformance-examples", type=positive_int, default=DEFAULT_EXAMPLES,
           metavar="N", reproduce=True),
    Option("vectors", "add the vector files of DIR (or one file) to the run; repeatable",
           cli=("--vectors",), pytest="--conformance-vectors", action="append", metavar="DIR", path=True,
           reproduce=True, commands=frozenset({_LIST, _EXPORT})),
    Option("ignore_errno_class", "judge rejections by accept/reject only; errno classes are reported, not judged",
           cli=("--ignore-errno-class",), pytest="--ignore-errno-class", action="store_true", reproduce=True),
    Option("iut_timeout", "per-call timeout of exec: testees, in seconds (default {default})",
           cli=("--iut-timeout",), pytest="--iut-timeout", type=positive_float, default=DEFAULT_TIMEOUT,
           metavar="SECONDS", reproduce=True, commands=frozenset({_DECODE})),
    Option("scratch_target", "for --iut lnet-tcp:...&mode=destructive: the scratch OST whose data the run may "
                             "destroy, UUID@NID; it must match the target the preflight reaches exactly",
           cli=("--scratch-target",), pytest="--conformance-scratch-target", metavar="UUID@NID", reproduce=True),
    Option("no_pcap", "for --iut lnet-tcp: do not record the run's LNet traffic (by default every live run "
                      "writes live-*.pcap beside report.json)",
           cli=("--no-pcap",), pytest="--conformance-no-pcap", action="store_true"),
    Option("dry_run", "start the IUT (for lnet-tcp: the handshake and the preflight), list the cases that would "
                      "run and those its capabilities or the live target's firewall block; run nothing",
           cli=("--dry-run",), action="store_true"),
    Option("requirement", "only the cases that check requirement ID; repeatable",
           cli=("--requirement",), pytest="--conformance-requirement", action="append", metavar="ID",
           reproduce=True, commands=frozenset({_LIST})),
    Option("area", "only the cases of AREA, the first segment of the case id (framing, structs, ...); repeatable",
           cli=("--area",), pytest="--conformance-area", action="append", metavar="AREA", reproduce=True,
           commands=frozenset({_LIST})),
    Option("case", "only this case (exact id; a renamed id selects the cases that replaced it); repeatable",
           cli=("--case",), pytest="--conformance-case", action="append", metavar="CASE-ID", reproduce=True),
    Option("level", "only the cases that check a requirement of this level",
           cli=("--level",), pytest="--conformance-level", choices=("MUST", "SHOULD", "MAY"), reproduce=True,
           commands=frozenset({_LIST})),
    Option("keyword", "only the cases matching this pytest -k expression (case ids match too)",
           cli=("-k",), pytest="-k", plugin=False, pytest_dest="keyword", metavar="EXPRESSION", reproduce=True),
    Option("strict", "SHOULD failures fail the run (exit status 1) instead of being reported as warnings",
           cli=("--strict",), pytest="--conformance-strict", action="store_true", reproduce=True),
    Option("known_failures", "regression gate: exit 1 on failures FILE does not list, and on its stale, "
                             "unmatched, changed or expired entries",
           cli=("--known-failures",), pytest="--known-failures", metavar="FILE", path=True),
    Option("update_known_failures", "rewrite the --known-failures FILE: drop stale entries and record "
                                    "signatures (tighten, the default); 'loosen' also adds the new failures",
           cli=("--update-known-failures",), pytest="--update-known-failures", nargs="?", const="tighten",
           choices=("tighten", "loosen")),
    Option("io_log", "record every protocol line exchanged with the IUT in FILE",
           cli=("--io-log",), pytest="--iut-io-log", metavar="FILE", path=True),
    Option("list", "print the selected cases with their requirements; run nothing",
           cli=("--list",), pytest="--conformance-list", action="store_true"),
    Option("max_fail", "stop after N cases failed or hit IUT trouble (crash, hang, garbage; failures the "
                       "known-failures file lists do not count); the report is marked incomplete",
           cli=("--max-fail",), pytest="--conformance-max-fail", type=positive_int, metavar="N"),
    Option("time_budget", "stop once SECONDS have passed (checked after each case); the report is marked "
                          "incomplete",
           cli=("--time-budget",), pytest="--conformance-time-budget", type=positive_float, metavar="SECONDS"),
    Option("max_timeouts", "stop once the IUT has left N requests in a row unanswered (timeouts; default "
                           "{default}), or does not answer its hello after a restart: it stopped answering, and "
                           "the report is marked incomplete; crashes never stop a run",
           cli=("--max-timeouts",), pytest="--conformance-max-timeouts", type=positive_int, default=5,
           metavar="N"),
    Option("out", "directory for report.json, report.html and junit.xml (created; default {default})",
           cli=("--out",), default="ptlrpc-conformance-report", metavar="DIR"),
    Option("no_html", "write no report.html (report.json and junit.xml only): for runs that tools read, "
                      "about half a second less a run",
           cli=("--no-html",), action="store_true"),
    Option("report", "write a report.json of the run to FILE (reproducers of failures beside it)",
           pytest="--conformance-report", metavar="FILE"),
    Option("jobs", "parallel workers (pytest-xdist), e.g. 2 or auto",
           cli=("-n", "--jobs"), pytest="-n", plugin=False, pytest_dest="numprocesses", metavar="N"),
    Option("quiet", "less output: progress dots and the verdict", cli=("-q", "--quiet"), action="store_true"),
    Option("verbose", "a line per case and every failure in full (default: a progress line per file, a line "
                      "per failing case, the verdict)", cli=("-v", "--verbose"), action="store_true"),
)
BY_DEST = {o.dest: o for o in OPTIONS}


def certify_options() -> list[Option]:
    """The options of `certify` and `run`, in the table's order."""
    return [o for o in OPTIONS if o.cli]


def command_options(command: str) -> list[Option]:
    """The options of the certify table another command takes (`list`, `decode`, ...)."""
    return [o for o in OPTIONS if command in o.commands]


def add_arguments(parser: argparse.ArgumentParser, opts: Iterable[Option]) -> None:
    for o in opts:
        parser.add_argument(*o.cli, **o.kwargs())


def add_pytest_options(group) -> None:
    """The plugin's options (a group of pytest's parser)."""
    for o in OPTIONS:
        if o.pytest and o.plugin:
            group.addoption(o.pytest, **o.kwargs(for_pytest=True))


def pytest_args(args: argparse.Namespace, opts: Iterable[Option]) -> list[str]:
    """The pytest arguments that pass the command line's values of `opts` on."""
    return [x for o in opts if o.pytest for x in o.argv(o.pytest, getattr(args, o.dest))]


def reproduce_argv(getoption: Callable[[str], Any], resolved: Mapping[str, Any] | None = None) -> list[str]:
    """The certify command that repeats a run, from the run's pytest options (`config.getoption`);
    `resolved` gives values the caller worked out (the profile a run followed by default)."""
    resolved = resolved or {}
    argv = ["ptlrpc-conformance", "certify"]
    for o in OPTIONS:
        if o.reproduce:
            value = resolved[o.dest] if o.dest in resolved else getoption(o.config_dest)
            argv += o.argv(o.cli[0], o.default if value is None else value)
    return argv


# ------------------------------------------------------------------------------------------
# The inputs of a run, checked before its first case
# ------------------------------------------------------------------------------------------
#
# Where the report goes, the vector files, the selection options and the requirement ids cases
# declare (the known-failures file: outputs/gate.py, `file_problems`).  Each check returns a list of problems, one line each,
# naming the option (as the caller spells it: `--out` on the command line,
# `--conformance-report` in the plugin) or the file and line.  The command line checks what it
# can before it starts pytest (cli/certify.py); the plugin checks the same for runs without the command
# line, and the case ids and areas once the cases are collected (plugin.py).  An id that is not
# known is named with the closest known ids.


def closest(word: str, known: Iterable[str], n: int = 3) -> str:
    """' (closest: A, B)' from `known`, or '' when nothing is close."""
    import difflib                      # only when an id is wrong
    known = sorted(set(known))
    near = difflib.get_close_matches(word, known, n=n, cutoff=0.6)
    if not near:   # the ids differ in case, or by more than a few letters: try the upper-case form
        near = difflib.get_close_matches(word.upper(), known, n=n, cutoff=0.6) or \
            difflib.get_close_matches(word.lower(), known, n=n, cutoff=0.6)
    return f" (closest: {', '.join(near)})" if near else ""


def capability_warnings(hello) -> list[str]:
    """A warning line per capability name the IUT's hello declares and the suite does not know
    (it is ignored), with the closest known one."""
    from ptlrpc_conformance.harness.transport.protocol import KNOWN_CAPABILITIES
    return [f"warning: the IUT's hello declares capability {c!r}, which this suite does not know: it is "
            f"ignored{closest(c, KNOWN_CAPABILITIES)}" for c in hello.unknown_capabilities()]


def unknown(option: str, given: Iterable[str], known: Iterable[str], what: str) -> list[str]:
    """One problem per value of `option` that is not among `known`."""
    known = set(known)
    return [f"{option} {value}: unknown {what}{closest(value, known)}" for value in given if value not in known]


def writable_dir(path: str | os.PathLike, option: str) -> list[str]:
    """`path` is a directory that exists and is writable, or one that can be created: it is
    not a file, no part of it above is a file.  Tried for real (permission bits do not tell
    root, nor a read-only file system): the missing directories are made, a file is written
    in the last one, and what was made is removed again."""
    if not str(path).strip():
        return [f"{option}: an empty path names no directory (give one, e.g. {option} report)"]
    p = pathlib.Path(path)
    if p.exists() and not p.is_dir():
        return [f"{option} {path}: is a file, not a directory"]
    made = []
    d = p.absolute()
    while not d.exists():
        made.append(d)
        d = d.parent
    if not d.is_dir():
        return [f"{option} {path}: cannot be created: {d} is a file"]
    try:
        for m in reversed(made):
            m.mkdir()
        fd, probe = tempfile.mkstemp(dir=p, prefix=".ptlrpc-conformance-")
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        what = "cannot be created" if made else "not writable"
        return [f"{option} {path}: {what}: {e.strerror or e}"]
    finally:
        for m in made:
            try:
                m.rmdir()
            except OSError:
                pass
    return []


def writable_file(path: str | os.PathLike, option: str, make_parents: bool = True) -> list[str]:
    """`path` is a file that can be written (created if missing, with its directory unless
    `make_parents` is false: then the directory must exist)."""
    p = pathlib.Path(path)
    if p.is_dir():
        return [f"{option} {path}: is a directory, not a file"]
    if not make_parents and not p.absolute().parent.is_dir():
        return [f"{option} {path}: cannot be created: {p.absolute().parent} is not a directory"]
    if p.exists():
        try:
            with open(p, "a", encoding="utf-8"):
                pass
        except OSError as e:
            return [f"{option} {path}: not writable: {e.strerror or e}"]
        return []
    problems = writable_dir(p.absolute().parent, option)
    if not problems:
        return []
    why = problems[0].split(": ", 1)[1]
    return [f"{option} {path}: " + (why if why.startswith("cannot be created") else f"cannot be created: {why}")]


def requirement_ids(ids: Iterable[str], option: str) -> list[str]:
    from ptlrpc_conformance.harness.data.registry import requirements
    ids = list(ids or ())
    return unknown(option, ids, requirements(), "requirement id") if ids else []


def selection(cases: Iterable[str], areas: Iterable[str], known_cases: Iterable[str],
              case_option: str, area_option: str) -> list[str]:
    """--case and --area values against the case ids of the run (collected); a renamed case
    id (spec/case_aliases.yaml) is known."""
    from ptlrpc_conformance.harness.data.registry import case_aliases
    known_cases = set(known_cases)
    known_areas = {c.split(".")[0] for c in known_cases}
    return (unknown(case_option, cases, known_cases | set(case_aliases()), "case id")
            + unknown(area_option, areas, known_areas, "area"))


def marker_requirements(where: str, case: str, ids: Iterable[str]) -> list[str]:
    """The requirement ids a `conformance` marker declares are in the registry."""
    from ptlrpc_conformance.harness.data.registry import requirements
    known = requirements()
    return [f"{where}: case {case}: unknown requirement id {r!r}{closest(r, known)}" for r in ids if r not in known]


def vector_files(paths: Iterable[str]) -> list[str]:
    """The user's vector and scenario files load (harness/data/vectors.py, ost/scenario.py)."""
    from ptlrpc_conformance.harness.data.vectors import VectorError, load_all
    from ptlrpc_conformance.harness.ost import scenario
    try:
        load_all(paths)
        scenario.load_all(paths)
    except VectorError as e:
        return list(e.problems)
    return []
