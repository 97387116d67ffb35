"""Verdicts: the suite's own rule model, derived variants and the judge of each case."""
