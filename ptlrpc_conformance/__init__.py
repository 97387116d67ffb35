"""ptlrpc-conformance: a conformance test suite for Lustre's PtlRPC wire protocol."""
__version__ = "0.1.0"
