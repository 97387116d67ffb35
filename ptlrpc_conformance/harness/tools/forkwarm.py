"""Imported by the fork server of harness/tools/mutation.py only (the last of its preloads but
one): reads once, in the server, the data every run reads at its start and keeps in memory -
the bundled vectors, the requirements and profiles, the release differences (the
structure cut cases read them in every collection), the package's fingerprint - so that each
forked run finds them read, as a second run in one process would.  What a run computes from
them for its own profile, vectors and options it still computes itself.  (The bundled
scenarios are not kept in memory: each run reads them from the parse cache, as a list it adds
the user's to.)

About 0.1 s of each of the few hundred forked runs of `mutants` and of the project's tests
(docs/performance.md).  The data are the package's own files, which a run cannot change; a run
of another copy of the package is never forked from this server (conftest.py `cli_process`)."""
from ptlrpc_conformance.harness.data import registry, vectors, yamlcache
from ptlrpc_conformance.spec import release_differences


def warm() -> None:
    for read in (yamlcache.package_fingerprint, vectors.load_all, registry.profiles,
                 registry.requirements, registry.case_aliases, release_differences.differences):
        try:
            read()
        except Exception:       # noqa: BLE001 - a run reads it again and reports what is wrong with it
            pass


warm()
