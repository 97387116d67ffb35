"""Developer tools behind `ptlrpc-conformance bench` and `ptlrpc-conformance mutants`."""
