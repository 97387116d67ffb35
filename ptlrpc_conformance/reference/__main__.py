"""`python -m ptlrpc_conformance.reference`: serve testee protocol v1 on stdin/stdout."""
import sys

from .testee import main

sys.exit(main())
