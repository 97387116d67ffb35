"""The wire facts of each Lustre release the suite knows, one JSON file per release
(<release>.json, e.g. 2.15.8.json), generated from that release's own code by
tools/gen_release_facts.py.  docs/releases-facts.md describes the format.

Standard library only, so that the bundled reference implementation can read them too.

    from ptlrpc_conformance.spec import releases
    releases.known()                         # ['2.12.9', '2.15.8', '2.16.1', '2.17.0', '2.17.57']
    releases.load("2.15.8")["unswabbed"]["ptlrpc_body_v3"]
"""
from __future__ import annotations

import functools
import json
import re
from importlib import resources

FORMAT = "ptlrpc-conformance-release/1"


class UnknownRelease(KeyError):
    """No facts file for the release asked for."""

    def __str__(self) -> str:      # KeyError would print the repr of its argument
        return self.args[0]


def _version_key(release: str) -> tuple[int, ...]:
    return tuple(int(part) for part in release.split("."))


@functools.lru_cache(maxsize=1)
def known() -> list[str]:
    """The releases that have a facts file, oldest first."""
    names = [p.name[:-5] for p in resources.files(__name__).iterdir()
             if p.name.endswith(".json") and re.fullmatch(r"\d+\.\d+\.\d+\.json", p.name)]
    return sorted(names, key=_version_key)


@functools.lru_cache(maxsize=None)
def load(release: str) -> dict:
    """The facts of one release (e.g. "2.15.8"), shared between callers: do not modify it.
    UnknownRelease (a KeyError) names the known ones."""
    if release not in known():
        raise UnknownRelease(f"no facts for Lustre release {release!r}; known releases: {', '.join(known())}")
    data = json.loads(resources.files(__name__).joinpath(f"{release}.json").read_text(encoding="utf-8"))
    if data.get("format") != FORMAT:
        raise ValueError(f"{release}.json: format {data.get('format')!r}, expected {FORMAT!r}")
    return data
