"""`python -m ptlrpc_conformance` is the `ptlrpc-conformance` command."""
from .cli import entry

entry()
