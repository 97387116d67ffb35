#!/usr/bin/env python3
"""Extract Lustre's message-unpacking code from a lustre-release tree, for the Lustre testee.

    python3 extract.py --lustre /path/to/lustre-release --out build/lustre_extract.c

`lustre/ptlrpc/pack_generic.c` as a whole cannot be compiled in user space (it includes
lustre_net.h: kobjects, rhashtables, LNet, lu_objects).  This script copies, verbatim and
with `#line` directives pointing back at the tree, only

  * the functions named in EXTRACT (from the files named there), and
  * the macros and enum definitions those functions use, found by following every
    identifier through the headers named in HEADERS, transitively,

into one C file that `main.c` includes after `lustre_shim.h` (the project's own stand-ins
for the kernel facilities) and the tree's uapi `lustre_idl.h` (included whole).  Macros
that header or the shim already define are not copied.  Nothing here is Lustre's code; the
output, in the git-ignored build/ folder, is, and must not be committed or published.

The output starts with a comment recording the tree, the Lustre version (git describe, else
LUSTRE-VERSION-FILE, else LUSTRE-VERSION-GEN's DEFAULT_VERSION) and the sha256 of every
source file read; `--info FILE` also writes that as JSON for the testee's hello.
Errors (a missing file, a function not found, unbalanced braces) name the file and exit 2.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import pathlib
import re
import subprocess
import sys

# (file in the tree, functions defined there), in the order they are emitted.  A file may be
# a tuple of the files the functions may be in (the first that defines them is used); an
# entry may also be a tuple of alternatives, each a tuple of such entries: the first
# alternative whose first function the tree defines is extracted.
EXTRACT = (
    (
        # 2.15 and later: the swab masks are the request capsule's
        (("lustre/include/lustre_req_layout.h", ("req_capsule_req_swabbed", "req_capsule_rep_swabbed",
                                                 "req_capsule_set_req_swabbed", "req_capsule_set_rep_swabbed")),
         # lustre_req_layout.h in 2.15, lustre_net.h from 2.16
         (("lustre/include/lustre_net.h", "lustre/include/lustre_req_layout.h"),
          ("req_capsule_req_need_swab", "req_capsule_rep_need_swab")),
         ("lustre/ptlrpc/layout.c", ("req_capsule_set_swabbed", "req_capsule_need_swab"))),
        # 2.12: the request's
        (("lustre/include/lustre_net.h", ("lustre_req_swabbed", "lustre_rep_swabbed", "ptlrpc_req_need_swab",
                                          "ptlrpc_rep_need_swab", "lustre_set_req_swabbed",
                                          "lustre_set_rep_swabbed")),
         ("lustre/ptlrpc/pack_generic.c", ("ptlrpc_buf_set_swabbed", "ptlrpc_buf_need_swab"))),
    ),
    ("lustre/ptlrpc/pack_generic.c", (
        "lustre_msg_hdr_size_v2", "lustre_msg_buf_v2", "lustre_msg_buflen_v2", "lustre_msg_buflen",
        "lustre_msg_ptlrpc_body", "lustre_msg_get_type", "lustre_msg_get_opc", "lustre_msg_get_jobid",
        "lustre_msg_calc_cksum", "lustre_unpack_msg_v2", "__lustre_unpack_msg", "ptlrpc_unpack_req_msg",
        "ptlrpc_unpack_rep_msg", "lustre_unpack_ptlrpc_body_v2", "lustre_unpack_req_ptlrpc_body",
        "lustre_unpack_rep_ptlrpc_body", "lustre_swab_ptlrpc_body")),
)
# macros and enums named here are copied even when no extracted function uses them
SEEDS = ("WIRE_FLVR", "SPTLRPC_FLVR_POLICY", "SPTLRPC_FLVR_NULL", "SPTLRPC_POLICY_NULL", "RCL_CLIENT")
# where macros and enums are looked up
HEADERS = ("lustre/include/lustre_net.h", "lustre/include/lustre_req_layout.h", "lustre/include/lustre_sec.h")
# where the uapi headers are: include/uapi from 2.17.57 on; before, lustre/include/uapi for
# Lustre's and lnet/include/uapi for LNet's (which lustre_idl.h includes from 2.15 on)
UAPI_DIRS = ("include/uapi", "lustre/include/uapi", "lnet/include/uapi")
IDL = "linux/lustre/lustre_idl.h"
# the structures whose members the output lists (LUSTRE_EXTRACT_FIELD_<member>), so that the
# testee knows which of today's fields a release has (older ones call some of them padding)
FIELDS_OF = ("lustre_msg_v2", "ptlrpc_body_v3")

IDENT = re.compile(r"[A-Za-z_]\w*")
RESET = "/* @@line-reset@@ */"        # replaced by a #line naming the output file again


class ExtractError(Exception):
    pass


def read(tree: pathlib.Path, rel: str) -> str:
    path = tree / rel
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError as e:
        raise ExtractError(f"{path}: cannot read: {e.strerror or e}") from None


def _skip_literal(text: str, i: int) -> int:
    """Index after the comment, string or character literal starting at i (or i)."""
    if text.startswith("/*", i):
        end = text.find("*/", i + 2)
        return len(text) if end < 0 else end + 2
    if text.startswith("//", i):
        end = text.find("\n", i)
        return len(text) if end < 0 else end
    if text[i] in "\"'":
        q, j = text[i], i + 1
        while j < len(text) and text[j] != q:
            j += 2 if text[j] == "\\" else 1
        return j + 1
    return i


def match_brace(text: str, start: int, where: str) -> int:
    """Index just after the brace matching the one at `start`."""
    depth, i = 0, start
    while i < len(text):
        j = _skip_literal(text, i)
        if j != i:
            i = j
            continue
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    raise ExtractError(f"{where}: unbalanced braces")


def top_level_spans(text: str) -> list[tuple[int, int]]:
    """Spans of text at brace depth 0, comments and literals excluded."""
    spans, depth, i, start = [], 0, 0, 0
    while i < len(text):
        j = _skip_literal(text, i)
        if j != i:
            if depth == 0:
                spans.append((start, i))
                start = j
            i = j
            continue
        c = text[i]
        if c == "{":
            if depth == 0:
                spans.append((start, i))
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                start = i + 1
        i += 1
    if depth == 0:
        spans.append((start, len(text)))
    return spans


def find_function(text: str, name: str, where: str) -> tuple[int, int, int, int]:
    """(start of the definition, end of its parameter list, end of the body, line number)."""
    for a, b in top_level_spans(text):
        for m in re.finditer(rf"(?<![\w.>]){re.escape(name)}\s*\(", text[a:b]):
            paren = a + m.end() - 1
            close, depth = paren, 0
            while close < len(text):
                if text[close] == "(":
                    depth += 1
                elif text[close] == ")":
                    depth -= 1
                    if depth == 0:
                        break
                close += 1
            k = close + 1
            while k < len(text) and text[k] in " \t\n":
                k += 1
            if k >= len(text) or text[k] != "{":
                continue                       # a declaration or a call, not the definition
            # the declaration starts after the previous top-level statement, comment or directive
            head = a + m.start()
            line_start = text.rfind("\n", 0, head) + 1
            while line_start > 0:
                prev_start = text.rfind("\n", 0, line_start - 1) + 1
                prev = text[prev_start:line_start - 1].rstrip()
                if not prev or prev.endswith((";", "}", "*/", "{")) or prev.lstrip().startswith(("#", "/", "*")):
                    break
                line_start = prev_start
            end = match_brace(text, k, f"{where}: {name}")
            return line_start, close + 1, end, text.count("\n", 0, line_start) + 1
    raise ExtractError(f"{where}: no definition of {name}()")


def macro_index(text: str, rel: str) -> dict[str, tuple[str, str]]:
    """#define NAME ... (continuations joined) -> (definition text, where); the first wins."""
    out: dict[str, tuple[str, str]] = {}
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        m = re.match(r"\s*#\s*define\s+([A-Za-z_]\w*)", lines[i])
        if m:
            start = i
            while lines[i].endswith("\\") and i + 1 < len(lines):
                i += 1
            out.setdefault(m.group(1), ("\n".join(lines[start:i + 1]), f"{rel}:{start + 1}"))
        i += 1
    return out


def enum_index(text: str, rel: str) -> dict[str, tuple[str, str, str]]:
    """enumerator or enum tag -> (enum tag, definition text, where)."""
    out: dict[str, tuple[str, str, str]] = {}
    for m in re.finditer(r"^enum\s+(\w+)\s*\{", text, re.M):
        end = match_brace(text, m.end() - 1, f"{rel}: enum {m.group(1)}")
        semi = text.find(";", end)
        body = text[m.start():semi + 1]
        where = f"{rel}:{text.count(chr(10), 0, m.start()) + 1}"
        out.setdefault(m.group(1), (m.group(1), body, where))
        inner = re.sub(r"/\*.*?\*/", "", text[m.end():end - 1], flags=re.S)
        for e in re.finditer(r"(?:^|,)\s*([A-Za-z_]\w*)", inner):
            out.setdefault(e.group(1), (m.group(1), body, where))
    return out


def uapi_dirs(tree: pathlib.Path) -> list[pathlib.Path]:
    """The tree's uapi include directories, in the order the compiler is given them."""
    return [tree / d for d in UAPI_DIRS if (tree / d).is_dir()]


def idl_header(tree: pathlib.Path) -> pathlib.Path:
    for d in UAPI_DIRS[:2]:
        if (tree / d / IDL).is_file():
            return tree / d / IDL
    raise ExtractError(f"{tree}: not a lustre-release tree (no {IDL} under {' or '.join(UAPI_DIRS[:2])})")


def defined_by(tree: pathlib.Path, shim: pathlib.Path, cc: str) -> set[str]:
    """Macros already defined once the shim and the uapi lustre_idl.h are included."""
    src = f'#include "{shim}"\n#include <{IDL}>\n'
    includes = [a for d in uapi_dirs(tree) for a in ("-I", str(d))]
    try:
        proc = subprocess.run([cc, "-E", "-dM", "-x", "c", *includes, "-"], input=src,
                              capture_output=True, text=True, timeout=120)
    except OSError as e:
        raise ExtractError(f"cannot run the C preprocessor {cc!r}: {e.strerror or e}") from None
    if proc.returncode != 0:
        raise ExtractError(f"{idl_header(tree)}: the shim and lustre_idl.h do not preprocess:\n{proc.stderr[-2000:]}")
    return {m.group(1) for m in re.finditer(r"^#define ([A-Za-z_]\w*)", proc.stdout, re.M)}


def struct_members(text: str, tag: str) -> list[str]:
    """The member names of `struct tag { ... };` in a header (empty when it is not there)."""
    m = re.search(rf"^struct\s+{re.escape(tag)}\s*\{{", text, re.M)
    if not m:
        return []
    body = text[m.end():match_brace(text, m.end() - 1, f"struct {tag}") - 1]
    body = re.sub(r"/\*.*?\*/|//[^\n]*", "", body, flags=re.S)
    return re.findall(r"(\w+)\s*(?:\[[^\]]*\])?\s*;", body)


def params_of(decl: str) -> int:
    """How many parameters a function declaration has."""
    inner = decl[decl.index("(") + 1:decl.rindex(")")].strip()
    return 0 if inner in ("", "void") else inner.count(",") + 1


def has_function(tree: pathlib.Path, rel: str, name: str) -> bool:
    if not (tree / rel).is_file():
        return False
    try:
        find_function(read(tree, rel), name, rel)
    except ExtractError:
        return False
    return True


def resolve(tree: pathlib.Path, functions_of) -> list[tuple[str, tuple[str, ...]]]:
    """functions_of with the alternatives chosen and each file named: [(file, names)]."""
    out = []
    for entry in functions_of:
        if isinstance(entry[0], tuple) and entry[0] and isinstance(entry[0][0], tuple):
            for alternative in entry:               # a tuple of alternatives
                files, names = alternative[0]
                files = (files,) if isinstance(files, str) else files
                if any(has_function(tree, f, names[0]) for f in files):
                    break
            else:
                alternative = entry[0]              # none is there: report the first's error
            out += resolve(tree, alternative)
            continue
        files, names = entry
        if isinstance(files, str):
            out.append((files, names))
            continue
        for rel in files:
            if has_function(tree, rel, names[0]):
                break
        else:
            rel = files[0]
        out.append((rel, names))
    return out


def _c_string(text: str) -> str:
    return "".join(c if c.isalnum() or c in " ._-+:/" else "_" for c in text)


def version_of(tree: pathlib.Path) -> str:
    if (tree / ".git").exists():
        try:
            proc = subprocess.run(["git", "-C", str(tree), "describe", "--match", "[0-9]*", "--abbrev=7", "HEAD"],
                                  capture_output=True, text=True, timeout=60)
            if proc.returncode == 0 and proc.stdout.strip():
                return proc.stdout.strip().replace("-", "_")
        except OSError:
            pass
    lvf = tree / "LUSTRE-VERSION-FILE"
    if lvf.is_file():
        return lvf.read_text().strip().removeprefix("LUSTRE_VERSION = ")
    gen = tree / "LUSTRE-VERSION-GEN"
    if gen.is_file():
        m = re.search(r"^DEFAULT_VERSION=(\S+)", gen.read_text(errors="replace"), re.M)
        if m:
            return m.group(1)
    return "unknown"


def extract(tree: pathlib.Path, shim: pathlib.Path, cc: str = "cc", version: str | None = None,
            out_name: str = "lustre_extract.c", functions_of=EXTRACT, seeds=SEEDS,
            headers=HEADERS) -> tuple[str, dict]:
    """(the C text, info).  `functions_of`, `seeds` and `headers` default to what the testee
    needs; the project's tests pass their own for a stand-in tree."""
    idl = idl_header(tree)
    functions_of = resolve(tree, functions_of)
    known = defined_by(tree, shim, cc)
    macros: dict[str, tuple[str, str]] = {}
    enums: dict[str, tuple[str, str, str]] = {}
    sources: dict[str, str] = {}
    for rel in headers:
        text = read(tree, rel)
        sources[rel] = hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()
        for k, v in macro_index(text, rel).items():
            macros.setdefault(k, v)
        for k, v in enum_index(text, rel).items():
            enums.setdefault(k, v)
    functions, prototypes = [], []
    for rel, names in functions_of:
        raw = (tree / rel).read_bytes() if (tree / rel).is_file() else None
        if raw is None:
            raise ExtractError(f"{tree / rel}: no such file")
        sources[rel] = hashlib.sha256(raw).hexdigest()
        text = raw.decode("utf-8", "replace")
        for name in names:
            start, params_end, end, line = find_function(text, name, str(tree / rel))
            decl = re.sub(r"\s+", " ", text[start:params_end]).strip()
            prototypes.append(decl + ";")
            functions.append(f'#line {line} "{rel}"\n{text[start:end]}\n{RESET}')
    # follow identifiers through macros and enums, transitively
    wanted_macros: dict[str, tuple[str, str]] = {}
    wanted_enums: dict[str, tuple[str, str]] = {}
    todo = list(seeds) + [t for f in functions for t in IDENT.findall(f)]
    seen: set[str] = set()
    while todo:
        ident = todo.pop()
        if ident in seen:
            continue
        seen.add(ident)
        if ident in macros and ident not in known:
            wanted_macros[ident] = macros[ident]
            todo += IDENT.findall(macros[ident][0])
        elif ident in enums:
            tag, body, where = enums[ident]
            if tag not in wanted_enums:
                wanted_enums[tag] = (body, where)
                todo += IDENT.findall(body)
    version = version or version_of(tree)
    idl_text = idl.read_text(encoding="utf-8", errors="replace")
    fields = {tag: struct_members(idl_text, tag) for tag in FIELDS_OF}
    info = {"tree": str(tree), "version": version, "sha256": sources,
            "uapi": str(idl.parent.parent.parent.relative_to(tree)),
            "functions": [n for _, names in functions_of for n in names], "fields": fields}
    out = ["/*", " * GENERATED by examples/lustre-testee/extract.py from a lustre-release tree:",
           f" *   tree:    {tree}", f" *   version: {version}"]
    out += [f" *   sha256 {h}  {rel}" for rel, h in sorted(sources.items())]
    out += [" * This file is Lustre's code (GPL-2.0): keep it in build/, never commit or publish it.",
            " */", "", "/* ---- macros ---- */"]
    for name in sorted(wanted_macros):
        text, where = wanted_macros[name]
        out += [f"/* {where} */", text]
    out += ["", "/* ---- enums ---- */"]
    for tag in sorted(wanted_enums):
        body, where = wanted_enums[tag]
        out += [f'#line {where.rsplit(":", 1)[1]} "{where.rsplit(":", 1)[0]}"', body, RESET]
    out += ["", "/* ---- prototypes ---- */"] + prototypes + ["", "/* ---- functions ---- */"] + functions
    out += ["", f'#define LUSTRE_EXTRACT_VERSION "{_c_string(version)}"',
            f'#define LUSTRE_EXTRACT_PACK_GENERIC_SHA256 "{sources.get("lustre/ptlrpc/pack_generic.c", "")}"']
    # what differs between releases, for the testee's #if: the functions there and how many
    # parameters each takes, and the members of the structures in FIELDS_OF
    out += ["", "/* ---- what this tree has ---- */"]
    out += [f"#define LUSTRE_EXTRACT_PARAMS_{decl_name} {params_of(decl)}"
            for decl_name, decl in zip(info["functions"], prototypes)]
    out += [f"#define LUSTRE_EXTRACT_FIELD_{member} 1"
            for tag in FIELDS_OF for member in fields[tag] if re.fullmatch(r"\w+", member)]
    # after each block that claims another file's lines, give the rest back to this file
    final, n = [], 0
    for line in "\n".join(out).split("\n"):
        if line == RESET:
            line = f'#line {n + 2} "{out_name}"'
        final.append(line)
        n += 1
    return "\n".join(final) + "\n", info


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lustre", required=True, help="a lustre-release tree (checkout or git archive)")
    ap.add_argument("--out", required=True, help="the C file to write (inside build/)")
    ap.add_argument("--shim", default=str(pathlib.Path(__file__).with_name("lustre_shim.h")))
    ap.add_argument("--info", help="also write the tree's version and file hashes as JSON")
    ap.add_argument("--version", help="the Lustre version to record (default: found in the tree)")
    ap.add_argument("--cc", default=os.environ.get("CC", "cc"))
    args = ap.parse_args(argv)
    try:
        text, info = extract(pathlib.Path(args.lustre).resolve(), pathlib.Path(args.shim).resolve(), args.cc,
                             args.version or None, pathlib.Path(args.out).name)
    except ExtractError as e:
        print(f"extract.py: {e}", file=sys.stderr)
        return 2
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    if not out.is_file() or out.read_text(encoding="utf-8", errors="replace") != text:
        out.write_text(text, encoding="utf-8")      # unchanged: left alone, so make rebuilds nothing
    if args.info:
        pathlib.Path(args.info).write_text(json.dumps(info, indent=1) + "\n", encoding="utf-8")
    print(f"extract.py: {out}: {len(info['functions'])} functions from {info['tree']} ({info['version']})",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
