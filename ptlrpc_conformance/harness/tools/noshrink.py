"""A pytest plugin that `ptlrpc-conformance mutants` loads into each mutant's run
(`certify ... -- -p ptlrpc_conformance.harness.tools.noshrink`): Hypothesis does not shrink
counterexamples.

Shrinking only looks for a smaller example of a failure already found, so it changes no
verdict - the same cases fail, from the same seed - only the size of the example a failure
reports; and it is most of the time a failing property or stateful case takes.  The suites'
own settings leave `phases` alone, so this profile's phases apply to them.
"""
from hypothesis import Phase, settings

PROFILE = "ptlrpc-conformance-mutants"

settings.register_profile(PROFILE, phases=[p for p in Phase if p.name not in ("shrink", "explain")])
settings.load_profile(PROFILE)
