"""What several commands share: the IUT's preflight (load the adapter, start it, say why it
could not) and the pytest arguments that run the bundled suites."""
from __future__ import annotations

import sys
from importlib import resources

from ptlrpc_conformance.harness.options import EXIT_IUT, EXIT_USAGE
from ptlrpc_conformance.harness.transport.adapter import IUTStartError, UsageError
from ptlrpc_conformance.harness.transport.loader import load_adapter


def suites_args() -> list[str]:
    """The pytest arguments that collect the bundled suites with their own pytest.ini, wherever
    the package is installed."""
    suites = resources.files("ptlrpc_conformance.suites")
    return ["-c", str(suites.joinpath("pytest.ini")), "--rootdir", str(suites), "--pyargs", "ptlrpc_conformance.suites"]


def iut_preflight(spec: str, timeout: float, **live):
    """(None, the started adapter), or (exit status, None) after a usage error, or (EXIT_IUT,
    why) when the IUT could not start; the problem is printed.  `live`: load_adapter's options
    of an lnet-tcp: IUT (scratch_target, pcap)."""
    try:
        adapter = load_adapter(spec, timeout=timeout, **live)
    except UsageError as e:
        print(f"ptlrpc-conformance: {e}", file=sys.stderr)
        return EXIT_USAGE, None
    except IUTStartError as e:
        return could_not_start(e)
    try:
        adapter.start()
    except IUTStartError as e:
        return could_not_start(e)
    return None, adapter


def could_not_start(e: Exception) -> tuple[int, str]:
    """(EXIT_IUT, why): the preflight's answer when the IUT could not start."""
    print(f"ptlrpc-conformance: the IUT could not start: {e}", file=sys.stderr)
    return EXIT_IUT, str(e)
