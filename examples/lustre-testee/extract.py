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

# The pack_generic.c functions the testee calls or needs, in the order they are emitted.
PACK_GENERIC = ("lustre/ptlrpc/pack_generic.c", (
    "lustre_msg_hdr_size_v2", "lustre_msg_buf_v2", "lustre_msg_buflen_v2", "lustre_msg_buflen",
    "lustre_msg_ptlrpc_body", "lustre_msg_get_type", "lustre_msg_get_opc", "lustre_msg_get_jobid",
    "lustre_msg_calc_cksum", "lustre_unpack_msg_v2", "__lustre_unpack_msg", "ptlrpc_unpack_req_msg",
    "ptlrpc_unpack_rep_msg", "lustre_unpack_ptlrpc_body_v2", "lustre_unpack_req_ptlrpc_body",
    "lustre_unpack_rep_ptlrpc_body", "lustre_swab_ptlrpc_body"))
# The helpers that record which buffers were swabbed.  Since 2.13 they take the request's
# capsule (req_capsule_*), in lustre_req_layout.h, lustre_net.h or layout.c depending on the
# release; up to 2.12 they take the request (lustre_*_swabbed, ptlrpc_*_need_swab) in
# lustre_net.h, whose struct ptlrpc_request then holds the messages and the masks itself.
CAPSULE_HELPERS = ("req_capsule_req_swabbed", "req_capsule_rep_swabbed", "req_capsule_set_req_swabbed",
                   "req_capsule_set_rep_swabbed", "req_capsule_req_need_swab", "req_capsule_rep_need_swab",
                   "req_capsule_set_swabbed", "req_capsule_need_swab")
REQUEST_HELPERS = ("lustre_req_swabbed", "lustre_rep_swabbed", "ptlrpc_req_need_swab", "ptlrpc_rep_need_swab",
                   "lustre_set_req_swabbed", "lustre_set_rep_swabbed", "ptlrpc_buf_set_swabbed",
                   "ptlrpc_buf_need_swab")
HELPER_FILES = ("lustre/include/lustre_req_layout.h", "lustre/include/lustre_net.h", "lustre/ptlrpc/layout.c",
                "lustre/ptlrpc/pack_generic.c")
# The files that hold the lustre_swab_* routines of structures (capability structs): every
# routine whose first parameter is a structure, and every function of these files it calls,
# transitively, is extracted too (swab_plan); a file a release lacks is skipped.
SWAB_FILES = ("lustre/ptlrpc/pack_generic.c", "lustre/ptlrpc/pack_server.c", "lustre/obdclass/llog_swab.c")
# headers whose static inline functions a swab routine may call (object_update_size, ...)
SWAB_HEADERS = ("lustre/include/obj_update.h", "lustre/include/lustre_update.h", "lustre/include/lustre_disk.h")
SWAB_DEF = re.compile(r"^(?:SERVER_ONLY\s+)?(?:static\s+)?(?:inline\s+)?(void|int)\s+(lustre_swab_\w+)\s*\(\s*(struct|union)\s+(\w+)\s*\*\s*\w+"
                      r"\s*(?:,\s*(__u32|__u16|int|size_t|__kernel_size_t)\s+\w+\s*)?\)\s*\n?\s*\{", re.M)
# a request format field of layout.c whose buffer is one structure, with the routine that swabs it
# there (RMF_FIEMAP_KEY: sizeof(struct ll_fiemap_info_key), lustre_swab_fiemap up to LU-11997)
CAPSULE_FIELD = re.compile(r"DEFINE_MSGF\(\s*\"[^\"]*\"\s*,\s*[^,]+,\s*sizeof\s*\(\s*(?:struct|union)\s+(\w+)\s*\)\s*,"
                           r"\s*(lustre_swab_\w+)\s*,")
FUNC_DEF = re.compile(r"^(?:SERVER_ONLY\s+)?(?:static\s+)?(?:inline\s+)?(?:(?:const\s+)?(?:struct\s+)?\w+[\s*]+)(\w+)\s*\([^;{]*\)\s*\{", re.M)
# macros and enums named here are copied even when no extracted function uses them
SEEDS = ("WIRE_FLVR", "SPTLRPC_FLVR_POLICY", "SPTLRPC_FLVR_NULL", "SPTLRPC_POLICY_NULL", "RCL_CLIENT")
# where macros and enums are looked up
HEADERS = ("lustre/include/lustre_net.h", "lustre/include/lustre_req_layout.h", "lustre/include/lustre_sec.h")
# where the uapi headers live: include/uapi since 2.17.54, lustre/include/uapi before
UAPI_DIRS = ("include/uapi", "lustre/include/uapi")
UAPI = UAPI_DIRS[0]
# where the LNet uapi headers lustre_idl.h includes live before 2.17.54 (include/uapi after)
LNET_UAPI = "lnet/include/uapi"


def uapi_of(tree: pathlib.Path) -> str:
    """The tree's uapi include directory (relative), or ExtractError."""
    for rel in UAPI_DIRS:
        if (tree / rel / "linux/lustre/lustre_idl.h").is_file():
            return rel
    raise ExtractError(f"{tree}: not a lustre-release tree (no linux/lustre/lustre_idl.h under "
                       f"{' or '.join(UAPI_DIRS)})")


def _defines(tree: pathlib.Path, rel: str, name: str) -> bool:
    path = tree / rel
    if not path.is_file():
        return False
    try:
        find_function(path.read_text(encoding="utf-8", errors="replace"), name, str(path))
        return True
    except ExtractError:
        return False


def swab_plan(tree: pathlib.Path, skip: set) -> tuple[tuple, dict]:
    """(the (file, functions) the structure swabbing needs, {routine: how to call it}): every
    lustre_swab_* routine of SWAB_FILES whose first parameter is a structure or union, with
    its second parameter's type when it takes the buffer's length, and every function of
    SWAB_FILES and SWAB_HEADERS those routines call, transitively.  Functions named in `skip`
    (already extracted for the message path) are left out."""
    texts = {rel: read(tree, rel) for rel in SWAB_FILES + SWAB_HEADERS if (tree / rel).is_file()}
    defined: dict[str, str] = {}
    for rel, text in texts.items():
        for m in FUNC_DEF.finditer(text):
            defined.setdefault(m.group(1), rel)
    swabbers = {}
    for rel in SWAB_FILES:
        for m in SWAB_DEF.finditer(texts.get(rel, "")):
            swabbers.setdefault(m.group(2), {"file": rel, "returns": m.group(1), "param": f"{m.group(3)} {m.group(4)}",
                                             "length": m.group(5)})
    wanted, todo = [], sorted(swabbers)
    while todo:
        name = todo.pop(0)
        if name in wanted or name in skip or name not in defined:
            continue
        wanted.append(name)
        rel = defined[name]
        start, _, end, _ = find_function(texts[rel], name, str(tree / rel))
        todo += sorted(set(IDENT.findall(texts[rel][start:end])) & set(defined) - set(wanted) - {name})
    by_file: dict[str, list[str]] = {}
    for name in wanted:
        by_file.setdefault(defined[name], []).append(name)
    return tuple((rel, tuple(names)) for rel, names in by_file.items()), swabbers


def plan_for(tree: pathlib.Path) -> tuple[tuple, dict]:
    """(the (file, functions) to extract, the facts the testee adapts to) for this tree: which
    helper style it has and where each helper is defined, whether lustre_msg_calc_cksum takes
    a buffer, and the names the tree's lustre_idl.h gives the fields main.c reports."""
    old = _defines(tree, "lustre/include/lustre_net.h", "lustre_req_swabbed")
    helpers: dict[str, list[str]] = {}
    for name in (REQUEST_HELPERS if old else CAPSULE_HELPERS):
        rel = next((r for r in HELPER_FILES if _defines(tree, r, name)), None)
        if rel is None:
            raise ExtractError(f"{tree}: no definition of {name}() in {', '.join(HELPER_FILES)}")
        helpers.setdefault(rel, []).append(name)
    functions = tuple((rel, tuple(names)) for rel, names in helpers.items())
    swab_functions, swabbers = swab_plan(tree, {n for _, names in functions + (PACK_GENERIC,) for n in names})
    functions += swab_functions + (PACK_GENERIC,)
    pack = read(tree, PACK_GENERIC[0])
    start, params_end, _, _ = find_function(pack, "lustre_msg_calc_cksum", PACK_GENERIC[0])
    idl = read(tree, uapi_of(tree) + "/linux/lustre/lustre_idl.h")

    def has_field(name: str) -> bool:
        return re.search(rf"\b{name}\s*;", idl) is not None
    facts = {"request_helpers": old, "cksum_takes_buffer": "," in pack[start:params_end],
             "lm_opc": has_field("lm_opc"), "pb_projid": has_field("pb_projid"), "pb_uid": has_field("pb_uid"),
             "swabbers": swabbers, "capsule_swabbers": capsule_swabbers(tree, swabbers)}
    return functions, facts


def capsule_swabbers(tree: pathlib.Path, swabbers: dict) -> dict[str, str]:
    """{structure: routine}: the routine layout.c's request format fields run on a buffer
    that is that one structure, where every such field names the same extracted routine -
    which may be a routine of another structure (RMF_FIEMAP_KEY's lustre_swab_fiemap before
    LU-11997): what the tree's receiver runs on it."""
    found: dict[str, set] = {}
    if (tree / "lustre/ptlrpc/layout.c").is_file():
        for m in CAPSULE_FIELD.finditer(read(tree, "lustre/ptlrpc/layout.c")):
            found.setdefault(m.group(1), set()).add(m.group(2))
    return {name: next(iter(rs)) for name, rs in sorted(found.items()) if len(rs) == 1 and next(iter(rs)) in swabbers}


def compat_header(facts: dict) -> str:
    """build/lustre_compat.h: what main.c and the shim need to know of the tree, as macros.
    Today's field names are reported for every release; where the tree's header still calls
    a field padding, the bytes are read from the padding, as that release's code leaves them
    (unswapped from a byte-swapped sender)."""
    lines = ["/* GENERATED by examples/lustre-testee/extract.py: how this lustre-release tree differs */",
             "#ifndef LUSTRE_TESTEE_COMPAT_H", "#define LUSTRE_TESTEE_COMPAT_H"]
    if facts["request_helpers"]:
        lines += ["#define LT_REQUEST_HELPERS 1",
                  "#define LT_INIT_REQ(req) do { } while (0)",
                  "#define LT_SWABBED(req, is_reply) ((is_reply) ? lustre_rep_swabbed(&(req), MSG_PTLRPC_HEADER_OFF) "
                  ": lustre_req_swabbed(&(req), MSG_PTLRPC_HEADER_OFF))"]
    else:
        lines += ["#define LT_INIT_REQ(req) ((req).rq_pill.rc_req = &(req))",
                  "#define LT_SWABBED(req, is_reply) ((is_reply) ? "
                  "req_capsule_rep_swabbed(&(req).rq_pill, MSG_PTLRPC_HEADER_OFF) "
                  ": req_capsule_req_swabbed(&(req).rq_pill, MSG_PTLRPC_HEADER_OFF))"]
    if facts["cksum_takes_buffer"]:
        lines.append("#define LT_CKSUM(m) lustre_msg_calc_cksum(m, MSG_PTLRPC_BODY_OFF)")
    else:   # up to 2.12 it sums the ptlrpc_body and LASSERTs there is one (a short buffer 0 is an
        #     LBUG; Lustre sums only early replies): the testee sums only where there is a body
        lines.append("#define LT_CKSUM(m) (lustre_msg_buflen((m), MSG_PTLRPC_BODY_OFF) >= "
                     "sizeof(struct ptlrpc_body_v2) ? lustre_msg_calc_cksum(m) : 0)")
    lines.append("#define LT_LM_OPC(m) ((m)->lm_opc)" if facts["lm_opc"] else "#define LT_LM_OPC(m) ((m)->lm_padding_2)")
    lines.append("#define LT_PB_PROJID(pb) ((pb)->pb_projid)" if facts["pb_projid"]
                 else "#define LT_PB_PROJID(pb) ((pb)->pb_padding1)")
    if facts["pb_uid"]:
        lines += ["#define LT_PB_UID(pb) ((pb)->pb_uid)", "#define LT_PB_GID(pb) ((pb)->pb_gid)"]
    else:       # one __u64 of padding where pb_uid and pb_gid are now: its two 32-bit halves as they lie
        # (copied out, not read through a __u32 pointer: that would break strict aliasing at -O2)
        lines += ["#define LT_PB_HALF(pb, i) ({ __u32 _half; memcpy(&_half, (const char *)&(pb)->pb_padding64_2 "
                  "+ 4 * (i), 4); _half; })",
                  "#define LT_PB_UID(pb) LT_PB_HALF(pb, 0)", "#define LT_PB_GID(pb) LT_PB_HALF(pb, 1)"]
    return "\n".join(lines + ["#endif", ""])


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


def defined_by(tree: pathlib.Path, shim: pathlib.Path, cc: str, compat: str = "") -> set[str]:
    """Macros already defined once the compat macros, the shim and the uapi lustre_idl.h are
    included."""
    uapi = uapi_of(tree)
    src = f'{compat}\n#include "{shim}"\n#include <linux/lustre/lustre_idl.h>\n'
    try:
        lnet = ["-I", str(tree / LNET_UAPI)] if (tree / LNET_UAPI).is_dir() else []
        proc = subprocess.run([cc, "-E", "-dM", "-x", "c", "-I", str(tree / uapi), *lnet, "-"], input=src,
                              capture_output=True, text=True, timeout=120)
    except OSError as e:
        raise ExtractError(f"cannot run the C preprocessor {cc!r}: {e.strerror or e}") from None
    if proc.returncode != 0:
        raise ExtractError(f"{tree / uapi}: the shim and lustre_idl.h do not preprocess:\n{proc.stderr[-2000:]}")
    return {m.group(1) for m in re.finditer(r"^#define ([A-Za-z_]\w*)", proc.stdout, re.M)}


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
            out_name: str = "lustre_extract.c", functions_of=None, seeds=SEEDS,
            headers=HEADERS, compat: str = "") -> tuple[str, dict]:
    """(the C text, info).  `functions_of` defaults to what the testee needs from this tree
    (plan_for); `seeds` and `headers` to the testee's; the project's tests pass their own for
    a stand-in tree.  `compat`: the text of lustre_compat.h, included first by main.c."""
    uapi_of(tree)
    if functions_of is None:
        functions_of = plan_for(tree)[0]
    known = defined_by(tree, shim, cc, compat)
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
    info = {"tree": str(tree), "version": version, "sha256": sources, "uapi": uapi_of(tree),
            "functions": [n for _, names in functions_of for n in names]}
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
    ap.add_argument("--compat", help="also write lustre_compat.h: how this tree differs, as macros for main.c")
    ap.add_argument("--version", help="the Lustre version to record (default: found in the tree)")
    ap.add_argument("--cc", default=os.environ.get("CC", "cc"))
    args = ap.parse_args(argv)
    tree = pathlib.Path(args.lustre).resolve()
    try:
        functions, facts = plan_for(tree) if uapi_of(tree) else (None, None)
        compat = compat_header(facts)
        headers = HEADERS + tuple(h for h in SWAB_HEADERS if (tree / h).is_file())
        text, info = extract(tree, pathlib.Path(args.shim).resolve(), args.cc,
                             args.version or None, pathlib.Path(args.out).name, functions, compat=compat,
                             headers=headers)
        info["adapted"] = facts
    except ExtractError as e:
        print(f"extract.py: {e}", file=sys.stderr)
        return 2
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    if not out.is_file() or out.read_text(encoding="utf-8", errors="replace") != text:
        out.write_text(text, encoding="utf-8")      # unchanged: left alone, so make rebuilds nothing
    if args.compat:
        path = pathlib.Path(args.compat)
        if not path.is_file() or path.read_text(encoding="utf-8") != compat:
            path.write_text(compat, encoding="utf-8")
    if args.info:
        pathlib.Path(args.info).write_text(json.dumps(info, indent=1) + "\n", encoding="utf-8")
    print(f"extract.py: {out}: {len(info['functions'])} functions from {info['tree']} ({info['version']})",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
