"""Outputs: report.json, report.html, the regression gate, certification documents, hex dumps."""
from __future__ import annotations

import os
import pathlib


def write_atomically(path: str | os.PathLike, text: str) -> pathlib.Path:
    """Write `text` to `path` through a temporary file beside it and a rename, so that a reader
    never sees half a file (the directory is created)."""
    p = pathlib.Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_suffix(p.suffix + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(p)
    return p
