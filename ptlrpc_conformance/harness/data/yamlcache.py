"""Parsed YAML, remembered between runs by the text's content.

Every process of a certification (the command line, and each pytest-xdist worker) reads the
same vector and scenario files.  Building Python objects from 700 KB of YAML takes PyYAML
about 0.25 s a process even with libyaml's parser, and checking the vector files against
their JSON Schema about 0.1 s more; read back with `marshal`, the same objects take a few
milliseconds.  So the parse of a text is kept in a cache file named by the SHA-256 of the
text, and a vector file that passed the schema leaves a mark named by its text and the
schema's own digest: a changed file, a changed schema or a new release of this package
misses the cache and is read and checked again.

What the suite computes from those files once they are read, the cases derived from the vectors
(fixtures/core.py) and the bundled vectors and scenarios as objects (harness/data/vectors.py,
harness/ost/scenario_file.py), is kept the same way (`remember`): pickled, under a name that also covers
the computation's inputs and every file of the installed package (its path, size and time of
change), so that any change to the code or its data computes it afresh.  Bytes computed from the
package alone are kept the same way by kind and key (`keep` and `recall`: the HTML report's
compiled templates).

The cache lives in $PTLRPC_CONFORMANCE_CACHE, else $XDG_CACHE_HOME/ptlrpc-conformance, else
~/.cache/ptlrpc-conformance; PTLRPC_CONFORMANCE_CACHE=off turns it off.  It is only ever a
shortcut: a cache that cannot be read or written is ignored, never an error.  A directory
that is not the user's own, or that others may write to, is not used at all (it is created
mode 0700), since its entries are trusted.

Every change of the package's files names its computations afresh (about 8 MB a change), so
the cache is pruned (`prune`): when an entry is written (a miss, which follows a change), never
when one is read, the oldest entries by time of writing go until the cache holds at most
MAX_BYTES; the entries of the current code are the newest, and one pruned by mistake is only
computed again.
"""
from __future__ import annotations

import hashlib
import marshal
import os
import pathlib
import pickle
import re
import sys
import tempfile
import time
from typing import Any, Callable

import yaml

from ptlrpc_conformance import __version__

SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)   # libyaml's, 10x faster, when built
ENV = "PTLRPC_CONFORMANCE_CACHE"
# a cache entry is valid only for the release and the PyYAML that wrote it
_SALT = f"ptlrpc-conformance {__version__}; PyYAML {yaml.__version__}; marshal {marshal.version}\n"


def cache_dir() -> pathlib.Path | None:
    """The cache directory, or None when the cache is off."""
    env = os.environ.get(ENV)
    if env is not None:
        return None if env.strip().lower() in ("", "off", "0", "no") else pathlib.Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return pathlib.Path(base) / "ptlrpc-conformance"


def _usable() -> pathlib.Path | None:
    """The cache directory if it is private to this user (created so when missing), else None:
    an entry another user could have written is never read, nor a directory shared for writing."""
    where = cache_dir()
    if where is None:
        return None
    try:
        where.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = where.stat()
    except OSError:
        return None
    getuid = getattr(os, "getuid", None)
    if getuid is not None and (st.st_uid != getuid() or st.st_mode & 0o022):
        return None
    return where


def digest(*parts: str) -> str:
    h = hashlib.sha256(_SALT.encode())
    for p in parts:
        h.update(p.encode("utf-8", "surrogatepass"))
        h.update(b"\0")
    return h.hexdigest()


def load(text: str) -> Any:
    """yaml.safe_load(text), from the cache when this text was parsed before.  A text that does
    not parse raises yaml.YAMLError as safe_load does (and is not cached)."""
    where = _usable()
    path = where / f"{digest('parse', text)}.marshal" if where else None
    if path is not None:
        try:
            return marshal.loads(path.read_bytes())
        except (OSError, EOFError, ValueError, TypeError):
            pass                    # not cached yet, or unreadable: parse it
    data = yaml.load(text, Loader=SAFE_LOADER)
    if path is not None:
        try:
            _write(path, marshal.dumps(data))
        except (OSError, ValueError):
            pass                    # read-only home, full disk, an object marshal cannot write
    return data


_PACKAGE = pathlib.Path(__file__).resolve().parents[2]     # the ptlrpc_conformance directory
_fingerprint: list[str] = []


def package_fingerprint() -> str:
    """The digest of every file of the package as it is on disk now: path, size and time of
    last change (as Python's own bytecode cache judges a source file), computed once a process."""
    if not _fingerprint:
        h = hashlib.sha256()
        for top, dirs, files in os.walk(_PACKAGE):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(files):
                try:
                    st = os.stat(os.path.join(top, name))
                except OSError:
                    continue
                h.update(f"{os.path.relpath(os.path.join(top, name), _PACKAGE)}\0{st.st_size}\0{st.st_mtime_ns}\n"
                         .encode("utf-8", "surrogateescape"))
        _fingerprint.append(h.hexdigest())
    return _fingerprint[0]


def remember(kind: str, inputs: bytes, compute: Callable[[], Any]) -> Any:
    """compute(), or what it returned in an earlier run for the same `kind`, the same `inputs`
    (bytes that determine the result together with the package's code and data) and the same
    package files and Python.  The result must pickle; one that does not is just not kept."""
    where = _usable()
    path = None
    if where is not None:
        name = digest("remember", kind, sys.version, package_fingerprint(), hashlib.sha256(inputs).hexdigest())
        path = where / f"{name}.pickle"
        try:
            return pickle.loads(path.read_bytes())
        except (OSError, EOFError, ValueError, TypeError, AttributeError, ImportError, pickle.UnpicklingError):
            pass                    # not kept yet, or unreadable: compute it
    value = compute()
    if path is not None:
        try:
            _write(path, pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
        except (OSError, pickle.PicklingError, TypeError, AttributeError):
            pass
    return value


def recall(kind: str, key: str) -> bytes | None:
    """The bytes `keep(kind, key, ...)` stored in this or an earlier run of the same package
    files and Python, or None."""
    where = _usable()
    if where is None:
        return None
    try:
        return (where / f"{_kept_name(kind, key)}.bytes").read_bytes()
    except OSError:
        return None


def keep(kind: str, key: str, data: bytes) -> None:
    """Store `data` for `recall` (nothing when the cache is off or cannot be written)."""
    where = _usable()
    if where is not None:
        try:
            _write(where / f"{_kept_name(kind, key)}.bytes", data)
        except OSError:
            pass


def _kept_name(kind: str, key: str) -> str:
    return digest("keep", kind, sys.version, package_fingerprint(), key)


def known(*parts: str) -> bool:
    """Whether `mark(*parts)` was called before (in this or an earlier run)."""
    where = _usable()
    return bool(where) and (where / f"{digest('mark', *parts)}.ok").is_file()


def mark(*parts: str) -> None:
    """Remember a fact about `parts` (a text that passed a check)."""
    where = _usable()
    if where:
        try:
            _write(where / f"{digest('mark', *parts)}.ok", b"")
        except OSError:
            pass


def _write(path: pathlib.Path, data: bytes) -> None:
    """Write `path` whole or not at all (xdist workers may write the same entry at once), then
    prune the cache."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=_TMP)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    prune(path.parent)


# The most the cache keeps: the entries of about eight versions of the code (each about 8 MB,
# the derived cases and the bundled vectors and scenarios as objects, most of it).
MAX_BYTES = 64 << 20
_TMP = ".tmp-"
_ENTRY = re.compile(r"[0-9a-f]{64}\.(marshal|pickle|bytes|ok)")
_STALE_TMP_S = 3600             # a half-written file this old was left by a process that died


def prune(where: pathlib.Path, limit: int | None = None) -> None:
    """Delete the oldest entries of the cache in `where` (by time of writing) until the rest
    take at most `limit` bytes (default MAX_BYTES), and half-written files left behind.  Only
    the cache's own files are touched; one that vanished meanwhile (another process pruning)
    is skipped."""
    limit = MAX_BYTES if limit is None else limit
    entries, total, now = [], 0, time.time()
    try:
        with os.scandir(where) as it:
            for e in it:
                try:
                    if not e.is_file(follow_symlinks=False):
                        continue
                    st = e.stat(follow_symlinks=False)
                    if e.name.startswith(_TMP):
                        if now - st.st_mtime > _STALE_TMP_S:
                            os.unlink(e.path)
                    elif _ENTRY.fullmatch(e.name):
                        entries.append((st.st_mtime_ns, e.name, st.st_size, e.path))
                        total += st.st_size
                except OSError:
                    continue
    except OSError:
        return
    for _, _, size, path in sorted(entries):
        if total <= limit:
            break
        try:
            os.unlink(path)
        except OSError:
            pass
        total -= size
