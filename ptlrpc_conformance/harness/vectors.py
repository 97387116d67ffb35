"""Compatibility path (documented before the harness was split by job): golden vectors are
now loaded by `ptlrpc_conformance.harness.data.vectors`. New code imports from there."""
from ptlrpc_conformance.harness.data.vectors import *  # noqa: F401,F403
from ptlrpc_conformance.harness.data.vectors import Vector, VectorError, load_all, load_file  # noqa: F401
