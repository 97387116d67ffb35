"""Transports: how a request reaches an implementation under test and its answer comes back."""

# an IUT's per-call timeout unless --iut-timeout says otherwise; here, not in adapter.py, so
# that the option table (harness/options.py) can name it without importing the transports
DEFAULT_TIMEOUT = 5.0
