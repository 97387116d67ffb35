"""A run's settings are resolved once, into one object (harness/settings.py), and nothing of
one run's profile outlives it: two runs in one process (the release matrix, a plugin user's
two pytest.main calls) each follow their own, and code outside a run follows the default."""
import json

import pytest

from ptlrpc_conformance.harness.data import registry
from ptlrpc_conformance.harness.verdicts import release

# a big-endian expectation that 2.15.8 reads otherwise than the default release (lm_opc was padding)
BIG_ENDIAN = {"byte_order": "big", "header": {"lm_opc": 0x01020304}, "body": {"pb_opc": 1}}

USER_TEST = """
import json, pathlib

def test_settings(run_settings, conformance_profile, conformance_seed, conformance_examples, request):
    seen = {"profile": conformance_profile, "release": run_settings.release, "literal": run_settings.literal,
            "reconstruct": run_settings.reconstruct, "seed": conformance_seed, "examples": conformance_examples,
            "strict": run_settings.strict, "ignore_errno_class": run_settings.ignore_errno_class}
    assert run_settings.profile == conformance_profile and run_settings.seed == conformance_seed
    pathlib.Path(request.config.rootpath, "seen.json").write_text(json.dumps(seen))
"""


def _run(pytester, *args) -> dict:
    pytester.makepyfile(test_user=USER_TEST)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", *args)
    result.assert_outcomes(passed=1)
    return json.loads((pytester.path / "seen.json").read_text())


def test_two_runs_in_one_process_follow_their_own_profile(pytester):
    first = _run(pytester, "--conformance-profile", "lustre-2.15.8-literal", "--conformance-seed", "7",
                 "--conformance-examples", "3", "--conformance-strict", "--ignore-errno-class")
    assert first == {"profile": "lustre-2.15.8-literal", "release": "2.15.8", "literal": True, "reconstruct": False,
                     "seed": 7, "examples": 3, "strict": True, "ignore_errno_class": True}
    second = _run(pytester)
    assert second["profile"] == registry.default_profile() and second["release"] == "2.17.57"
    assert not second["literal"] and not second["strict"] and not second["ignore_errno_class"]


def test_a_run_leaves_no_release_behind(pytester):
    """After a run under lustre-2.15.8, code outside a run (check-trace, decode, a test) reads an
    expectation as the default release does: the module-level "active release" the plugin used
    to set kept 2.15.8's reading after the run."""
    pytester.makepyfile(test_user="def test_x(conformance_profile):\n    assert conformance_profile == 'lustre-2.15.8'\n")
    pytester.runpytest_inprocess("-p", "no:cacheprovider", "--conformance-profile", "lustre-2.15.8"
                                 ).assert_outcomes(passed=1)
    assert release.view(BIG_ENDIAN) == BIG_ENDIAN
    assert release.view(BIG_ENDIAN, "2.15.8")["header"]["lm_opc"] == 0x04030201


def test_the_release_module_keeps_no_run_state():
    """verdicts/release.py has no setter and no module-level state of a run: the release is an
    argument (the run's is in its settings)."""
    assert not hasattr(release, "use") and not hasattr(release, "active")
    state = {k for k, v in vars(release).items() if not k.startswith("__") and not callable(v)
             and not isinstance(v, type(release)) and k not in ("annotations", "TARGET_FACTS", "_SECTIONS")}
    assert state == set()


def test_settings_of_a_profile():
    from ptlrpc_conformance.harness import settings
    s = settings.for_profile("lustre-2.17.57-reconstruct", seed=1)
    assert (s.profile, s.release, s.literal, s.reconstruct, s.seed) == ("lustre-2.17.57-reconstruct", "2.17.57",
                                                                       False, True, 1)
    assert settings.for_profile(None).profile == registry.default_profile()
    with pytest.raises(registry.RegistryError):
        settings.for_profile("lustre-9.9")
    with pytest.raises(AttributeError):          # frozen: a reader cannot change the run's settings
        s.release = "2.15.8"
