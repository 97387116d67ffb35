"""The pytest plugin (entry point `pytest11`): options, the `conformance` marker, the fixtures.

Loaded into every pytest run of an environment where the package is installed, so loading it
costs next to nothing: this module imports no other module at all (not even pytest, which
the run has loaded anyway), and until a session uses the suite the plugin does no more than
register its options (harness/options.py), its marker and its fixtures (fixtures/core.py,
whose fixtures import what they need when a test asks for them).

A session uses the suite when
  - it is given a conformance option (--iut, --conformance-report or any other of the
    plugin's options) or names the bundled suites (`--pyargs ptlrpc_conformance.suites`, a
    path into them): decided when pytest configures the run;
  - it collects a case of the bundled suites, a test with the `conformance` marker or a test
    that asks for one of the plugin's fixtures (`iut`, `conclude`, ...);
  - an xdist worker reports a conformance case, or a usage error, to the controller.
Then `activate` registers plugin/hooks.py, which holds the hooks of such a session: the
report's collector, the run limits, the IUT preflight, case ids, the selection.  The preflight
runs only with an explicit --iut or --conformance-report (both decided at the start), the
report is written only with --conformance-report.
"""
from __future__ import annotations

MARKER = "conformance"
HOOKS = "ptlrpc_conformance.plugin.hooks"        # the hooks module, registered under its name
FIXTURES = "ptlrpc_conformance.fixtures.core"
SUITES = "ptlrpc_conformance.suites"
# the fixtures whose cases pytest_generate_tests makes from the vectors (fixtures/core.py)
VECTOR_FIXTURES = frozenset({"derived_case", "decode_vector", "encode_vector", "struct_vector",
                             "encode_struct_vector"})
# the fixtures of fixtures/core.py: a test that asks for one uses the suite
FIXTURE_NAMES = frozenset({"iut", "iut_hello", "conformance_profile", "errno_agnostic", "conclude", "need",
                           "conformance_seed", "conformance_examples", "run_settings"}) | VECTOR_FIXTURES


def pytest_addoption(parser):
    from ptlrpc_conformance.harness.options import add_pytest_options
    add_pytest_options(parser.getgroup("ptlrpc-conformance", "PtlRPC conformance suite"))


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        f"{MARKER}(case, requirements, area=None): a conformance case with its declared case id and the "
        "requirement ids it checks")
    from ptlrpc_conformance.fixtures import core
    if not config.pluginmanager.has_plugin(FIXTURES):
        config.pluginmanager.register(core, FIXTURES)
    config.stash[core.ACTIVATE] = activate        # the fixtures that use the suite call it
    if not hasattr(config, "workerinput") and config.pluginmanager.has_plugin("xdist"):
        config.pluginmanager.register(_ControllerWatch(config), "ptlrpc_conformance.watch")
    if _asked(config):
        activate(config)


def activate(config, session=None):
    """Make the session one that uses the suite (see the module's text): register the hooks
    module, whose pytest_configure runs at once (a historic hook).  Returns the module; a
    second call does nothing more.  `session`: the session when it has started already (the
    run limits need it)."""
    if config.pluginmanager.get_plugin(HOOKS) is None:
        from ptlrpc_conformance.plugin import hooks
        config.pluginmanager.register(hooks, HOOKS)
        limits = config.pluginmanager.get_plugin("ptlrpc_conformance.limits")
        if session is not None and limits is not None:
            limits.pytest_sessionstart(session)
    return config.pluginmanager.get_plugin(HOOKS)


def active(config) -> bool:
    """Whether the session uses the suite (activate was called)."""
    return config.pluginmanager.get_plugin(HOOKS) is not None


def _asked(config) -> bool:
    """Whether the command line asks for the suite: a conformance option given (a value other
    than its default), or the bundled suites named."""
    from ptlrpc_conformance.harness.options import OPTIONS
    for o in OPTIONS:
        if o.pytest and o.plugin and config.getoption(o.config_dest) != o.kwargs(for_pytest=True)["default"]:
            return True
    return any(_names_the_suites(str(arg)) for arg in config.args)


def _names_the_suites(arg: str) -> bool:
    import os
    if arg == SUITES or arg.startswith(SUITES + ".") or arg.startswith(SUITES + "::"):
        return True
    suites = os.path.join(os.path.dirname(os.path.abspath(__file__)), "suites")
    path = os.path.abspath(arg.split("::")[0])
    return path == suites or path.startswith(suites + os.sep)


def _uses_the_suite(item) -> bool:
    module = getattr(getattr(item, "module", None), "__name__", "") or ""
    return (module.startswith(SUITES + ".") or item.get_closest_marker(MARKER) is not None
            or not FIXTURE_NAMES.isdisjoint(getattr(item, "fixturenames", ())))


def pytest_collection_modifyitems(session, config, items):
    """A session not yet using the suite starts to when it collected a case (the hooks module
    then checks and marks the cases, as it does in a session that used the suite from the start)."""
    if active(config) or not any(_uses_the_suite(item) for item in items):
        return
    activate(config, session).pytest_collection_modifyitems(session, config, items)


def pytest_generate_tests(metafunc):
    if VECTOR_FIXTURES.intersection(metafunc.fixturenames):
        from ptlrpc_conformance.fixtures import core
        core.generate_vector_cases(metafunc)


class _ControllerWatch:
    """On xdist's controller.  It collects nothing, so it learns that the session uses the
    suite from its workers: the first report of a conformance case, or a worker's usage error
    or deselected cases at its end.  What the hooks module would have done with that first
    message is done here (it was registered after the hook was called).  It also tells each
    worker the scheduling, which a session that starts to use the suite on the worker needs
    (a worker's own config.option.dist is "no": hooks.long_cases_first)."""

    def __init__(self, config):
        self.config = config

    def pytest_configure_node(self, node):
        node.workerinput["conformance_dist"] = getattr(node.config.option, "dist", None)

    def pytest_runtest_logreport(self, report):
        if active(self.config) or not any(k == "case_id" for k, _ in getattr(report, "user_properties", ())):
            return
        activate(self.config)
        from ptlrpc_conformance.harness.runstate import COLLECTOR
        collector = self.config.stash.get(COLLECTOR, None)
        if collector is not None:
            collector.pytest_runtest_logreport(report)

    def pytest_testnodedown(self, node, error):
        output = getattr(node, "workeroutput", None) or {}
        if active(self.config) or not any(k.startswith("conformance_") for k in output):
            return
        activate(self.config).pytest_testnodedown(node, error)
