"""The developer commands: `bench` (harness/tools/bench.py) and `mutants`
(harness/tools/mutation.py); each parses its own arguments."""
from __future__ import annotations


def cmd_bench(argv: list[str]) -> int:
    """Throughput of the harness and of IUTs on this machine (harness/tools/bench.py)."""
    from ptlrpc_conformance.harness.tools import bench      # with the vectors (jsonschema): +200 ms
    return bench.main(argv)


def cmd_mutants(argv: list[str]) -> int:
    """The suite against every mutant of the reference, with the mutation score (harness/tools/mutation.py)."""
    from ptlrpc_conformance.harness.tools import mutation   # with the mutants and registry: +90 ms
    return mutation.main(argv)
