"""The commands about the suite's data: `decode` (a message as an annotated dump, then as the
IUT decodes it), `lint-vectors`, `requirements` (the registry and the cases that exercise
each requirement, as collected) and `export` (every data case for other languages)."""
from __future__ import annotations

import json
import pathlib
import sys

from ptlrpc_conformance import __version__
from ptlrpc_conformance.cli.common import iut_preflight, suites_args
from ptlrpc_conformance.harness import options
from ptlrpc_conformance.harness.data import registry
from ptlrpc_conformance.harness.options import EXIT_FAIL, EXIT_OK, EXIT_USAGE, Parser
from ptlrpc_conformance.harness.transport.adapter import NotApplicable
from ptlrpc_conformance.harness.verdicts import hexdump


def _read_hex(text: str) -> bytes:
    """The bytes of `decode`'s argument (hex, '-' for standard input, '@FILE'); whitespace
    between digits is ignored.  ValueError says what is wrong: a character that is not a hex
    digit (and where), or an odd number of digits."""
    where = "the argument"
    if text == "-":
        text, where = sys.stdin.read(), "standard input"
    elif text.startswith("@"):
        where = text[1:]
        try:
            text = pathlib.Path(where).read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise ValueError(f"{where}: not a text file of hex digits") from None
    digits = "".join(text.split())
    for i, ch in enumerate(digits):
        if ch not in "0123456789abcdefABCDEF":
            raise ValueError(f"{where}: {ch!r} at digit {i + 1} is not a hexadecimal digit")
    if len(digits) % 2:
        raise ValueError(f"{where}: an odd number of hex digits ({len(digits)}): "
                         "every byte is two digits (a digit is missing, or one too many)")
    return bytes.fromhex(digits)


def cmd_decode(argv: list[str]) -> int:
    p = Parser(prog="ptlrpc-conformance decode",
                description="Print a message as a hex dump annotated with field names and offsets, "
                            "then what the IUT decodes it to.")
    p.add_argument("hex", help="the message as hex; '-' reads stdin, '@FILE' reads a file")
    p.add_argument("--direction", choices=("request", "reply"), default="request")
    options.add_arguments(p, options.command_options("decode"))
    args = p.parse_args(argv)
    try:
        data = _read_hex(args.hex)
    except ValueError as e:
        print(f"ptlrpc-conformance decode: not hex: {e}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as e:
        print(f"ptlrpc-conformance decode: cannot read {args.hex[1:]}: {e.strerror or e}", file=sys.stderr)
        return EXIT_USAGE
    print(f"{len(data)} bytes, annotated by the suite's own layout walker:")
    print(hexdump.render(data, limit=1 << 30))
    status, adapter = iut_preflight(args.iut, args.iut_timeout)
    if status is not None:
        return status
    with adapter:
        try:
            outcome = adapter.call({"op": "decode", "data": data.hex(), "direction": args.direction})
        except NotApplicable as e:
            print(f"\n{adapter.hello.name}: {e}")
            return EXIT_FAIL
    print(f"\n{adapter.hello.name} ({args.direction}): {outcome.describe()}")
    if outcome.ok:
        print(json.dumps(outcome.result, indent=1))
        return EXIT_OK
    return EXIT_FAIL


def cmd_lint_vectors(argv: list[str]) -> int:
    p = Parser(prog="ptlrpc-conformance lint-vectors",
                description="Check vector files; every problem is reported with file, vector id and field.")
    p.add_argument("paths", nargs="*", help="vector files or directories (default: the bundled vectors)")
    args = p.parse_args(argv)
    from ptlrpc_conformance.harness.data.vectors import (                # jsonschema: +130 ms
        VectorError, bundled_files, load_file, user_files)
    from ptlrpc_conformance.harness.ost import scenario                  # the vectors, ost/: +200 ms
    problems: list[str] = []
    count = scenarios = 0
    try:
        if args.paths:
            files = [(str(path), None, path) for path in user_files(args.paths)]
        else:
            files = [(name, text, name) for name, text in bundled_files()]
        for name, text, path in files:
            count += len(load_file(path, text, problems))
            try:
                body = text if text is not None else pathlib.Path(path).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue              # load_file has reported it
            scenarios += len(scenario.load_text(name, body, problems, yaml_problems=False))
    except VectorError as e:
        problems += e.problems
    if problems:
        for line in problems:
            print(line)
        print(f"lint-vectors: {len(problems)} problem(s)", file=sys.stderr)
        return EXIT_USAGE
    print(f"lint-vectors: {count} vectors, {scenarios} scenarios, no problems")
    return EXIT_OK


class _CaseCollector:
    """A pytest plugin that keeps, once the cases are collected (and declared by the plugin),
    each case id with the requirements it lists."""

    def __init__(self):
        self.cases: dict[str, list[str]] = {}

    def pytest_collection_finish(self, session):
        for item in session.items:
            props = dict(item.user_properties)
            if "case_id" in props:
                self.cases[props["case_id"]] = [r for r in props["requirements"].split(",") if r]


def collected_cases(profile: str | None = None) -> dict[str, list[str]]:
    """Every case a certification run would run, with the requirements it lists: collected by
    pytest from the suites, exactly as `certify` and `list` collect them."""
    import contextlib
    import io

    import pytest                                                      # +170 ms
    pargs = suites_args() + ["--collect-only", "-qq", "-p", "no:cacheprovider"]
    if profile:
        pargs += ["--conformance-profile", profile]
    plugin = _CaseCollector()
    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        rc = int(pytest.main(pargs, plugins=[plugin]))
    if rc != 0:
        raise RuntimeError(f"the cases could not be collected (pytest exit status {rc}):\n{output.getvalue()[-2000:]}")
    return plugin.cases


def exercised(profile: str | None = None) -> dict[str, set[str]]:
    """requirement id -> the ids of the collected cases that list it (collected_cases)."""
    out: dict[str, set[str]] = {}
    for case, reqs in collected_cases(profile).items():
        for r in reqs:
            out.setdefault(r, set()).add(case)
    return out


def cmd_requirements(argv: list[str]) -> int:
    p = Parser(prog="ptlrpc-conformance requirements",
                description="List the requirement registry and how many cases exercise each requirement.")
    options.add_arguments(p, options.command_options("requirements"))
    args = p.parse_args(argv)
    try:
        prof = registry.profile(args.profile).name
    except registry.RegistryError as e:
        print(f"ptlrpc-conformance: {e}", file=sys.stderr)
        return EXIT_USAGE
    try:
        cases = exercised(prof)
    except RuntimeError as e:
        print(f"ptlrpc-conformance requirements: {e}", file=sys.stderr)
        return EXIT_USAGE
    reqs = [r for r in registry.requirements().values() if r.in_profile(prof)]
    for r in reqs:
        print(f"{r.id:<16} {r.level:<6} cases={len(cases.get(r.id, ())):<5} {r.statement}")
    n = sum(1 for r in reqs if cases.get(r.id))
    must = [r for r in reqs if r.level == "MUST"]
    n_must = sum(1 for r in must if cases.get(r.id))
    print(f"\ncoverage: {n} of {len(reqs)} requirements of profile {prof} are exercised "
          f"({n_must} of {len(must)} MUST)")
    return EXIT_OK if n_must == len(must) else EXIT_FAIL


def cmd_export(argv: list[str]) -> int:
    p = Parser(prog="ptlrpc-conformance export",
                description="Write every data case - hand-written vectors and the variants derived from them - "
                            "for consumers in other languages.")
    p.add_argument("--format", choices=("json",), default="json")
    p.add_argument("--out", default="-", help="file to write (default: standard output)")
    options.add_arguments(p, options.command_options("export"))
    args = p.parse_args(argv)
    bad_out = options.writable_file(args.out, "--out", make_parents=False) if args.out != "-" else []
    if bad_out:
        print(f"ptlrpc-conformance export: {bad_out[0]}", file=sys.stderr)
        return EXIT_USAGE
    from ptlrpc_conformance.harness.data.vectors import VectorError, load_all   # jsonschema: +130 ms
    from ptlrpc_conformance.harness.verdicts.derive import derive         # the vectors, model: +180 ms
    try:
        prof = registry.profile(args.profile).name
        vectors = [v.for_profile(prof) for v in load_all(args.vectors)]
    except (registry.RegistryError, VectorError) as e:
        print(f"ptlrpc-conformance export: {e}", file=sys.stderr)
        return EXIT_USAGE

    def row(v, derived_from=None):
        out = {"id": v.id, "title": v.title, "requirements": list(v.requirements), "cite": list(v.cite),
               "op": v.op, "verdict": v.verdict, "data": v.data.hex()}
        if v.op == "decode_struct":
            out.update(struct=v.struct, byte_order=v.byte_order)
        else:
            out["direction"] = v.direction
        if v.verdict == "valid":
            out["expect"] = v.expect
            out["canonical"] = v.canonical
        if v.verdict == "invalid":
            out["errno"] = "any" if v.any_errno else list(v.accepted_errnos)
        if derived_from:
            out["derived_from"] = derived_from
        return out

    cases = [row(v) for v in vectors]
    for case in derive([v for v in vectors if v.op == "decode"], prof):
        cases += [row(v, case.origin.id) for v in case.variants]
    doc = {"format": "ptlrpc-conformance-export/1", "suite_version": __version__, "profile": prof,
           "lustre_version": registry.profile(prof).lustre_version, "count": len(cases), "cases": cases}
    text = json.dumps(doc, indent=1) + "\n"
    if args.out == "-":
        sys.stdout.write(text)
    else:
        pathlib.Path(args.out).write_text(text)
        print(f"export: {len(cases)} cases ({len(vectors)} vectors, {len(cases) - len(vectors)} derived) "
              f"written to {args.out}", file=sys.stderr)
    return EXIT_OK
