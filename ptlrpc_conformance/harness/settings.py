"""The settings one run's verdicts follow, resolved once.

A run's profile (its Lustre release and modifiers), its seed, its examples budget and its
relaxing options are read from the pytest options in one place, `of(config)`, the first time
anything asks, and kept in the config's stash: every process of the run (the command line's,
each xdist worker's) builds its own from its own config, and the suites, fixtures, plugin and
report read that one object.  Nothing is kept at module level, so two runs in one process
(the release matrix, a plugin user's two `pytest.main` calls) never see each other's.

The harness below the suites (verdicts/, ost/) takes the release as an argument; a caller
outside a run gets the default profile's (`for_profile(None)`).
"""
from __future__ import annotations

from dataclasses import dataclass

import pytest

from ptlrpc_conformance.harness.data import registry


@dataclass(frozen=True)
class RunSettings:
    profile: str                    # the profile's name, e.g. lustre-2.15.8-literal
    release: str                    # the Lustre release its verdicts follow, e.g. 2.15.8
    literal: bool = False           # the profile tolerates the release's own bugs
    reconstruct: bool = False       # resends must be answered with the original reply
    seed: int | None = None         # the Hypothesis seed of the property and stateful cases
    examples: int | None = None     # examples per property case
    strict: bool = False            # SHOULD failures fail the run
    ignore_errno_class: bool = False    # --ignore-errno-class (the IUT's hello may ask it too)


def for_profile(name: str | None, **rest) -> RunSettings:
    """The settings of profile `name` (None: the default profile); raises RegistryError for
    an unknown name."""
    prof = registry.profile(name)
    return RunSettings(profile=prof.name, release=prof.release, literal=prof.has("literal"),
                       reconstruct=prof.has("reconstruct"), **rest)


_SETTINGS = pytest.StashKey[RunSettings]()


def of(config) -> RunSettings:
    """The run's settings, resolved from `config`'s options the first time (an unknown profile
    is a usage error)."""
    if _SETTINGS not in config.stash:
        try:
            settings = for_profile(config.getoption("conformance_profile") or registry.default_profile(),
                                   seed=config.getoption("conformance_seed"),
                                   examples=config.getoption("conformance_examples"),
                                   strict=bool(config.getoption("conformance_strict")),
                                   ignore_errno_class=bool(config.getoption("ignore_errno_class")))
        except registry.RegistryError as e:
            raise pytest.UsageError(str(e)) from None
        config.stash[_SETTINGS] = settings
    return config.stash[_SETTINGS]
