"""`python -m ptlrpc_conformance` is the `ptlrpc-conformance` command."""
import sys

from .cli import main

sys.exit(main())
