"""Compatibility path (documented before the harness was split by job): the adapter
interface now lives in `ptlrpc_conformance.harness.transport`. New code imports from there."""
from ptlrpc_conformance.harness.transport.adapter import (  # noqa: F401
    DEFAULT_TIMEOUT, Adapter, InProcessAdapter, IUTStartError, NotApplicable, UsageError)
from ptlrpc_conformance.harness.transport.exec import ExecAdapter, kill_and_reap  # noqa: F401
from ptlrpc_conformance.harness.transport.loader import load_adapter  # noqa: F401
from ptlrpc_conformance.harness.transport.protocol import Hello, Outcome  # noqa: F401
