"""Adapter loaders: from an --iut value to a (not yet started) adapter.

  reference                       the bundled reference, in-process
  reference:RELEASE               the same, behaving as that Lustre release's code (2.15.8)
  python:package.module:factory   factory() returns an object with handle(request) -> response
  exec:COMMAND                    a process speaking the protocol on stdin/stdout
  tshark[:PROGRAM]                Wireshark's Lustre dissector (decode only)
  lnet-tcp:NID?target=UUID&...    a live OST over LNet TCP (lnet_tcp.py; docs/live.md)
  client:COMMAND                  an LNet client the suite runs against its own served OST
                                  (`certify --client COMMAND`; harness/ost/client_run.py)
"""
from __future__ import annotations

import importlib
import os
import shlex
import sys

from ptlrpc_conformance.harness.transport.adapter import (
    DEFAULT_TIMEOUT, Adapter, InProcessAdapter, IUTStartError, UsageError)
from ptlrpc_conformance.harness.transport.exec import ExecAdapter


def load_adapter(spec: str | None, timeout: float = DEFAULT_TIMEOUT, io_log: str | None = None,
                 scratch_target: str | None = None, pcap: str | None = None) -> Adapter:
    """Build the adapter an --iut value names (not started yet); `io_log` names a file that
    records every protocol line exchanged; `scratch_target` (--scratch-target) and `pcap` (the
    capture of its traffic) are for an lnet-tcp: IUT."""
    if (spec or "").strip().startswith("lnet-tcp:"):
        from ptlrpc_conformance.harness.transport import lnet_tcp     # the LNet engine only when it is the IUT
        adapter = lnet_tcp.make(spec.strip(), timeout, scratch_target=scratch_target, pcap=pcap)
    else:
        adapter = _load(spec, timeout)
    if io_log:
        adapter.io_log = open(io_log, "a", encoding="utf-8")
    return adapter


def _load(spec: str | None, timeout: float) -> Adapter:
    spec = (spec or "reference").strip()
    if spec == "reference":
        from ptlrpc_conformance.reference import make_testee    # the reference only when it is the IUT
        return InProcessAdapter(make_testee(), description="reference")
    if spec.startswith("reference:"):       # the reference decoding as an older release's code does
        from ptlrpc_conformance.harness.data import registry
        rel = spec[len("reference:"):]
        try:
            registry.release(rel)
        except registry.RegistryError as e:
            raise UsageError(f"--iut {spec!r}: {e}") from None
        from ptlrpc_conformance.reference import release_testee
        return InProcessAdapter(release_testee(rel), description=spec)
    if spec.startswith("python:"):
        target = spec[len("python:"):]
        module_name, sep, attr = target.partition(":")
        if not sep or not module_name or not attr:
            raise UsageError(f"--iut {spec!r}: expected python:package.module:factory")
        _importable_from_cwd()
        try:
            module = importlib.import_module(module_name)
        except Exception as e:
            # the IUT cannot start, as an exec: command that cannot run: exit 3, with a report
            raise IUTStartError(f"--iut {spec!r}: cannot import {module_name}: {type(e).__name__}: {e}") from None
        factory = getattr(module, attr, None)
        if factory is None or not callable(factory):
            raise IUTStartError(f"--iut {spec!r}: {module_name} has no callable {attr!r}")
        try:
            obj = factory()
        except Exception as e:
            raise IUTStartError(f"--iut {spec!r}: the factory raised {type(e).__name__}: {e}") from None
        return InProcessAdapter(obj, description=spec)
    if spec == "tshark" or spec.startswith("tshark:"):   # Wireshark's Lustre dissector, decode only
        from ptlrpc_conformance.harness.transport import tshark     # its capture code only when it is the IUT
        return tshark.make(spec[len("tshark:"):] if spec.startswith("tshark:") else None, timeout=timeout)
    if spec.startswith("client:"):
        command = spec[len("client:"):].strip()
        try:
            argv = shlex.split(command)
        except ValueError as e:
            raise UsageError(f"--client {command!r}: {e}") from None
        if not argv:
            raise UsageError("--client: give the command that starts the client")
        return InProcessAdapter(ClientUnderTest(command), description=spec)
    if spec.startswith("exec:"):
        command = spec[len("exec:"):].strip()
        try:
            return ExecAdapter(command, timeout=timeout)
        except ValueError as e:   # shlex: unbalanced quotes
            raise UsageError(f"--iut {spec!r}: {e}") from None
    raise UsageError(f"--iut {spec!r}: expected 'reference[:RELEASE]', 'python:package.module:factory', 'exec:COMMAND', "
                     "'tshark[:PROGRAM]', 'lnet-tcp:NID?target=UUID' or 'client:COMMAND'")


class ClientUnderTest:
    """The IUT of `certify --client COMMAND`: a client, which answers no testee operation (the
    suite does not call it; it runs `command` against its own served OST: the client cases,
    suites/test_client.py).  Its hello declares capability `client` and names the command."""

    def __init__(self, command: str):
        self.command = command

    def handle(self, request: dict) -> dict:
        if request.get("op") == "hello":
            argv = shlex.split(self.command)
            program = argv[1] if os.path.basename(argv[0]).startswith("python") and len(argv) > 1 else argv[0]
            return {"id": request.get("id"), "ok": True,
                    "result": {"name": f"client {os.path.basename(program)}", "version": "(as started)",
                               "capabilities": ["client"], "protocol": 1}}
        return {"id": request.get("id"), "ok": False, "error": "EOPNOTSUPP",
                "detail": "a client under test answers no testee operation"}


def _importable_from_cwd() -> None:
    """A python: IUT is imported as `python3 -m ptlrpc_conformance` imports it, with the current
    directory first on sys.path: the console script, whose sys.path starts with its own
    directory instead, finds a testee.py of the current directory too."""
    cwd = os.getcwd()
    if not any(p in ("", ".", cwd) for p in sys.path):
        sys.path.insert(0, cwd)


def smoke_check(adapter) -> list[dict]:
    """Before a run: the testee answers an unknown op with EOPNOTSUPP and echoes ids (the
    exec adapter checks every id).  Problems are harness/protocol errors, reported apart."""
    checks = []
    out = adapter.call({"op": "x-smoke-unknown-op"}, probe=True)
    checks.append({"check": "unknown op answered EOPNOTSUPP",
                   "ok": out.rejected and out.error == "EOPNOTSUPP", "detail": out.describe()})
    again = adapter.call({"op": "hello"}, probe=True)
    checks.append({"check": "hello answered again, ids echoed", "ok": again.ok, "detail": again.describe()})
    return checks
