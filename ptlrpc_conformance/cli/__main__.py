"""`python -m ptlrpc_conformance.cli` is the `ptlrpc-conformance` command."""
from ptlrpc_conformance.cli import entry

entry()
