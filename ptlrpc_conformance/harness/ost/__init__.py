"""The suite's side of a target (an OST): requests, expectations, invariants, sessions, scenarios."""
