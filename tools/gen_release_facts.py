#!/usr/bin/env python3
"""Generate ptlrpc_conformance/spec/releases/<release>.json: the wire facts of one Lustre
release, read from that release's own code, each with its provenance.

    python3 tools/gen_release_facts.py --git GITDIR --tag v2_15_8      # the git mirror at a tag
    python3 tools/gen_release_facts.py --tree DIR                      # an extracted tree
    python3 tools/gen_release_facts.py --git GITDIR --all              # every release the suite knows
    ... --check      exit 1 when the committed file differs from what the tree gives
    ... --out DIR    write (or check) under DIR instead of the package's releases/ folder

The tree is a lustre-release checkout of either layout: the uapi headers under
lustre/include/uapi/linux/lustre/ (2.12 to 2.17.0) or include/uapi/linux/lustre/ (2.17.54 on).
Nothing of Lustre's code is copied: the generator writes numbers, names and booleans.

Sections (docs/releases-facts.md describes the format):
  structs          every structure lustre/ptlrpc/wiretest.c asserts: sizes and offsets from its
                   LASSERTF lines, field types from the release's headers, fields wiretest leaves
                   out laid out from the header (listed in header_fields) when the header's layout
                   reproduces every offset wiretest asserts
  field_names      today's (2.17.57) field name -> the release's name, where they differ
  unswabbed        fields of lustre_msg_v2 / ptlrpc_body_v3 (today's names) that the release's
                   pack_generic.c does not byte-swap (lustre_unpack_msg_v2, lustre_swab_ptlrpc_body)
  struct_unswabbed  per structure with a swab routine of its own, the fields it does not swap
  union_unswabbed  per union swapped as one member, the member's fields left as sent
  constants        the constants wiretest.c asserts
  errnos           the wire errno numbers of lustre/include/lustre_errno.h (LUSTRE_E*)
  connect          OBD_CONNECT_* / OBD_CONNECT2_* and the OST's supported masks, as lustre_idl.h
                   computes them (HAVE_LRU_RESIZE_SUPPORT taken as defined: configure's default)
  valid_bits_defined  every OBD_MD_* bit lustre_idl.h defines with a number of its own (the
                   o_valid / mbo_valid bits; masks built of other bits are left out)
  message_fields   every RMF_* of lustre/ptlrpc/layout.c: wire name, flags, structure
  message_formats  every RQF_* of layout.c: the request and reply field lists
  behaviour        booleans detected in the code by the patterns in BEHAVIOURS below
"""
from __future__ import annotations

import argparse
import ast
import hashlib
import json
import operator
import os
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUTPUT_DIR = ROOT / "ptlrpc_conformance" / "spec" / "releases"
FORMAT = "ptlrpc-conformance-release/1"
TAGS = ("v2_12_9", "v2_15_8", "v2_16_1", "v2_17_0", "v2_17_57")
WIRETEST = "lustre/ptlrpc/wiretest.c"
PACK_GENERIC = "lustre/ptlrpc/pack_generic.c"
LAYOUT = "lustre/ptlrpc/layout.c"
UAPI_DIRS = ("include/uapi/linux/lustre/", "lustre/include/uapi/linux/lustre/")
HEADER_DIRS = ("lustre/include/",)          # non-uapi headers wiretest includes (lustre_disk.h, ...)
LNET_UAPI = ("include/uapi/linux/lnet/", "lnet/include/uapi/linux/lnet/")   # lnet_nid_t and friends

# Today's field names, by (structure, offset): field_names maps each to the release's name.
TODAY = "2.17.57"
# The two structures whose swabbing decides the HDR-SWAB / BODY-SWAB verdicts.
SWAB_FUNCS = {"lustre_msg_v2": ("lustre_unpack_msg_v2", "lustre_swab_lustre_msg_v2"),
              "ptlrpc_body_v3": ("lustre_swab_ptlrpc_body",)}
# The structures the suite's structure vectors send byte-swapped, each with the pack_generic.c
# function that swaps it (struct_unswabbed).  lu_fid and ost_id are swapped in
# obdclass/llog_swab.c from 2.14 on; their functions are the same in every release read.
STRUCT_SWAB_FUNCS = {"obdo": ("lustre_swab_obdo",), "ost_body": ("lustre_swab_ost_body",),
                     "ost_layout": ("lustre_swab_ost_layout",), "mdt_body": ("lustre_swab_mdt_body",),
                     "obd_statfs": ("lustre_swab_obd_statfs",), "obd_connect_data": ("lustre_swab_connect",)}

SCALARS = {"__u8": "u8", "__u16": "u16", "__u32": "u32", "__u64": "u64",
           "__s8": "s8", "__s16": "s16", "__s32": "s32", "__s64": "s64",
           "__le16": "u16", "__le32": "u32", "__le64": "u64", "__be16": "u16", "__be32": "u32", "__be64": "u64",
           "unsigned char": "u8", "signed char": "s8", "char": "char", "short": "s16", "unsigned short": "u16",
           "int": "s32", "signed int": "s32", "unsigned int": "u32", "unsigned": "u32",
           "long": "s64", "unsigned long": "u64", "long long": "s64", "unsigned long long": "u64",
           "obd_time": "s64", "bool": "u8", "__kernel_size_t": "u64"}
SCALAR_SIZE = {"u8": 1, "s8": 1, "char": 1, "u16": 2, "s16": 2, "u32": 4, "s32": 4, "u64": 8, "s64": 8}

# Structures wiretest asserts whose declaration lives in the Linux uapi headers, not in the tree
# (linux/fiemap.h, linux/posix_acl_xattr.h): their member types, restated.
KERNEL_UAPI = {
    "linux/fiemap.h": """
struct fiemap_extent { __u64 fe_logical; __u64 fe_physical; __u64 fe_length; __u64 fe_reserved64[2];
                       __u32 fe_flags; __u32 fe_reserved[3]; };
struct fiemap { __u64 fm_start; __u64 fm_length; __u32 fm_flags; __u32 fm_mapped_extents;
                __u32 fm_extent_count; __u32 fm_reserved; struct fiemap_extent fm_extents[]; };
""",
    "linux/posix_acl_xattr.h": """
struct posix_acl_xattr_entry { __le16 e_tag; __le16 e_perm; __le32 e_id; };
struct posix_acl_xattr_header { __le32 a_version; };
""",
    "linux/uuid.h": """
typedef struct { __u8 b[16]; } guid_t;
typedef struct { __u8 b[16]; } uuid_le;
""",
}

# Behaviours: name -> what the pattern looks for (behaviour_section applies it); the JSON gives
# this text as detected_by, with the file and function it was found in.
BEHAVIOUR_DOC = {
    "jobid_nul_terminated": "lustre_msg_get_jobid stores '\\0' in pb_jobid[LUSTRE_JOBID_SIZE - 1] "
                            "(an unterminated jobid is terminated; LU-16376)",
    "jobid_checks_body_len": "lustre_msg_get_jobid returns NULL when buffer 0 is shorter than "
                             "struct ptlrpc_body (a ptlrpc_body_v2 has no jobid): it compares "
                             "lm_buflens[MSG_PTLRPC_BODY_OFF] itself, or asks lustre_msg_buf_v2 for "
                             "sizeof(struct ptlrpc_body), which returns NULL for a shorter buffer",
    "replay_create": "lustre_idl.h defines OBD_CONNECT2_REPLAY_CREATE (OST_CREATE replay; LU-15671)",
    "punch_projid": "ofd_attr_handle_id keeps LA_PROJID when the object's projid is 0 and the "
                    "request's is not (the test 'la_projid != 0' beside S_ISVTX; LU-16265)",
    "check_resource_ids": "a function ofd_check_resource_ids is defined under lustre/ofd/",
    "buflen_wrap": "lustre_unpack_msg_v2 rounds lm_buflens[i] up into an int (cfs_size_round or "
                   "round_up) and compares only the rounded value, never lm_buflens[i] itself, with "
                   "PTLRPC_MAX_BUFLEN: a length near 2^32 wraps to a small one",
    "cksum_has_buf_arg": "lustre_msg_calc_cksum is defined with a second (buffer) parameter",
    "unknown_opcode_eopnotsupp": "tgt_handler_find_check answers an opcode no handler serves with -EOPNOTSUPP "
                                 "(before, -ENOTSUPP: 524 on the wire; LU-8582)",
    "erofs_sent_as_reply": "ptlrpc_send_error keeps the reply type REPLY for -EROFS (LU-15451)",
    "create_trusts_last_id": "ofd_create_hdl has no -EINVAL refusal of an id OST_MAX_PRECREATE or more below "
                             "LAST_ID (the test 'diff <= -OST_MAX_PRECREATE'; LU-17987)",
    "punch_sets_ids": "ofd_punch_hdl hands OBD_MD_FLUID, OBD_MD_FLGID and OBD_MD_FLPROJID to la_from_obdo "
                      "(LU-18757)",
    "reply_body_shrunk": "ptlrpc_send_reply cuts buffer 0 of every reply to sizeof(struct ptlrpc_body_v2) "
                         "(lustre_shrink_msg; gone with LU-12523)",
    "create_reply_seq_width": "ofd_create_hdl sets OBD_MD_FLSIZE in the reply's o_valid, o_size being the "
                              "sequence width (LU-11912)",
    "create_gap_seq_width": "ofd_create_hdl, for an id more than 5 * OST_MAX_PRECREATE above LAST_ID, creates "
                            "the last min(seq_width, OST_MAX_PRECREATE) ids; before, the last "
                            "OST_MAX_PRECREATE / 2 (LU-11912)",
}


# --------------------------------------------------------------------------- reading a tree

def blob_id(data: bytes) -> str:
    """Git's blob id of a file's bytes."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class Tree:
    """A lustre-release tree: a directory, or a git repository at a tag.  Remembers every file
    read (path -> blob id) for the provenance of the facts."""

    def __init__(self, *, directory: pathlib.Path | None = None, gitdir: str | None = None,
                 tag: str | None = None):
        self.dir, self.gitdir, self.tag = directory, gitdir, tag
        self.read_files: dict[str, str] = {}
        self._cache: dict[str, str | None] = {}
        if gitdir:
            self.commit = self._git("rev-parse", f"{tag}^{{commit}}").strip()
            listing = self._git("ls-tree", "-r", "--full-tree", self.commit)
            self._blobs = {}
            for line in listing.splitlines():
                meta, path = line.split("\t", 1)
                mode, kind, blob = meta.split()
                if kind == "blob":
                    self._blobs[path] = blob
            self.paths = sorted(self._blobs)
        else:
            self.commit = None
            head = directory / ".git"
            if head.exists():
                try:
                    self.commit = subprocess.run(["git", "-C", str(directory), "rev-parse", "HEAD"], check=True,
                                                 capture_output=True, text=True).stdout.strip() or None
                except (OSError, subprocess.CalledProcessError):
                    self.commit = None
            self.paths = sorted(str(p.relative_to(directory)).replace(os.sep, "/")
                                for p in directory.rglob("*") if p.is_file() and ".git" not in p.parts)

    def _git(self, *args: str) -> str:
        return subprocess.run(["git", "--git-dir", self.gitdir, *args], check=True,
                              capture_output=True, text=True).stdout

    def exists(self, path: str) -> bool:
        return path in self._blobs if self.gitdir else (self.dir / path).is_file()

    def read(self, path: str) -> str | None:
        """The text of a file (None when the tree has no such file); recorded in sources."""
        if path in self._cache:
            return self._cache[path]
        if not self.exists(path):
            self._cache[path] = None
            return None
        if self.gitdir:
            data = subprocess.run(["git", "--git-dir", self.gitdir, "cat-file", "blob", self._blobs[path]],
                                  check=True, capture_output=True).stdout
            self.read_files[path] = self._blobs[path]
        else:
            data = (self.dir / path).read_bytes()
            self.read_files[path] = blob_id(data)
        text = data.decode("utf-8", errors="replace")
        self._cache[path] = text
        return text

    def uapi_dir(self) -> str:
        for d in UAPI_DIRS:
            if self.exists(d + "lustre_idl.h"):
                return d
        raise SystemExit("gen_release_facts: not a lustre-release tree (no lustre_idl.h under "
                         + " or ".join(UAPI_DIRS) + ")")


def release_of(tree: Tree) -> str:
    text = tree.read("LUSTRE-VERSION-GEN")
    m = re.search(r"^DEFAULT_VERSION=(\d+\.\d+\.\d+)", text or "", re.M)
    if not m:
        raise SystemExit("gen_release_facts: LUSTRE-VERSION-GEN has no DEFAULT_VERSION")
    return m.group(1)


# --------------------------------------------------------------------------- C text helpers

def strip_comments(text: str) -> str:
    """Comments become spaces (newlines kept, so line numbers stay right)."""
    def blank(m):
        return re.sub(r"[^\n]", " ", m.group(0))
    return re.sub(r"/\*.*?\*/|//[^\n]*|\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'",
                  lambda m: m.group(0) if m.group(0)[0] in "\"'" else blank(m), text, flags=re.S)


def line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def function_body(text: str, name: str) -> tuple[str, int] | None:
    """(body, first line) of the definition of function `name` in C text, or None."""
    clean = strip_comments(text)
    for m in re.finditer(r"^[A-Za-z_][^;{}()]*?\b" + re.escape(name) + r"\s*\(([^;{}]*?)\)\s*\{", clean, re.M):
        start = m.end() - 1
        depth = 0
        for i in range(start, len(clean)):
            if clean[i] == "{":
                depth += 1
            elif clean[i] == "}":
                depth -= 1
                if depth == 0:
                    return clean[m.start():i + 1], line_of(clean, m.start())
    return None


_INT = re.compile(r"^\(?\s*(-?)\s*(0[xX][0-9a-fA-F]+|\d+)\s*(?:[uU]?[lL]{0,2}[uU]?)\s*\)?$")


def c_int(text: str) -> int | None:
    m = _INT.match(text.strip())
    if not m:
        return None
    digits = m.group(2)
    value = int(digits, 16) if digits[:2] in ("0x", "0X") else int(digits, 8) if digits.startswith("0") else int(digits)
    return -value if m.group(1) else value


_OPS = {ast.BitOr: operator.or_, ast.BitAnd: operator.and_, ast.LShift: operator.lshift,
        ast.RShift: operator.rshift, ast.Add: operator.add, ast.Sub: operator.sub,
        ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv, ast.Div: operator.floordiv}


def _eval(node):
    if isinstance(node, ast.Expression):
        return _eval(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_eval(node.left), _eval(node.right))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_eval(node.operand)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Invert):
        return ~_eval(node.operand) & 0xFFFFFFFFFFFFFFFF
    raise ValueError("not a constant expression")


class Macros:
    """Object-like #defines of a set of headers, evaluated to integers on demand."""

    def __init__(self):
        self.text: dict[str, str] = {}
        self.where: dict[str, str] = {}
        self.sizeof = None        # callable: type text -> size or None

    def add(self, text: str, path: str) -> None:
        clean = strip_comments(text).replace("\\\n", " ")
        for m in re.finditer(r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)(?![\w(])[ \t]*(.*)$", clean, re.M):
            name, body = m.group(1), m.group(2).strip()
            if name not in self.text:           # first definition wins (#ifdef branches)
                self.text[name] = body
                self.where[name] = f"{path}:{line_of(clean, m.start())}"

    def value(self, expr: str, depth: int = 0) -> int | None:
        if depth > 20:
            return None
        expr = expr.strip()
        v = c_int(expr)
        if v is not None:
            return v

        def size_of(m):
            size = self.sizeof(m.group(1)) if self.sizeof else None
            if size is None:
                raise ValueError(m.group(1))
            return str(size)
        try:
            expr = re.sub(r"sizeof\s*\(\s*([^()]+?)\s*\)", size_of, expr)
        except ValueError:
            return None
        expr = re.sub(r"\(\s*(?:__u64|__u32|__u16|__u8|unsigned long long|unsigned long|unsigned int|"
                      r"unsigned|int|long long|long)\s*\)", "", expr)

        def name(m):
            if m.group(0) not in self.text:
                raise ValueError(m.group(0))
            v = self.value(self.text[m.group(0)], depth + 1)
            if v is None:
                raise ValueError(m.group(0))
            return str(v)
        try:
            expr = re.sub(r"\b(0[xX][0-9a-fA-F]+|\d+)(?:[uU]?[lL]{0,2}[uU]?)\b", lambda m: str(c_int(m.group(1))), expr)
            expr = re.sub(r"\b[A-Za-z_]\w*\b", name, expr)
            if not re.fullmatch(r"[\d\s()|&<>+\-*/~]*", expr):
                return None
            return _eval(ast.parse(expr.replace("/", "//").replace("////", "//"), mode="eval"))
        except (ValueError, SyntaxError, ZeroDivisionError, TypeError, RecursionError):
            return None


# --------------------------------------------------------------------------- headers: declarations

class Member:
    """One declared member of a C structure or union."""
    __slots__ = ("name", "ctype", "dims", "nested", "bits")

    def __init__(self, name, ctype, dims, nested=None, bits=None):
        self.name, self.ctype, self.dims, self.nested, self.bits = name, ctype, dims, nested, bits


class Aggregate:
    __slots__ = ("kind", "name", "members", "packed", "cite", "aligned")

    def __init__(self, kind, name, members, packed, cite, aligned=None):
        self.kind, self.name, self.members, self.packed, self.cite = kind, name, members, packed, cite
        self.aligned = aligned


def _split_top(body: str, sep: str = ";") -> list[str]:
    out, depth, cur = [], 0, []
    for ch in body:
        if ch in "{([":
            depth += 1
        elif ch in "})]":
            depth -= 1
        if ch == sep and depth == 0:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        out.append("".join(cur))
    return out


_ATTR = re.compile(r"__attribute__\s*\(\((.*?)\)\)|\b__packed\b|\b__aligned\s*\(\s*(\d+)\s*\)")


def _attrs(text: str) -> tuple[str, bool, int | None]:
    packed, aligned = False, None
    for m in _ATTR.finditer(text):
        inner = m.group(1) or ""
        if m.group(0) == "__packed" or "packed" in inner:
            packed = True
        a = re.search(r"aligned\s*\(\s*(\d+)\s*\)", inner)
        if a or m.group(2):
            aligned = int(a.group(1) if a else m.group(2))
    return _ATTR.sub(" ", text), packed, aligned


def parse_members(body: str) -> list[Member]:
    members = []
    body = re.sub(r"\bDECLARE_FLEX_ARRAY\s*\(\s*([^,()]+?)\s*,\s*(\w+)\s*\)", r"\1 \2[]", body)
    for decl in _split_top(body):
        decl, _, _ = _attrs(decl)
        decl = " ".join(decl.split())
        if not decl:
            continue
        m = re.match(r"^(struct|union)\s*(\w*)\s*\{(.*)\}\s*(.*)$", decl, re.S)
        if m:
            kind, tag, inner, names = m.groups()
            nested = Aggregate(kind, tag or None, parse_members(inner), False, None)
            names = names.strip()
            if not names:
                members.append(Member(None, f"{kind} {tag}".strip(), [], nested))
            for n in _split_top(names, ","):
                n = n.strip()
                nm = re.match(r"^(\w+)\s*((?:\[[^\]]*\])*)$", n)
                if nm:
                    members.append(Member(nm.group(1), f"{kind} {tag}".strip(), re.findall(r"\[([^\]]*)\]", nm.group(2)),
                                          nested))
            continue
        m = re.match(r"^((?:(?:const|volatile|signed|unsigned|struct|union|enum)\s+)*[A-Za-z_]\w*(?:\s+(?:long|int|char|short))*)"
                     r"\s*(\*?\s*.*)$", decl)
        if not m:
            continue
        ctype = " ".join(w for w in m.group(1).split() if w not in ("const", "volatile"))
        for n in _split_top(m.group(2), ","):
            n = n.strip()
            if n.startswith("*") or "(" in n.split("[", 1)[0]:
                nm = re.match(r"^\*+\s*(\w+)", n)
                if nm:
                    members.append(Member(nm.group(1), "pointer", []))
                continue
            nm = re.match(r"^(\w+)\s*((?:\[[^\]]*\])*)\s*(?::\s*(\d+))?$", n)
            if nm:
                members.append(Member(nm.group(1), ctype, re.findall(r"\[([^\]]*)\]", nm.group(2)),
                                      bits=int(nm.group(3)) if nm.group(3) else None))
    return members


def parse_aggregates(text: str, path: str) -> tuple[dict, dict]:
    """{('struct'|'union', name): Aggregate}, {typedef name: type text} of a header."""
    clean = strip_comments(text)
    clean = re.sub(r"^[ \t]*#.*?(?<!\\)$", lambda m: re.sub(r"[^\n]", " ", m.group(0)), clean, flags=re.M | re.S)
    aggs, typedefs = {}, {}
    for m in re.finditer(r"\b(typedef\s+)?(struct|union)\s+((?:__attribute__\s*\(\(.*?\)\)\s*)*)(\w*)\s*\{", clean):
        start = m.end() - 1
        depth = 0
        end = None
        for i in range(start, len(clean)):
            if clean[i] == "{":
                depth += 1
            elif clean[i] == "}":
                depth -= 1
                if depth == 0:
                    end = i
                    break
        if end is None:
            continue
        semi = clean.find(";", end)
        tail = clean[end + 1:semi]
        _, packed_tail, aligned = _attrs(tail)
        _, packed_head, _ = _attrs(m.group(3) or "")
        name = m.group(4)
        # only top-level declarations: the text before must close a statement
        before = clean[:m.start()].rstrip()
        if before and before[-1] not in ";}{" and not before.endswith("typedef"):
            continue
        if before.endswith("{") and not name:
            continue
        agg = Aggregate(m.group(2), name or None, parse_members(clean[start + 1:end]),
                        packed_tail or packed_head, f"{path}:{line_of(clean, m.start())}", aligned)
        if m.group(1):
            alias = re.sub(_ATTR, " ", tail).strip()
            if alias and re.fullmatch(r"\w+", alias):
                typedefs[alias] = f"{m.group(2)} {name}" if name else f"{m.group(2)} {alias}"
                if not name:
                    agg.name = alias
                    name = alias
        if name and (m.group(2), name) not in aggs:
            aggs[(m.group(2), name)] = agg
    for m in re.finditer(r"\btypedef\s+([^;{}()]+?)\s+(\w+)\s*;", clean):
        typedefs.setdefault(m.group(2), " ".join(m.group(1).split()))
    return aggs, typedefs


class Headers:
    """Declarations and macros of the release's headers (uapi and lustre/include)."""

    def __init__(self, tree: Tree):
        self.tree = tree
        self._layouts: dict = {}
        self.aggs: dict = {}
        self.typedefs: dict = {}
        self.macros = Macros()
        self.uapi = tree.uapi_dir()
        paths = [p for p in tree.paths if p.endswith(".h") and (
            p.startswith(self.uapi) or p.startswith(LNET_UAPI)
            or (any(p.startswith(d) for d in HEADER_DIRS) and p.count("/") == 2))]
        # uapi first: their declarations win over a kernel-only duplicate
        paths.sort(key=lambda p: (not p.startswith(self.uapi), p))
        for p in paths:
            text = tree.read(p)
            aggs, typedefs = parse_aggregates(text, p)
            for k, v in aggs.items():
                self.aggs.setdefault(k, v)
            for k, v in typedefs.items():
                self.typedefs.setdefault(k, v)
            self.macros.add(text, p)
        for path, text in KERNEL_UAPI.items():
            aggs, typedefs = parse_aggregates(text, path + " (Linux uapi, not in the tree)")
            for k, v in aggs.items():
                self.aggs.setdefault(k, v)
            for k, v in typedefs.items():
                self.typedefs.setdefault(k, v)
        self.macros.sizeof = self.sizeof_text
        self.wire_sizes: dict[str, int] = {}

    def find(self, name: str) -> Aggregate | None:
        return self.aggs.get(("struct", name)) or self.aggs.get(("union", name))

    def resolve(self, ctype: str) -> str:
        """Typedefs followed down to a scalar or 'struct X' / 'union X' / 'enum X'."""
        seen = 0
        while seen < 10 and (ctype in self.typedefs or re.fullmatch(r"\w+", self.macros.text.get(ctype, "-"))):
            ctype = self.typedefs[ctype] if ctype in self.typedefs else self.macros.text[ctype]
            seen += 1
        return ctype

    def sizeof_text(self, ctype: str) -> int | None:
        ctype = self.resolve(" ".join(ctype.split()))
        if ctype in SCALARS:
            return SCALAR_SIZE[SCALARS[ctype]]
        m = re.match(r"^(struct|union)\s+(\w+)$", ctype)
        if m:
            if m.group(2) in self.wire_sizes:
                return self.wire_sizes[m.group(2)]
            agg = self.find(m.group(2))
            return self.layout(agg)[0] if agg else None
        if ctype.startswith("enum "):
            return 4
        return None

    def type_of(self, ctype: str, size: int | None = None) -> str | None:
        """layouts.json TYPE of a C type: u8..s64, char, 'struct NAME'."""
        ctype = self.resolve(ctype)
        if ctype in SCALARS:
            return SCALARS[ctype]
        if ctype.startswith(("struct ", "union ")):
            return "struct " + ctype.split()[1]
        if ctype.startswith("enum "):
            return f"u{8 * size}" if size in (1, 2, 4, 8) else "u32"
        return None

    def align_of(self, m: Member, packed: bool) -> int:
        if packed:
            return 1
        if m.nested is not None:
            return self.layout(m.nested)[1]
        ctype = self.resolve(m.ctype)
        if ctype == "pointer":
            return 8
        if ctype in SCALARS:
            return SCALAR_SIZE[SCALARS[ctype]]
        if ctype.startswith("enum "):
            return 4
        mm = re.match(r"^(struct|union)\s+(\w+)$", ctype)
        agg = self.find(mm.group(2)) if mm else None
        return self.layout(agg)[1] if agg else 8

    def elem_size(self, m: Member) -> int | None:
        if m.nested is not None:
            return self.layout(m.nested)[0]
        if m.ctype == "pointer":
            return 8
        return self.sizeof_text(m.ctype)

    def dims(self, m: Member) -> list[int | None]:
        return [0 if d.strip() == "" else self.macros.value(d) for d in m.dims]

    def layout(self, agg: Aggregate) -> tuple[int | None, int, list]:
        """(size, alignment, [(name, offset, Member, count, flexible, None)]) of an aggregate by
        the LP64 rules, members of anonymous members flattened; None size when a member cannot
        be sized."""
        key = id(agg)
        if key in self._layouts:
            return self._layouts[key]
        self._layouts[key] = (None, 1, [])      # recursion guard
        offset, size, align, rows = 0, 0, 1, []
        ok = True
        for m in agg.members:
            a = self.align_of(m, agg.packed)
            es = self.elem_size(m)
            ds = self.dims(m)
            if es is None or any(d is None for d in ds) or m.bits is not None:
                ok = False
                break
            count = 1
            for d in ds:
                count *= d
            flexible = bool(ds) and ds[-1] == 0 if len(ds) == 1 else bool(ds) and ds[0] == 0
            total = es * count
            at = 0 if agg.kind == "union" else (offset + a - 1) // a * a
            align = max(align, a)
            if m.name is None and m.nested is not None:      # anonymous struct/union: members belong here
                sub = self.layout(m.nested)[2]
                for n, o, mm, c, f, u in sub:
                    rows.append((n, at + o, mm, c, f, u))
            else:
                rows.append((m.name, at, m, count if ds else None, flexible, None))
            if agg.kind == "union":
                size = max(size, total)
            else:
                offset = at + total
                size = offset
        if not ok:
            result = (None, align, rows)
        else:
            if agg.aligned:
                align = max(align, agg.aligned)
            result = ((size + align - 1) // align * align, align, rows)
        self._layouts[key] = result
        return result


# --------------------------------------------------------------------------- wiretest.c

_LASSERT = re.compile(r"\b(LASSERTF|BUILD_BUG_ON|CLASSERT)\s*\(")


def wiretest_statements(text: str):
    """(kind, argument text, line, condition) for each assertion of wiretest.c."""
    clean = strip_comments(text)
    conds: list[str] = []
    lines = clean.split("\n")
    cond_at = []                    # the #if conditions in force at each line, joined with &&
    for i, ln in enumerate(lines, 1):
        s = ln.strip()
        if s.startswith("#"):
            d = s[1:].strip()
            if d.startswith("ifdef"):
                conds.append(d[5:].strip())
            elif d.startswith("ifndef"):
                conds.append("!" + d[6:].strip())
            elif d.startswith("if"):
                conds.append(d[2:].strip())
            elif d.startswith("else") and conds:
                c = conds.pop()
                conds.append(c[1:] if c.startswith("!") else "!" + c)
            elif d.startswith("endif") and conds:
                conds.pop()
        cond_at.append(" && ".join(conds))
    for m in _LASSERT.finditer(clean):
        start = m.end()
        depth, i = 1, start
        while depth and i < len(clean):
            if clean[i] == "(":
                depth += 1
            elif clean[i] == ")":
                depth -= 1
            i += 1
        args = _split_top(clean[start:i - 1], ",")
        line = line_of(clean, m.start())
        yield m.group(1), " ".join(args[0].split()), line, cond_at[line - 1]


def parse_wiretest(text: str) -> dict:
    """Constants, structure sizes and field assertions of wiretest.c."""
    out = {"constants": {}, "const_exprs": {}, "sizes": {}, "kinds": {}, "fields": {}, "lines": {}, "conditions": {},
           "cross": [], "typedefs": set()}
    for kind, expr, line, cond in wiretest_statements(text):
        if kind == "BUILD_BUG_ON":
            m = re.match(r"^([A-Z_][A-Z0-9_]*)\s*!=\s*(.+)$", expr)
            if m and c_int(m.group(2)) is not None:
                out["constants"][m.group(1)] = (c_int(m.group(2)), line, cond)
            elif m:
                out["const_exprs"][m.group(1)] = (m.group(2), line, cond)
            continue
        m = re.match(r"^([A-Za-z_]\w*)\s*==\s*(.+)$", expr)
        if m and c_int(m.group(2)) is not None:
            out["constants"][m.group(1)] = (c_int(m.group(2)), line, cond)
            continue
        if m:
            out["const_exprs"][m.group(1)] = (m.group(2), line, cond)
            continue
        # "Checks for type X" (older trees): the typedef name of an aggregate, with no keyword
        m = re.match(r"^\(int\)\s*sizeof\s*\(\s*(?:(struct|union)\s+)?(\w+)\s*\)\s*==\s*(\d+)$", expr)
        if m:
            name = m.group(2)
            out["sizes"][name] = int(m.group(3))
            out["kinds"][name] = m.group(1) or "struct"
            if not m.group(1):
                out["typedefs"].add(name)
            out["lines"].setdefault(name, [line, line])
            out["conditions"].setdefault(name, cond)
            continue
        m = re.match(r"^\(int\)\s*offsetof\s*\(\s*(?:(?:struct|union)\s+)?(\w+)\s*,\s*([\w.]+)(?:\[([^\]]+)\])?\s*\)\s*==\s*(\d+)$", expr)
        if m:
            name, member, index, value = m.group(1), m.group(2), m.group(3), int(m.group(4))
            row = out["fields"].setdefault(name, {}).setdefault(member, {"cond": cond})
            row["offset"], row["index"] = value, index
            out["lines"].setdefault(name, [line, line])[1] = line
            continue
        m = re.match(r"^\(int\)\s*sizeof\s*\(\s*(\*?)\s*\(\s*\(\s*(?:(?:struct|union)\s+)?(\w+)\s*\*\s*\)\s*0\s*\)\s*->\s*([\w.]+)"
                     r"(?:\[([^\]]+)\])?\s*\)\s*==\s*(\d+)$", expr)
        if m:
            deref, name, member, index, value = m.groups()
            row = out["fields"].setdefault(name, {}).setdefault(member, {"cond": cond})
            row["size"] = int(value)
            row["element"] = bool(deref) or index is not None
            out["lines"].setdefault(name, [line, line])[1] = line
            continue
        side = (r"\(int\)\s*(?:(offsetof)\s*\(\s*(?:struct|union)\s+(\w+)\s*,\s*(\w+)\s*\)|(sizeof)\s*\(\s*\(\s*\(\s*"
                r"(?:struct|union)\s+(\w+)\s*\*\s*\)\s*0\s*\)\s*->\s*(\w+)\s*\))")
        m = re.match(r"^" + side + r"\s*==\s*" + side + r"$", expr)
        if m:
            g = m.groups()
            left, right = (g[0:3] if g[0] else g[3:6]), (g[6:9] if g[6] else g[9:12])
            out["cross"].append((left[0], left[1], left[2], right[1], right[2], line, cond))
    # offsetof(A.f) == offsetof(B.f): B's field has A's offset and size (ptlrpc_body_v2)
    for what, a, f, b, g, line, cond in out["cross"]:
        src = out["fields"].get(a, {}).get(f)
        if src is None or f != g:
            continue
        row = out["fields"].setdefault(b, {}).setdefault(g, {"cond": cond, "via": f"{a}.{f}"})
        key = "offset" if what == "offsetof" else "size"
        if key in src:
            row[key] = src[key]
            row.setdefault("index", None)
        out["lines"].setdefault(b, [line, line])[1] = line
    return out


# --------------------------------------------------------------------------- structs

def member_path(hdr: Headers, agg: Aggregate, dotted: str) -> Member | None:
    """The Member a (possibly dotted) wiretest name designates, searching anonymous members."""
    head, _, rest = dotted.partition(".")

    def find(a: Aggregate, name: str) -> Member | None:
        for m in a.members:
            if m.name == name:
                return m
            if m.name is None and m.nested is not None:
                got = find(m.nested, name)
                if got:
                    return got
        return None
    m = find(agg, head)
    if m is None and not rest:            # an #ifdef branch of wiretest naming a member of a named union
        for outer in agg.members:
            if outer.nested is not None and outer.name:
                m = find(outer.nested, head)
                if m:
                    break
    if m is None or not rest:
        return m
    inner = m.nested
    if inner is None:
        mm = re.match(r"^(struct|union)\s+(\w+)$", hdr.resolve(m.ctype))
        inner = hdr.find(mm.group(2)) if mm else None
    return member_path(hdr, inner, rest) if inner else None


def build_structs(hdr: Headers, wire: dict, wanted: tuple = ()) -> tuple[dict, list]:
    structs, problems = {}, []
    # a keyword-less name wiretest sizes is a structure only when the headers declare one by it
    for name in wire["typedefs"]:
        if hdr.find(name) is None:
            for key in ("sizes", "kinds", "fields", "lines", "conditions"):
                wire[key].pop(name, None)
    for name, size in wire["sizes"].items():
        hdr.wire_sizes[name] = size
    for name in sorted(set(wire["fields"]) - set(wire["sizes"])):
        agg = hdr.find(name)
        size = hdr.layout(agg)[0] if agg is not None else None
        if size is None:
            problems.append(f"{name}: wiretest asserts fields but no size, and the header gives none")
            continue
        wire["sizes"][name] = hdr.wire_sizes[name] = size
        wire["kinds"][name] = agg.kind
        wire.setdefault("size_from_header", set()).add(name)
    for name in wire["sizes"]:
        agg = hdr.find(name)
        lines = wire["lines"][name]
        entry = {"size": wire["sizes"][name]}
        if name in wire.get("size_from_header", ()):
            entry["size_from"] = "header"
        if wire["kinds"][name] == "union":
            entry["kind"] = "union"
        if agg is not None and agg.packed:
            entry["packed"] = True
        if wire["conditions"].get(name):
            entry["condition"] = wire["conditions"][name]
        entry["cite"] = (f"{agg.cite}; " if agg is not None else "") + f"{WIRETEST}:{lines[0]}-{lines[1]}"
        fields = []
        for member, row in wire["fields"].get(name, {}).items():
            decl = member_path(hdr, agg, member) if agg is not None else None
            if decl is None and agg is not None and row.get("cond") and row["cond"] != wire["conditions"].get(name):
                continue        # asserted under a condition of its own that the headers read do not meet
            if "size" not in row and "offset" in row and decl is not None and hdr.dims(decl)[:1] == [0]:
                row = dict(row, size=hdr.elem_size(decl), element=True)     # a flexible array: offset only
            if "offset" not in row or "size" not in row:
                problems.append(f"{name}.{member}: wiretest gives offset or size only")
                continue
            field = {"name": member}
            size, offset = row["size"], row["offset"]
            if decl is not None and decl.nested is not None and decl.name is not None and not decl.nested.name:
                type_ = f"struct {name}_{decl.name}"          # a named member of an anonymous aggregate
            elif decl is not None and decl.ctype == "pointer":
                type_ = "u64"
                field["pointer"] = True
            elif decl is not None:
                type_ = hdr.type_of(decl.ctype, size)
            else:
                type_ = None
            if type_ is None:
                problems.append(f"{name}.{member}: no type in the headers")
                type_ = {1: "u8", 2: "u16", 4: "u32", 8: "u64"}.get(size, "char")
                field["type_from"] = "size"
            dims = hdr.dims(decl) if decl is not None else []
            if row.get("element"):                       # asserted through one element: an array
                elem = size
                index = hdr.macros.value(row["index"]) if row.get("index") else None
                if index:                                # offsetof(member[N]) is the end of N elements
                    count = index
                    offset -= count * elem
                elif dims and dims[0] == 0 or (not dims and offset == wire["sizes"][name]):
                    count = 0
                elif dims and None not in dims:
                    count = 1
                    for d in dims:
                        count *= d
                    base = SCALAR_SIZE.get(type_) or (hdr.wire_sizes.get(type_[7:]) if type_.startswith("struct ") else None)
                    if base and len(dims) > 1:
                        count = dims[0]
                else:
                    count = None
                    problems.append(f"{name}.{member}: array without a known length")
                if count == 0:
                    field.update(offset=offset, size=0, type=type_, flexible=True, count=0)
                else:
                    field.update(offset=offset, size=(count or 1) * elem, type=type_, count=count or 1)
                base = SCALAR_SIZE.get(type_)
                if base and elem != base:
                    field["elem_size"] = elem
            else:
                field.update(offset=offset, size=size, type=type_)
                if dims and None not in dims:
                    elem_base = SCALAR_SIZE.get(type_) or (hdr.wire_sizes.get(type_[7:]) if type_.startswith("struct ") else None)
                    count = 1
                    for d in dims:
                        count *= d
                    if count == 0:
                        field.update(size=0, flexible=True, count=0)
                    elif elem_base and len(dims) > 1:
                        field["count"] = dims[0]
                        field["elem_size"] = size // dims[0]
                    else:
                        field["count"] = size // elem_base if elem_base else count
                elif dims:                                  # a length the tree does not define (PATH_MAX)
                    elem_base = SCALAR_SIZE.get(type_) or (hdr.wire_sizes.get(type_[7:]) if type_.startswith("struct ") else None)
                    if elem_base and len(dims) == 1:
                        field["count"] = size // elem_base
                    else:
                        problems.append(f"{name}.{member}: array of unknown shape")
            if row.get("cond") and row["cond"] != entry.get("condition"):
                field["condition"] = row["cond"]
            fields.append(field)
        header_fields = add_header_fields(hdr, agg, entry, fields, name)
        fields.sort(key=lambda f: f["offset"])
        mark_unions(fields, entry, name)
        entry["fields"] = fields
        if header_fields:
            entry["header_fields"] = header_fields
        gaps = unasserted(entry, wire["fields"].get(name, {}))
        if gaps:
            entry["unasserted_ranges"] = gaps
        structs[name] = entry
    # anonymous aggregates named by a member (ost_id.oi -> ost_id_oi): their own entries
    for name in list(structs):
        agg = hdr.find(name)
        for f in structs[name]["fields"]:
            t = f["type"]
            if t == f"struct {name}_{f['name']}" and t[7:] not in structs and agg is not None:
                decl = member_path(hdr, agg, f["name"])
                size, _, rows = hdr.layout(decl.nested)
                sub = {"size": f["size"], "cite": f"{agg.cite} (anonymous {decl.nested.kind}, member {f['name']} of "
                                                  f"struct {name})", "fields": []}
                if decl.nested.kind == "union":
                    sub["kind"] = "union"
                for n, o, m, c, flex, _ in rows:
                    sub["fields"].append(header_row(hdr, n, o, m, c, flex))
                sub["header_fields"] = [r["name"] for r in sub["fields"]]
                mark_unions(sub["fields"], sub, t[7:])
                structs[t[7:]] = sub
    # structures a field refers to that wiretest asserts nothing of: laid out from the header
    lay_out(hdr, structs, [f["type"][7:] for e in structs.values() for f in e["fields"] if f["type"].startswith("struct ")],
            problems)
    # the `wanted` ones the header declares, each kept only when the header lays out all of it
    for name in wanted:
        if name not in structs and hdr.find(name) is not None:
            trial, missing = dict(structs), []
            lay_out(hdr, trial, [name], missing)
            if not missing:
                structs = trial
    return dict(sorted(structs.items())), problems


def lay_out(hdr: Headers, structs: dict, todo: list, problems: list) -> None:
    """Add to `structs` each structure of `todo` and every structure nested in it, laid out
    from the header (a problem for each one the header does not lay out)."""
    while todo:
        ref = todo.pop()
        if ref in structs:
            continue
        agg = hdr.find(ref)
        size, _, rows = hdr.layout(agg) if agg is not None else (None, 1, [])
        if size is None:
            problems.append(f"{ref}: referred to, but neither wiretest nor the header gives its layout")
            continue
        entry = {"size": size}
        if agg.kind == "union":
            entry["kind"] = "union"
        if agg.packed:
            entry["packed"] = True
        entry["cite"] = f"{agg.cite} (wiretest asserts nothing of it)"
        entry["fields"] = [header_row(hdr, n, o, m, c, flex) for n, o, m, c, flex, _ in rows if m.ctype != "pointer"]
        entry["header_fields"] = [f["name"] for f in entry["fields"]]
        mark_unions(entry["fields"], entry, ref)
        structs[ref] = entry
        todo += [f["type"][7:] for f in entry["fields"] if f["type"] and f["type"].startswith("struct ")]


def header_row(hdr: Headers, name, offset, m: Member, count, flexible) -> dict:
    es = hdr.elem_size(m)
    type_ = hdr.type_of(m.ctype, es) if m.nested is None else f"{m.nested.kind} {m.nested.name}".replace("union ", "struct ")
    row = {"name": name, "offset": offset}
    dims = hdr.dims(m)
    if flexible:
        row.update(size=0, type=type_, flexible=True, count=0)
        if len(dims) > 1:
            row["elem_size"] = es * dims[1]
    elif count is not None:
        if len(dims) > 1:
            inner = 1
            for d in dims[1:]:
                inner *= d
            row.update(size=es * count, type=type_, count=dims[0], elem_size=es * inner)
        else:
            row.update(size=es * count, type=type_, count=count)
    else:
        row.update(size=es, type=type_)
    return row


def add_header_fields(hdr: Headers, agg: Aggregate | None, entry: dict, fields: list, name: str) -> list:
    """Fields the header declares and wiretest does not assert, placed by the header's layout,
    but only when that layout reproduces every offset and size wiretest asserts."""
    if agg is None:
        return []
    size, _, rows = hdr.layout(agg)
    if size is None or size != entry["size"]:
        return []
    by_name = {r[0]: r for r in rows}
    for f in fields:
        if "." in f["name"]:
            continue
        r = by_name.get(f["name"])
        if r is None:
            if f.get("condition"):
                continue
            return []
        if r[1] != f["offset"]:
            return []
    asserted = {f["name"].split(".")[0] for f in fields}
    extra = []
    for n, o, m, c, flex, _ in rows:
        if n in asserted or m.ctype == "pointer":
            continue
        row = header_row(hdr, n, o, m, c, flex)
        if row["type"] is None:
            continue
        extra.append(row)
    fields.extend(extra)
    return [r["name"] for r in extra]


def mark_unions(fields: list, entry: dict, name: str) -> None:
    """Fields sharing a start offset are union members; a union type's members all are."""
    solid = [f for f in fields if not f.get("flexible")]
    for f in solid:
        if entry.get("kind") == "union":
            f["union"] = name
        elif sum(g["offset"] == f["offset"] for g in solid) > 1:
            f["union"] = f"anon@{f['offset']}"


def unasserted(entry: dict, asserted: dict) -> list:
    """Byte ranges no wiretest field assertion covers."""
    covered = [0] * entry["size"]
    for f in entry["fields"]:
        if f["name"] in asserted:
            for b in range(f["offset"], min(entry["size"], f["offset"] + f["size"])):
                covered[b] = 1
    gaps, start = [], None
    for i, c in enumerate(covered + [1]):
        if not c and start is None:
            start = i
        elif c and start is not None:
            gaps.append([start, i])
            start = None
    return gaps


# --------------------------------------------------------------------------- names and swabbing

def today_names(structs: dict, struct: str, today_layout: dict) -> dict:
    """today's field name -> the release's name of the field whose bytes start at or cover it, for
    each of today's fields the release's structure does not have under that name."""
    out = {}
    mine = [f for f in structs.get(struct, {}).get("fields", []) if not f.get("flexible")]
    have = {f["name"] for f in structs.get(struct, {}).get("fields", [])}
    for f in today_layout:
        if f.get("flexible") or f["name"] in have:
            continue
        same = [g for g in mine if g["offset"] == f["offset"] and g["size"] == f["size"]]
        cover = same or [g for g in mine if g["offset"] <= f["offset"] and f["offset"] + f["size"] <= g["offset"] + g["size"]]
        if cover and cover[0]["name"] != f["name"]:
            out[f["name"]] = cover[0]["name"]
    return out


SWAB_FILES = (PACK_GENERIC, "lustre/obdclass/llog_swab.c")


def swab_functions(tree: Tree) -> dict:
    """{structure: (function, ...)}: every swab routine of pack_generic.c and llog_swab.c that
    takes one pointer to a structure (void lustre_swab_X(struct T *p)), by the structure."""
    out: dict[str, list] = {}
    for path in SWAB_FILES:
        clean = strip_comments(tree.read(path) or "")
        for m in re.finditer(r"^(?:static\s+)?(?:inline\s+)?void\s+(lustre_swab_\w+)\s*\(\s*struct\s+(\w+)\s*\*\s*\w+\s*\)\s*\{",
                             clean, re.M):
            out.setdefault(m.group(2), []).append(m.group(1))
    return {k: tuple(v) for k, v in sorted(out.items())}


def swabbed_fields(tree: Tree, struct: str, funcs: dict = SWAB_FUNCS) -> tuple[set, list]:
    """Names of the struct's fields that a swab statement of its routines swaps, and cites.
    A field handed whole to another swab function (lustre_swab_obdo(&b->oa)) counts as swapped."""
    names, cites = set(), []
    for func in funcs[struct]:
        got, path = None, PACK_GENERIC
        for path in SWAB_FILES:
            got = function_body(tree.read(path) or "", func)
            if got:
                break
        if not got:
            continue
        body, line = got
        found = re.findall(r"__swab(?:16|32|64)s\s*\(\s*(?:\(\s*\w+\s*\*\s*\)\s*)?&\s*\w+\s*->\s*(\w+)", body)
        if funcs is not SWAB_FUNCS:
            found += re.findall(r"\blustre_swab_\w+\s*\(\s*&\s*\(?\s*\w+\s*->\s*(\w+)\s*\)?\s*[,)]", body)
        names.update(found)
        cites.append(f"{path}:{line} {func}")
    return names, cites


# The unions a routine swaps as one of their members (facts_extra.yaml swab: union_as), with
# that member and the routine.  lustre_swab_ldlm_policy_data swaps l_extent's three fields and
# then two of l_flock's; before LU-15527 (2.16) the second of those was lfw_owner, which lies
# at l_extent.gid's bytes, so lfw_owner was swapped twice (left as sent) and lfw_padding never.
UNION_SWAB_FUNCS = {"ldlm_wire_policy_data": ("l_flock", "lustre_swab_ldlm_policy_data")}


def union_member_unswabbed(tree: Tree, structs: dict, union: str, member: str, func: str):
    """{member, struct (the member's structure), fields (those `func` leaves as sent), cite}:
    each `__swabNNs(&p->view.field)` of the routine swaps the bytes of `field` in the union's
    `view`; a member field whose bytes are swapped an even number of times, none included, is
    left as sent, one swapped an odd number of times, once at its own size, is swapped.  None
    if the routine is not in the tree; a problem (a string) if it or a structure cannot be
    read, or a swap covers part of a field or several (no rule of this kind then)."""
    got = None
    for path in SWAB_FILES:
        got = function_body(tree.read(path) or "", func)
        if got:
            break
    if not got:
        return None
    if union not in structs:
        return f"{func}: no layout of union {union}"
    body, line = got
    views = {f["name"]: f for f in structs[union]["fields"]}

    def layout(type_name):
        name = type_name[len("struct "):] if type_name.startswith("struct ") else None
        return {f["name"]: f for f in structs[name]["fields"]} if name in structs else None
    counts, spans = [0] * structs[union]["size"], set()
    for bits, view, field in re.findall(r"__swab(16|32|64)s\s*\(\s*&\s*\w+\s*->\s*(\w+)\s*\.\s*(\w+)\s*\)", body):
        fields = layout(views[view]["type"]) if view in views else None
        if not fields or field not in fields or fields[field]["size"] != int(bits) // 8:
            return f"{func}: cannot place the swap of {view}.{field}"
        at = views[view]["offset"] + fields[field]["offset"]
        spans.add((at, fields[field]["size"]))
        for b in range(at, at + fields[field]["size"]):
            counts[b] += 1
    mtype = views[member]["type"][len("struct "):] if member in views else None
    fields = layout(views[member]["type"]) if member in views else None
    if not fields:
        return f"{func}: no layout of member {member} of {union}"
    left = []
    for f in fields.values():
        seen = {counts[views[member]["offset"] + f["offset"] + b] for b in range(f["size"])}
        if len(seen) != 1:
            return f"{func}: swaps part of {member}.{f['name']}"
        at = views[member]["offset"] + f["offset"]
        if seen.pop() % 2 == 0:
            left.append(f["name"])
        elif (at, f["size"]) not in spans:      # swapped, but not as one integer of its own size
            return f"{func}: swaps {member}.{f['name']} other than at its own size"
    return {"member": member, "struct": mtype, "fields": sorted(left),
            "cite": f"{path}:{line} {func} (bytes swapped an even number of times are left as sent)"}


# --------------------------------------------------------------------------- connect flags

def connect_section(tree: Tree, hdr: Headers) -> dict:
    idl = hdr.uapi + "lustre_idl.h"
    text = tree.read(idl)
    m = Macros()
    m.add(text, idl)
    clean = strip_comments(text)
    flags, flags2 = {}, {}
    for mm in re.finditer(r"^[ \t]*#[ \t]*define[ \t]+(OBD_CONNECT2?_\w+)[ \t]+(0x[0-9a-fA-F]+)ULL", clean, re.M):
        table = flags2 if mm.group(1).startswith("OBD_CONNECT2_") else flags
        table[mm.group(1)] = {"value": int(mm.group(2), 16), "cite": f"{idl}:{line_of(clean, mm.start())}"}
    m.text["LRU_RESIZE_CONNECT_FLAG"] = "OBD_CONNECT_LRU_RESIZE"      # HAVE_LRU_RESIZE_SUPPORT (default)
    out = {"flags": flags, "flags2": flags2}
    for key, macro in (("ost_supported", "OST_CONNECT_SUPPORTED"), ("ost_supported2", "OST_CONNECT_SUPPORTED2")):
        value = m.value(m.text.get(macro, "")) if macro in m.text else None
        if value is None:
            raise SystemExit(f"gen_release_facts: cannot compute {macro} from {idl}")
        names = sorted((n for n, r in (flags2 if key.endswith("2") else flags).items() if r["value"] & value),
                       key=lambda n: (flags2 if key.endswith("2") else flags)[n]["value"])
        out[key] = {"value": value, "hex": f"{value:#x}", "names": names,
                    "cite": f"{m.where[macro]} {macro} (HAVE_LRU_RESIZE_SUPPORT defined, configure's default)"}
    return out


def valid_bits_section(tree: Tree, hdr: Headers) -> dict:
    """Every OBD_MD_* bit the release's lustre_idl.h defines as a number: name -> value, cite."""
    idl = hdr.uapi + "lustre_idl.h"
    clean = strip_comments(tree.read(idl))
    bits = {}
    for mm in re.finditer(r"^[ \t]*#[ \t]*define[ \t]+(OBD_MD_\w+)[ \t]+\(?[ \t]*(0[xX][0-9a-fA-F]+)ULL[ \t]*\)?",
                          clean, re.M):
        bits.setdefault(mm.group(1), {"value": int(mm.group(2), 16), "cite": f"{idl}:{line_of(clean, mm.start())}"})
    return bits


# --------------------------------------------------------------------------- wire errnos

ERRNO_H = "lustre/include/lustre_errno.h"


def errno_section(tree: Tree) -> dict:
    """The wire errno numbers: every LUSTRE_E* of lustre_errno.h, keyed by the host name."""
    text = tree.read(ERRNO_H)
    if text is None:
        return {}
    clean = strip_comments(text)
    out = {}
    for m in re.finditer(r"^[ \t]*#[ \t]*define[ \t]+LUSTRE_(E\w+)[ \t]+(\d+)[ \t]*$", clean, re.M):
        out[m.group(1)] = {"wire": int(m.group(2)), "cite": f"{ERRNO_H}:{line_of(clean, m.start())}"}
    return dict(sorted(out.items(), key=lambda kv: (kv[1]["wire"], kv[0])))


# --------------------------------------------------------------------------- layout.c

def layout_section(tree: Tree, opcodes: dict) -> tuple[dict, dict]:
    text = tree.read(LAYOUT) or ""
    clean = strip_comments(text)
    fields = {}
    for m in re.finditer(r"struct\s+req_msg_field\s+(RMF_\w+)\s*=\s*(?:#[^\n]*\n\s*)*DEFINE_MSGFL?\s*\((.*?)\)\s*;", clean, re.S):
        args = [" ".join(a.split()) for a in _split_top(m.group(2), ",")]
        wire_name = args[0].strip('"') if args else ""
        flags = [f.strip() for f in args[1].split("|")] if len(args) > 1 and args[1] != "0" else []
        size = args[2] if len(args) > 2 else ""
        st = re.search(r"(?:sizeof\s*\(\s*(?:struct|union)\s+(\w+)\s*\)|offsetof\s*\(\s*(?:struct|union)\s+(\w+)\s*,)", size)
        sc = re.search(r"sizeof\s*\(\s*(__[us]\d+)\s*\)", size)
        if st:
            what = st.group(1) or st.group(2)
        elif sc:
            what = SCALARS[sc.group(1)]
        elif "RMF_F_STRING" in flags:
            what = "string"
        elif size == "0":
            what = "empty"
        else:
            what = "raw"
        row = {"name": wire_name, "struct": what, "size": size, "flags": flags,
               "cite": f"{LAYOUT}:{line_of(clean, m.start())}"}
        if len(args) > 3 and args[3] not in ("NULL", "0"):
            row["swabber"] = args[3]
        fields[m.group(1)] = row
    lists = {}
    for m in re.finditer(r"static\s+const\s+struct\s+req_msg_field\s*\*\s*(\w+)\s*\[\s*\]\s*=\s*\{(.*?)\}\s*;", clean, re.S):
        lists[m.group(1)] = re.findall(r"&\s*(RMF_\w+)", m.group(2))
    formats = {}
    for m in re.finditer(r"struct\s+req_format\s+RQF_(\w+)\s*=\s*DEFINE_REQ_FMT0?\s*\((.*?)\)\s*;", clean, re.S):
        args = [" ".join(a.split()) for a in _split_top(m.group(2), ",")]
        client, server = args[-2], args[-1]
        req, rep = lists.get(client), lists.get(server)
        if req is None or rep is None:
            continue
        name = m.group(1)
        entry = {"opcode": opcodes.get(name), "cite": f"{LAYOUT}:{line_of(clean, m.start())} RQF_{name} ({client}, {server})",
                 "request": {str(i): fields[f]["struct"] for i, f in enumerate(req) if i and f in fields},
                 "reply": {str(i): fields[f]["struct"] for i, f in enumerate(rep) if i and f in fields},
                 "request_fields": req, "reply_fields": rep}
        formats[name] = entry
    return fields, dict(sorted(formats.items()))


# --------------------------------------------------------------------------- behaviour

def behaviour_section(tree: Tree, hdr: Headers) -> dict:
    out = {}
    pg = tree.read(PACK_GENERIC) or ""

    def put(name, value, cite):
        out[name] = {"value": bool(value), "cite": cite, "detected_by": BEHAVIOUR_DOC[name]}

    got = function_body(pg, "lustre_msg_get_jobid")
    body, line = got if got else ("", 0)
    put("jobid_nul_terminated",
        re.search(r"pb_jobid\s*\[\s*LUSTRE_JOBID_SIZE\s*-\s*1\s*\]\s*=\s*'\\0'", body),
        f"{PACK_GENERIC}:{line} lustre_msg_get_jobid")
    own = re.search(r"lm_buflens\s*\[\s*MSG_PTLRPC_BODY_OFF\s*\]\s*<\s*sizeof\s*\(\s*struct ptlrpc_body\s*\)", body)
    asks = re.search(r"lustre_msg_buf_v2\s*\(\s*\w+\s*,\s*MSG_PTLRPC_BODY_OFF\s*,\s*sizeof\s*\(\s*"
                     r"(?:struct\s+ptlrpc_body|\*\s*\w+)\s*\)\s*\)", body)
    got = function_body(pg, "lustre_msg_buf_v2")
    refuses = got and re.search(r"if\s*\(\s*(?:unlikely\s*\(\s*)?buflen\s*<\s*min_size\s*\)?\s*\)\s*\{?[^}]*?return\s+NULL",
                                got[0])
    put("jobid_checks_body_len", own or (asks and refuses),
        f"{PACK_GENERIC}:{line} lustre_msg_get_jobid" + ("" if own or not (asks and refuses) else
                                                         f"; {PACK_GENERIC}:{got[1]} lustre_msg_buf_v2"))

    idl = hdr.uapi + "lustre_idl.h"
    itext = strip_comments(tree.read(idl))
    mm = re.search(r"^[ \t]*#[ \t]*define[ \t]+OBD_CONNECT2_REPLAY_CREATE\b", itext, re.M)
    put("replay_create", mm, f"{idl}:{line_of(itext, mm.start())} OBD_CONNECT2_REPLAY_CREATE" if mm
        else f"{idl} (no OBD_CONNECT2_REPLAY_CREATE)")

    objs = "lustre/ofd/ofd_objects.c"
    got = function_body(tree.read(objs) or "", "ofd_attr_handle_id")
    body, line = got if got else ("", 0)
    put("punch_projid", re.search(r"S_ISVTX\s*\)\s*\)?\s*&&\s*\(?\s*\w+\s*->\s*la_projid\s*!=\s*0", body),
        f"{objs}:{line} ofd_attr_handle_id")

    found = None
    for p in tree.paths:
        if p.startswith("lustre/ofd/") and p.endswith(".c"):
            got = function_body(tree.read(p), "ofd_check_resource_ids")
            if got:
                found = f"{p}:{got[1]} ofd_check_resource_ids"
                break
    put("check_resource_ids", found, found or "lustre/ofd/*.c (no ofd_check_resource_ids)")

    got = function_body(pg, "lustre_unpack_msg_v2")
    body, line = got if got else ("", 0)
    rounds = re.search(r"\bbuflen\s*=\s*(?:cfs_size_round|round_up)\s*\(\s*\w+\s*->\s*lm_buflens\s*\[\s*i\s*\]", body)
    raw_check = re.search(r"\w+\s*->\s*lm_buflens\s*\[\s*i\s*\]\s*(?:>|>=)", body)
    put("buflen_wrap", bool(rounds) and "int" in body.split("{", 1)[1].split(";", 1)[0] and not raw_check,
        f"{PACK_GENERIC}:{line} lustre_unpack_msg_v2")

    got = function_body(pg, "lustre_msg_calc_cksum")
    sig = re.search(r"lustre_msg_calc_cksum\s*\(([^)]*)\)", got[0]).group(1) if got else ""
    put("cksum_has_buf_arg", "," in sig, f"{PACK_GENERIC}:{got[1] if got else 0} lustre_msg_calc_cksum({' '.join(sig.split())})")

    # the target rules that differ between releases (docs/target-rules.md, "Releases")
    def body_of(path, name):
        got = function_body(tree.read(path) or "", name)
        return (got[0], f"{path}:{got[1]} {name}") if got else ("", f"{path} (no {name})")

    body, where = body_of("lustre/target/tgt_handler.c", "tgt_handler_find_check")
    put("unknown_opcode_eopnotsupp", re.search(r"-\s*EOPNOTSUPP\b", body), where)
    body, where = body_of("lustre/ptlrpc/niobuf.c", "ptlrpc_send_error")
    put("erofs_sent_as_reply", re.search(r"!=\s*-\s*EROFS\b", body), where)
    body, where = body_of("lustre/ofd/ofd_dev.c", "ofd_create_hdl")
    put("create_trusts_last_id", body and not re.search(r"\bdiff\s*<=\s*-\s*OST_MAX_PRECREATE\b", body), where)
    put("create_reply_seq_width", re.search(r"o_valid\s*\|=\s*OBD_MD_FLSIZE\b", body), where)
    gap = re.search(r"diff\s*>\s*5\s*\*\s*OST_MAX_PRECREATE\s*\)(.*?)\bwhile\s*\(", body, re.S)
    put("create_gap_seq_width", gap and re.search(r"\bdiff\s*=\s*min\w*\s*\(\s*seq_width\b", gap.group(1)), where)
    body, where = body_of("lustre/ofd/ofd_dev.c", "ofd_punch_hdl")
    call = re.search(r"la_from_obdo\s*\(([^;]*)\)\s*;", body)
    put("punch_sets_ids", call and all(b in call.group(1) for b in ("OBD_MD_FLUID", "OBD_MD_FLGID", "OBD_MD_FLPROJID")),
        where)
    body, where = body_of("lustre/ptlrpc/niobuf.c", "ptlrpc_send_reply")
    put("reply_body_shrunk", re.search(r"lustre_shrink_msg\s*\([^;]*sizeof\s*\(\s*struct\s+ptlrpc_body_v2\s*\)", body),
        where)
    return out


# --------------------------------------------------------------------------- assembling

def seed_structs() -> tuple:
    """The structures the suite's `structs` capability certifies: the seed structures of
    spec/layouts.json and those nested in them (some, such as close_data, no wiretest.c
    asserts: they are laid out from the headers)."""
    table = json.loads((ROOT / "ptlrpc_conformance" / "spec" / "layouts.json").read_text())["structs"]
    out, todo = set(), [n for n, e in table.items() if e.get("seed")]
    while todo:
        name = todo.pop()
        if name in out or name not in table:
            continue
        out.add(name)
        todo += [f["type"][7:] for f in table[name]["fields"] if f["type"].startswith("struct ")]
    return tuple(sorted(out))


def today_structs() -> tuple:
    """Every structure of today's file (the committed 2.17.57 one): an older release whose
    wiretest.c asserts nothing of one (mdc_swap_layouts before 2.17.0, lmv_user_md_v1 before
    2.17.57) still has it when its headers declare it."""
    own = OUTPUT_DIR / f"{TODAY}.json"
    if not own.exists():
        return seed_structs()
    return tuple(sorted(json.loads(own.read_text())["structs"]))


def today_struct_fields(struct: str, structs: dict, release: str) -> list:
    """Today's field list of a structure: the release's own when it is today's release, else the
    committed 2.17.57 file's (spec/layouts.json's before there is one)."""
    if release == TODAY:
        return structs[struct]["fields"]
    own = OUTPUT_DIR / f"{TODAY}.json"
    table = json.loads(own.read_text())["structs"] if own.exists() else \
        json.loads((ROOT / "ptlrpc_conformance" / "spec" / "layouts.json").read_text())["structs"]
    return table[struct]["fields"]


def today_layouts(all_structs: bool = False) -> dict:
    """Field lists of today's lustre_msg_v2 / ptlrpc_body_v3 (`all_structs`: of every structure),
    from the committed 2.17.57 file when it exists (the generator run on v2_17_57 provides it),
    else from spec/layouts.json."""
    own = OUTPUT_DIR / f"{TODAY}.json"
    if own.exists():
        structs = json.loads(own.read_text())["structs"]
    else:
        structs = json.loads((ROOT / "ptlrpc_conformance" / "spec" / "layouts.json").read_text())["structs"]
    return {n: structs[n]["fields"] for n in (structs if all_structs else SWAB_FUNCS)}


REQUIRED = (WIRETEST, PACK_GENERIC, LAYOUT, "lustre/ofd/ofd_objects.c")


def build(tree: Tree, today: dict | None = None) -> dict:
    release = release_of(tree)
    tree.uapi_dir()
    missing = [p for p in REQUIRED if not tree.exists(p)]
    if missing:
        raise SystemExit(f"gen_release_facts: not a whole lustre-release tree: no {', '.join(missing)}")
    tag = tree.tag or "v" + release.replace(".", "_")
    hdr = Headers(tree)
    wt = tree.read(WIRETEST)
    if wt is None:
        raise SystemExit(f"gen_release_facts: no {WIRETEST} in the tree")
    wire = parse_wiretest(wt)
    structs, problems = build_structs(hdr, wire, today_structs() if release != TODAY else seed_structs())
    if today is None:
        today = {n: structs[n]["fields"] for n in SWAB_FUNCS} if release == TODAY else today_layouts()

    constants = {n: {"value": v, "cite": f"{WIRETEST}:{line}", **({"condition": c} if c else {})}
                 for n, (v, line, c) in wire["constants"].items()}
    for n, (expr, line, c) in wire["const_exprs"].items():
        def offset_of(m):
            f = next((f for f in structs.get(m.group(1), {}).get("fields", []) if f["name"] == m.group(2)), None)
            if f is None:
                raise KeyError(m.group(0))
            return str(f["offset"])
        try:
            text = re.sub(r"(?:__builtin_)?offsetof\s*\(\s*(?:struct|union)\s+(\w+)\s*,\s*(\w+)\s*\)", offset_of, expr)
        except KeyError:
            text = None
        value = hdr.macros.value(text) if text is not None else None
        if value is None:
            problems.append(f"constant {n}: cannot evaluate {expr}")
            continue
        constants[n] = {"value": value, "cite": f"{WIRETEST}:{line}", "expression": " ".join(expr.split()),
                        **({"condition": c} if c else {})}
    constants = dict(sorted(constants.items()))

    field_names, unswabbed, swab_cites = {}, {}, {}
    for struct in SWAB_FUNCS:
        names = today_names(structs, struct, today[struct])
        if names:
            field_names[struct] = names
        swapped, cites = swabbed_fields(tree, struct)
        release_name = {f["name"]: names.get(f["name"], f["name"]) for f in today[struct]}
        unswabbed[struct] = [f["name"] for f in today[struct]
                             if release_name[f["name"]] not in swapped]
        swab_cites[struct] = "; ".join(cites)
    struct_unswabbed = {}
    # every structure with a swab routine of its own (the six the suite's vectors send
    # byte-swapped first, by the function named there), compared release to release by
    # spec/layouts.py swab_rules
    funcs = {**swab_functions(tree), **STRUCT_SWAB_FUNCS}
    for struct in funcs:
        if (struct not in structs or struct in SWAB_FUNCS or structs[struct].get("kind") == "union"
                or (release != TODAY and struct not in today_layouts(all_structs=True))):
            continue
        fields = [f for f in structs[struct]["fields"] if not f.get("flexible")]
        names = today_names(structs, struct, today_struct_fields(struct, structs, release))
        back = {}
        for now, old in names.items():
            back.setdefault(old, []).append(now)
        swapped, cites = swabbed_fields(tree, struct, funcs)
        if not cites:
            continue                         # the routine is not in this release's files
        # one-byte fields need no swapping (Lustre's code says so of ocd_blocksize)
        left = [f["name"] for f in fields if f["name"] not in swapped and f["size"] // f.get("count", 1) > 1]
        # today's fields, by the size of one element: padding that today holds one-byte fields
        # (lcm_ec_count) needs no swapping either
        now = {f["name"]: f["size"] // max(1, f.get("count", 1)) for f in today_struct_fields(struct, structs, release)}
        struct_unswabbed[struct] = {"fields": sorted({n for old in left
                                                      for n in back.get(old, []) + ([old] if old in now else [])
                                                      if now.get(n, 2) != 1}),
                                    "cite": "; ".join(cites)}
    # unions swapped as one member (facts_extra.yaml swab: union_as): the member's fields that
    # the union's routine leaves as sent, counted byte by byte over every view it swaps
    union_unswabbed = {}
    for union, (member, func) in UNION_SWAB_FUNCS.items():
        got = union_member_unswabbed(tree, structs, union, member, func)
        if isinstance(got, str):
            problems.append(f"union_unswabbed: {got}")
        elif got is not None:            # None: the routine is not in this release's files
            union_unswabbed[union] = got
    # other structures whose field at today's offset has another name
    if release != TODAY:
        try:
            now = json.loads((OUTPUT_DIR / f"{TODAY}.json").read_text())["structs"]
        except FileNotFoundError:
            now = {}
        for struct, entry in now.items():
            if struct in SWAB_FUNCS or struct not in structs or entry.get("kind") == "union":
                continue                     # a union's members all share offset 0: no renames to find
            names = today_names(structs, struct, entry["fields"])
            if names:
                field_names[struct] = names

    opcodes = {n: v for n, (v, _, _) in wire["constants"].items()}
    msg_fields, formats = layout_section(tree, opcodes)
    connect = connect_section(tree, hdr)
    behaviour = behaviour_section(tree, hdr)
    return {
        "format": FORMAT,
        "release": release,
        "tag": tag,
        "commit": tree.commit,
        "generated_by": "tools/gen_release_facts.py",
        "abi": "x86_64 (LP64); sizes in bytes",
        "note": "Generated from the release's own code; do not edit. Facts are Lustre's; the arrangement "
                "is this project's (docs/releases-facts.md).",
        "sources": dict(sorted(tree.read_files.items())),
        "structs": structs,
        "field_names": field_names,
        "unswabbed": unswabbed,
        "unswabbed_cite": swab_cites,
        "struct_unswabbed": struct_unswabbed,
        "union_unswabbed": union_unswabbed,
        "constants": constants,
        "errnos": errno_section(tree),
        "connect": connect,
        "valid_bits_defined": valid_bits_section(tree, hdr),
        "message_fields": msg_fields,
        "message_formats": formats,
        "behaviour": behaviour,
        "problems": problems,
    }


def render(facts: dict) -> str:
    return json.dumps(facts, indent=1) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--tree", type=pathlib.Path, help="a lustre-release directory")
    src.add_argument("--git", help="a lustre-release git directory (bare or not)")
    ap.add_argument("--tag", action="append", help=f"tag to read with --git (repeatable; default with --all: {', '.join(TAGS)})")
    ap.add_argument("--all", action="store_true", help="with --git: every tag the suite knows")
    ap.add_argument("--out", type=pathlib.Path, default=OUTPUT_DIR, help="output folder (default: the package's releases/)")
    ap.add_argument("--check", action="store_true", help="compare with the file in --out; write nothing; exit 1 on a difference")
    args = ap.parse_args(argv)
    if args.git:
        tags = list(TAGS) if args.all else (args.tag or [])
        if not tags:
            ap.error("--git needs --tag TAG or --all")
        # 2.17.57 first: the other releases name their fields against it
        tags.sort(key=lambda t: t != "v2_17_57")
        trees = [Tree(gitdir=args.git, tag=t) for t in tags]
    else:
        if not args.tree.is_dir():
            ap.error(f"{args.tree} is not a directory")
        trees = [Tree(directory=args.tree)]
    rc = 0
    for tree in trees:
        facts = build(tree)
        text = render(facts)
        out = args.out / f"{facts['release']}.json"
        if args.check:
            if out.exists() and tree.commit is None:
                # a tree that is no git checkout cannot say its commit: compare the rest
                committed = json.loads(out.read_text())
                facts["commit"] = committed.get("commit")
                text = render(facts)
            if not out.exists():
                print(f"gen_release_facts: no {out} to check (release {facts['release']})", file=sys.stderr)
                rc = 1
            elif out.read_text() != text:
                print(f"gen_release_facts: {out} differs from what {facts['tag']} gives", file=sys.stderr)
                rc = 1
            else:
                print(f"gen_release_facts: {out} is up to date")
            continue
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
        print(f"gen_release_facts: wrote {out} ({len(facts['structs'])} structures, {len(facts['constants'])} "
              f"constants, {len(facts['message_formats'])} formats, {len(facts['problems'])} problems)")
    return rc


if __name__ == "__main__":
    sys.exit(main())
