"""Transports: how a request reaches an implementation under test and its answer comes back."""
