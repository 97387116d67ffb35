"""ptlrpc-conformance: the command line.

  ptlrpc-conformance [certify] [--iut SPEC] [--out DIR] [-v | -q] [options] [-- PYTEST-ARGS]
  ptlrpc-conformance run CASE-ID [--iut SPEC] [--io-log FILE]
  ptlrpc-conformance list [--requirement ID] [--area AREA] [--level MUST]
  ptlrpc-conformance verify-report DIR/report.json
  ptlrpc-conformance decode HEX [--direction request|reply] [--iut SPEC]
  ptlrpc-conformance lint-vectors [PATH ...]
  ptlrpc-conformance requirements
  ptlrpc-conformance export --format json [--out FILE]
  ptlrpc-conformance check-trace FILE [--json]      (JSON Lines or pcap)
  ptlrpc-conformance record-trace [--iut SPEC] [--scenario ID] [--profile NAME] [--out FILE]
  ptlrpc-conformance bench [--seconds S] [--quick] [--iut SPEC ...] [--json FILE]
  ptlrpc-conformance certification-doc DIR/report.json [--notes FILE] [--out FILE]
  ptlrpc-conformance mutants [--jobs N] [--mutant ID ...] [--json FILE] [--markdown FILE]
  ptlrpc-conformance serve --listen ADDR:PORT [--iut SPEC] [--accept-all] [--control PATH]
"""
from __future__ import annotations

import gc
import importlib
import os
import sys

from ptlrpc_conformance import __version__
from ptlrpc_conformance.harness.options import EXIT_FAIL, EXIT_OK, EXIT_USAGE, exit_status_text

# One module per command family, each taking its options from the one option table
# (harness/options.py); a family's module is imported only when one of its commands runs.
# Imports left inside a family's functions are those of one command that would slow the
# others: each comment gives the CPU time the import adds to `ptlrpc-conformance decode 00`,
# median of 15 runs on the project's 2-core machine.
COMMANDS: dict[str, tuple[str, str]] = {       # command -> (module of cli/, function)
    "certify": ("certify", "cmd_certify"),
    "run": ("certify", "cmd_run"),
    "list": ("certify", "cmd_list"),
    "verify-report": ("reports", "cmd_verify_report"),
    "decode": ("data", "cmd_decode"),
    "lint-vectors": ("data", "cmd_lint_vectors"),
    "requirements": ("data", "cmd_requirements"),
    "export": ("data", "cmd_export"),
    "check-trace": ("traces", "cmd_check_trace"),
    "record-trace": ("traces", "cmd_record_trace"),
    "bench": ("tools", "cmd_bench"),
    "certification-doc": ("reports", "cmd_certification_doc"),
    "mutants": ("tools", "cmd_mutants"),
    "serve": ("serve", "cmd_serve"),
}
SUBCOMMANDS = tuple(COMMANDS)


def usage() -> str:
    """What `--help` prints: the commands, then the exit statuses (harness/options.py)."""
    return f"{__doc__.strip()}\n\n{exit_status_text()}"


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv:
        print(usage())
        return EXIT_USAGE           # no command: say what there is, run nothing
    if argv[0] in ("-h", "--help"):
        print(usage())
        return EXIT_OK
    if argv and argv[0] == "--version":
        print(f"ptlrpc-conformance {__version__}")
        return EXIT_OK
    command = "certify"
    if argv and argv[0] in SUBCOMMANDS:
        command = argv.pop(0)
    elif argv and not argv[0].startswith("-"):
        print(f"ptlrpc-conformance: unknown command {argv[0]!r} (commands: {', '.join(SUBCOMMANDS)})",
              file=sys.stderr)
        return EXIT_USAGE
    module, function = COMMANDS[command]
    handler = getattr(importlib.import_module(f"{__name__}.{module}"), function)
    stdout = sys.stdout
    sys.stdout = QuietWhenClosed(stdout)
    try:
        return handler(argv)
    except KeyboardInterrupt:
        print("ptlrpc-conformance: interrupted", file=sys.stderr)
        return EXIT_FAIL
    finally:
        if sys.stdout.__class__ is QuietWhenClosed:
            sys.stdout.flush()      # what is left, now: a closed pipe met at exit would change the status
            sys.stdout = stdout


class QuietWhenClosed:
    """sys.stdout for a command: once its reader has closed the pipe (`certify | head -1`,
    `grep -m1`), what is still to print goes to /dev/null and the command carries on, so a
    closed stdout silences the output and nothing else: the report is written and the exit
    status is the verdict's."""

    def __init__(self, stream):
        self._stream = stream

    def _quiet(self, method: str, *args):
        try:
            return getattr(self._stream, method)(*args)
        except BrokenPipeError:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())     # the unwritten rest, and any later line
            os.close(devnull)
            return getattr(self._stream, method)(*args)

    def write(self, text: str) -> int:
        return self._quiet("write", text)

    def flush(self) -> None:
        self._quiet("flush")

    def __getattr__(self, name):
        return getattr(self._stream, name)


def entry() -> None:
    """The console command: main(), then the exit.  The run's objects are moved out of the
    garbage collector's sight first (gc.freeze): the interpreter's last collection walked
    them all, about 0.15 s of every run.  Not in main(), which tests call in-process."""
    status = main()
    gc.freeze()
    sys.exit(status)
