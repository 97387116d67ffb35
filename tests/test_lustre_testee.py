"""The Lustre testee (examples/lustre-testee): the extraction script and the shim header,
against a small stand-in tree written here (CI has no Lustre tree); the real build and
certification only where a lustre-release tree is given ($PTLRPC_LUSTRE_TREE)."""
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import textwrap

import pytest

from conftest import ROOT, require_tool

SRC = ROOT / "examples" / "lustre-testee"


def _extract_module():
    spec = importlib.util.spec_from_file_location("lustre_testee_extract", SRC / "extract.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


X = _extract_module()

UAPI = """\
#ifndef STANDIN_IDL_H
#define STANDIN_IDL_H
#include <linux/types.h>
#define MSG_PTLRPC_BODY_OFF 0
#define STANDIN_UAPI_ONLY 5      /* defined by the uapi header: never copied */
#define STANDIN_BOTH 11
struct lustre_msg_v2 { __u32 lm_bufcount; __u32 lm_secflvr; __u32 lm_magic; __u32 lm_buflens[]; };
#define lustre_msg lustre_msg_v2
#endif
"""

HEADER = """\
#define STANDIN_BOTH 99                     /* the uapi definition wins: not copied */
#define STANDIN_LIMIT (STANDIN_UNIT * 4)    /* reached only through another macro */
#define STANDIN_UNIT \\
\t(STANDIN_UAPI_ONLY + 3)
#define STANDIN_COUNT \\
\t(sizeof(((struct ptlrpc_request *)0)->rq_req_swab_mask) * 8)
#define rq_req_swab_mask rq_pill.rc_req_swab_mask
#define max(a, b) ((a) > (b) ? (a) : (b))   /* the shim's: not copied */
#define STANDIN_UNUSED 1234                 /* used by nothing: not copied */

enum standin_colour {
\tSTANDIN_RED = 2,   /* a comment, } with a brace */
\tSTANDIN_BLUE,
};
"""

SOURCE = """\
// SPDX-License-Identifier: GPL-2.0
/* a stand-in for pack_generic.c, written for the project's tests */
#include <lustre_net.h>

static int standin_static(__u32 x);          /* a declaration, not the definition */

int counter;

static inline __u32
standin_round(__u32 len)
{
\t/* "}" in a comment, '}' in a character, "{" in a string */
\tconst char *s = "{";
\t(void)s;
\treturn round_up(len, 8) + (STANDIN_LIMIT - 32) + (STANDIN_COUNT - 32);
}

static int standin_static(__u32 x)
{
\tCERROR("value %u, counted %d\\n", x, ++counter);
\tif (x == 0xdead)
\t\tLASSERT(x != 0xdead);
\treturn max(x, STANDIN_BLUE) + (max_t(int, 1, 2) - 2);
}

int standin_swab(__u32 *p)
{
\tBUILD_BUG_ON(sizeof(*p) != 4);
\t__swab32s(p);
\treturn standin_static(*p);
}
EXPORT_SYMBOL(standin_swab);
"""

SPEC = (("lustre/ptlrpc/standin.c", ("standin_swab", "standin_round", "standin_static")),)

PROGRAM = r"""
#include "lustre_shim.h"
#include <linux/lustre/lustre_idl.h>
int counter;                       /* a global of the stand-in source: extract.py copies functions only */
#include "standin_extract.c"

int main(int argc, char **argv)
{
	__u32 v = 0x01000000;
	unsigned char digits[] = "123456789";

	if (argc > 1)
		return standin_static(0xdead);
	printf("round %u %u %u\n", standin_round(0xFFFFFFF9u), standin_round(0xFFFFFFFFu), standin_round(9));
	int swabbed = standin_swab(&v);

	printf("swab %d counter %d\n", swabbed, counter);
	printf("crc %08x\n", crc32_le(~0U, digits, 9));
	printf("bit %lu page %lu status %d\n", BIT(5), PAGE_SIZE, ptlrpc_status_ntoh(-107));
	return 0;
}
"""


@pytest.fixture
def tree(tmp_path):
    root = tmp_path / "lustre-release"
    for rel, text in (("include/uapi/linux/lustre/lustre_idl.h", UAPI), ("lustre/include/lustre_net.h", HEADER),
                      ("lustre/ptlrpc/standin.c", SOURCE),
                      ("LUSTRE-VERSION-GEN", "#!/bin/sh\nDEFAULT_VERSION=9.8.7\n")):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def _extract(tree, **kw):
    return X.extract(tree, SRC / "lustre_shim.h", shutil.which("cc") or "cc", out_name="standin_extract.c",
                     functions_of=kw.get("functions_of", SPEC), seeds=("STANDIN_RED",),
                     headers=("lustre/include/lustre_net.h",))


def _need_cc():
    require_tool("cc")       # the Lustre testee is built with a C compiler


def test_extraction_copies_functions_and_the_macros_they_use(tree):
    _need_cc()
    text, info = _extract(tree)
    assert info["version"] == "9.8.7" and info["functions"] == ["standin_swab", "standin_round", "standin_static"]
    assert set(info["sha256"]) == {"lustre/include/lustre_net.h", "lustre/ptlrpc/standin.c"}
    # verbatim, each function after a #line naming where it comes from, the return type's line included
    assert '#line 9 "lustre/ptlrpc/standin.c"\nstatic inline __u32\nstandin_round(__u32 len)\n{' in text
    assert '#line 18 "lustre/ptlrpc/standin.c"\nstatic int standin_static(__u32 x)\n{' in text
    assert "EXPORT_SYMBOL" not in text and "int counter" not in text.split("/* ---- functions")[0]
    # prototypes first, so the order of definitions does not matter
    assert "static inline __u32 standin_round(__u32 len);" in text
    # macros: transitively (STANDIN_UNIT through STANDIN_LIMIT), continuation lines kept; not the
    # ones the uapi header or the shim define, nor the unused one
    macros = text.split("/* ---- enums")[0]
    for name in ("STANDIN_LIMIT", "STANDIN_UNIT", "STANDIN_COUNT", "rq_req_swab_mask"):
        assert f"#define {name}" in macros, name
    assert "#define STANDIN_UNIT \\\n\t(STANDIN_UAPI_ONLY + 3)" in macros
    for name in ("STANDIN_BOTH", "STANDIN_UAPI_ONLY", "max(", "STANDIN_UNUSED"):
        assert f"#define {name}" not in macros, name
    # the enum of an enumerator used (and of a seed), once
    assert text.count("enum standin_colour {") == 1
    # after a block from the tree, lines are the output file's again
    lines = text.split("\n")
    resets = [i for i, line in enumerate(lines) if line.startswith('#line') and "standin_extract.c" in line]
    assert resets and all(lines[i] == f'#line {i + 2} "standin_extract.c"' for i in resets)


def test_extracted_code_runs_on_the_shim(tree, tmp_path):
    """The shim gives the kernel's semantics the unpacking code depends on: round_up wraps in
    32 bits, CERROR evaluates its arguments, LASSERT aborts, crc32_le has no final inversion."""
    _need_cc()
    text, _ = _extract(tree)
    (tmp_path / "standin_extract.c").write_text(text)
    (tmp_path / "prog.c").write_text(PROGRAM)
    exe = tmp_path / "prog"
    proc = subprocess.run(["cc", "-std=gnu11", "-Wall", "-Werror", "-Wno-unused-function", "-I", str(SRC),
                           "-I", str(tmp_path), "-I", str(tree / "include/uapi"), "-o", str(exe), str(tmp_path / "prog.c")],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    out = subprocess.run([str(exe)], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    # round_up(0xFFFFFFF9, 8) and round_up(0xFFFFFFFF, 8) wrap to 0, as in the kernel
    assert "round 0 0 16\n" in out.stdout
    # __swab32s swapped 0x01000000 to 1, max(1, STANDIN_BLUE 3) = 3, CERROR's ++counter ran
    assert "swab 3 counter 1\n" in out.stdout
    assert "crc 340bc6d9\n" in out.stdout            # ~0xCBF43926: no final inversion
    assert "bit 32 page 4096 status -107\n" in out.stdout
    assert out.stderr == ""                          # CERROR prints only with LUSTRE_TESTEE_LOG
    logged = subprocess.run([str(exe)], capture_output=True, text=True, timeout=30,
                            env=dict(os.environ, LUSTRE_TESTEE_LOG="1"))
    assert "lustre: value 1, counted 1" in logged.stderr
    crashed = subprocess.run([str(exe), "assert"], capture_output=True, text=True, timeout=30)
    assert crashed.returncode == -signal.SIGABRT
    assert "LASSERT(x != 0xdead) failed at lustre/ptlrpc/standin.c:" in crashed.stderr


def test_extraction_errors_name_the_file(tree, tmp_path):
    _need_cc()
    with pytest.raises(X.ExtractError, match=r"standin\.c: no definition of standin_missing\(\)"):
        _extract(tree, functions_of=(("lustre/ptlrpc/standin.c", ("standin_missing",)),))
    with pytest.raises(X.ExtractError, match=r"nothere\.c: no such file"):
        _extract(tree, functions_of=(("lustre/ptlrpc/nothere.c", ("f",)),))
    (tree / "lustre/ptlrpc/standin.c").write_text("int standin_swab(void)\n{\n\tif (1) {\n")
    with pytest.raises(X.ExtractError, match="unbalanced braces"):
        _extract(tree)
    proc = subprocess.run(["python3", str(SRC / "extract.py"), "--lustre", str(tmp_path / "nothing"),
                           "--out", str(tmp_path / "x.c")], capture_output=True, text=True)
    assert proc.returncode == 2 and "not a lustre-release tree" in proc.stderr and "Traceback" not in proc.stderr


def test_extraction_runs_on_a_tree_of_the_older_layout(tree, tmp_path):
    """Up to 2.17.53 the uapi headers are under lustre/include/uapi, and lustre_idl.h includes
    LNet's from lnet/include/uapi: the extractor finds both."""
    _need_cc()
    old = tree / "lustre/include/uapi/linux/lustre"
    old.mkdir(parents=True)
    (tree / "include/uapi/linux/lustre/lustre_idl.h").rename(old / "lustre_idl.h")
    lnet = tree / "lnet/include/uapi/linux/lnet"
    lnet.mkdir(parents=True)
    (lnet / "standin-lnet.h").write_text("#define STANDIN_LNET 1\n")
    text = (old / "lustre_idl.h").read_text().replace("#include <linux/types.h>",
                                                      "#include <linux/types.h>\n#include <linux/lnet/standin-lnet.h>")
    (old / "lustre_idl.h").write_text(text)
    assert X.uapi_of(tree) == "lustre/include/uapi"
    out, info = _extract(tree)
    assert info["uapi"] == "lustre/include/uapi" and "standin_round" in out
    (tree / "lustre/include/uapi").rename(tmp_path / "gone")
    with pytest.raises(X.ExtractError, match="under include/uapi or lustre/include/uapi"):
        X.uapi_of(tree)


HELPER_TREES = {
    # release-like: (files, what plan_for must find)
    "capsule": ({"lustre/include/lustre_req_layout.h": "".join(
                    f"static inline bool {n}(struct req_capsule *pill)\n{{\n\treturn 0;\n}}\n"
                    for n in ("req_capsule_req_swabbed", "req_capsule_rep_swabbed", "req_capsule_set_req_swabbed",
                              "req_capsule_set_rep_swabbed", "req_capsule_req_need_swab")),
                 "lustre/include/lustre_net.h": "static inline bool req_capsule_rep_need_swab(struct req_capsule *p)"
                                                "\n{\n\treturn 0;\n}\n",
                 "lustre/ptlrpc/layout.c": "bool req_capsule_need_swab(struct req_capsule *p)\n{\n\treturn 0;\n}\n"
                                           "void req_capsule_set_swabbed(struct req_capsule *p)\n{\n}\n"
                                           # a request format field of a structure without a routine of its own
                                           "struct req_msg_field RMF_K =\n\tDEFINE_MSGF(\"k\", 0, "
                                           "sizeof(struct ll_fiemap_info_key),\n\t\t    lustre_swab_lu_fid, NULL);\n",
                 "lustre/ptlrpc/pack_generic.c": "__u32 lustre_msg_calc_cksum(struct lustre_msg *msg, __u32 buf)\n{\n"
                                                 "\treturn 0;\n}\n"
                                                 # a structure's swab routine, the helper it calls
                                                 "static void swab_half(__u32 *x)\n{\n}\n"
                                                 "void lustre_swab_lu_fid(struct lu_fid *fid)\n{\n"
                                                 "\tswab_half(&fid->f_oid);\n}\n"
                                                 "void lustre_swab_lustre_msg(struct lustre_msg *m)\n{\n}\n",
                 # one taking the buffer's length, marked server-only (2.15 on)
                 "lustre/ptlrpc/pack_server.c": "SERVER_ONLY int lustre_swab_object_update_request("
                                                "struct object_update_request *our,\n\t\t\t\t__u32 len)\n{\n"
                                                "\treturn 0;\n}\n",
                 "include/uapi/linux/lustre/lustre_idl.h": "struct m { __u32 lm_opc; };\n"
                                                           "struct b { __u32 pb_projid; __u32 pb_uid; };\n"},
                {"request_helpers": False, "cksum_takes_buffer": True, "lm_opc": True, "pb_projid": True,
                 "pb_uid": True, "swabbers": {
                     "lustre_swab_lu_fid": {"file": "lustre/ptlrpc/pack_generic.c", "returns": "void",
                                            "param": "struct lu_fid", "length": None},
                     "lustre_swab_lustre_msg": {"file": "lustre/ptlrpc/pack_generic.c", "returns": "void",
                                                "param": "struct lustre_msg", "length": None},
                     "lustre_swab_object_update_request": {"file": "lustre/ptlrpc/pack_server.c", "returns": "int",
                                                           "param": "struct object_update_request",
                                                           "length": "__u32"}},
                 "capsule_swabbers": {"ll_fiemap_info_key": "lustre_swab_lu_fid"}}),
    "request": ({"lustre/include/lustre_net.h": "".join(
                    f"static inline bool {n}(struct ptlrpc_request *req)\n{{\n\treturn 0;\n}}\n"
                    for n in ("lustre_req_swabbed", "lustre_rep_swabbed", "ptlrpc_req_need_swab", "ptlrpc_rep_need_swab",
                              "lustre_set_req_swabbed", "lustre_set_rep_swabbed")),
                 "lustre/ptlrpc/pack_generic.c": "void ptlrpc_buf_set_swabbed(struct ptlrpc_request *r)\n{\n}\n"
                                                 "bool ptlrpc_buf_need_swab(struct ptlrpc_request *r)\n{\n\treturn 0;\n}\n"
                                                 "__u32 lustre_msg_calc_cksum(struct lustre_msg *msg)\n{\n\treturn 0;\n}\n",
                 "lustre/include/uapi/linux/lustre/lustre_idl.h": "struct m { __u32 lm_padding_2; };\n"
                                                                  "struct b { __u32 pb_padding1; __u64 pb_padding64_2; };\n"},
                {"request_helpers": True, "cksum_takes_buffer": False, "lm_opc": False, "pb_projid": False,
                 "pb_uid": False, "swabbers": {}, "capsule_swabbers": {}}),
}


@pytest.mark.parametrize("style", sorted(HELPER_TREES))
def test_the_plan_follows_the_tree(style, tmp_path):
    """Where each swab helper is defined, whether lustre_msg_calc_cksum takes a buffer, and which
    of today's field names the tree's lustre_idl.h has decide what is extracted and the macros
    main.c reads (build/lustre_compat.h)."""
    files, facts = HELPER_TREES[style]
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    functions, found = X.plan_for(tmp_path)
    assert found == facts
    helpers = X.REQUEST_HELPERS if facts["request_helpers"] else X.CAPSULE_HELPERS
    planned = [n for rel, names in functions for n in names]
    assert set(helpers) <= set(planned) and planned[-len(X.PACK_GENERIC[1]):] == list(X.PACK_GENERIC[1])
    compat = X.compat_header(found)
    if style == "request":
        assert "#define LT_REQUEST_HELPERS 1" in compat and "lustre_msg_calc_cksum(m) : 0)" in compat
        assert "((m)->lm_padding_2)" in compat and "((pb)->pb_padding1)" in compat
        assert "#define LT_PB_GID(pb) LT_PB_HALF(pb, 1)" in compat
    else:
        assert "LT_REQUEST_HELPERS" not in compat and "MSG_PTLRPC_BODY_OFF)" in compat
        assert "((m)->lm_opc)" in compat and "((pb)->pb_uid)" in compat
        # the structures' swab routines and the helper they call, transitively, are extracted
        assert {"lustre_swab_lu_fid", "swab_half", "lustre_swab_lustre_msg",
                "lustre_swab_object_update_request"} <= set(planned)
        assert ("lustre/ptlrpc/pack_server.c", ("lustre_swab_object_update_request",)) in functions


OLD_RELEASE_PROGRAM = r"""
#include "lustre_compat.h"
#include "lustre_shim.h"

/* stand-ins of the 2.12-shaped structures and helpers (the project's, shape only) */
struct lustre_msg_v2 { __u32 lm_magic; __u32 lm_padding_2; };
struct ptlrpc_body_v3 { __u32 pb_padding1; __u64 pb_padding64_2; };
#define MSG_PTLRPC_HEADER_OFF 31
#define MSG_PTLRPC_BODY_OFF 0
static inline bool lustre_req_swabbed(struct ptlrpc_request *req, size_t index)
{
	return req->rq_req_swab_mask & (1 << index);
}
static inline bool lustre_rep_swabbed(struct ptlrpc_request *req, size_t index)
{
	return req->rq_rep_swab_mask & (1 << index);
}

int main(void)
{
	struct ptlrpc_request req;
	struct lustre_msg_v2 m = { 0, 0x04030201 };
	struct ptlrpc_body_v3 pb = { 0x0a0b0c0d, 0 };
	unsigned char wire[8] = { 1, 0, 0, 0, 2, 0, 0, 0 }, digits[] = "123456789", hash[4];
	unsigned int hlen = 4;
	__u32 crc;

	memset(&req, 0, sizeof req);
	LT_INIT_REQ(req);
	req.rq_req_swab_mask = 1U << MSG_PTLRPC_HEADER_OFF;
	memcpy(&pb.pb_padding64_2, wire, 8);
	CLASSERT(sizeof(m) == 8);
	cfs_crypto_hash_digest(CFS_HASH_ALG_CRC32, digits, 9, NULL, 0, hash, &hlen);
	memcpy(&crc, hash, 4);
	printf("swabbed %d %d opc %x projid %x uid %u gid %u\n", LT_SWABBED(req, 0), LT_SWABBED(req, 1),
	       LT_LM_OPC(&m), LT_PB_PROJID(&pb), LT_PB_UID(&pb), LT_PB_GID(&pb));
	printf("size_round %zx %zx crypto %08x %u\n", cfs_size_round(0xFFFFFFF9u), cfs_size_round(9), crc, hlen);
	return 0;
}
"""


def test_the_older_releases_build_on_the_shim(tmp_path):
    """What a 2.12 tree needs beyond the later ones compiles and behaves as Lustre's: the
    request's own swab masks (bit 31 tested with 1 << 31 in int, which the sanitize build's
    flags must let through), the padding read under today's names without swapping, the
    halves of pb_padding64_2 in memory order, cfs_size_round in size_t, and libcfs's CRC32
    (crc32_le seeded with ~0, no inversion)."""
    _need_cc()
    (tmp_path / "lustre_compat.h").write_text(X.compat_header(HELPER_TREES["request"][1]))
    (tmp_path / "prog.c").write_text(OLD_RELEASE_PROGRAM)
    makefile = (SRC / "Makefile").read_text()
    san = next(line for line in makefile.splitlines() if line.startswith("SAN ")).split("=", 1)[1].split()
    for flags in (["-O2"], ["-O1", *san]):
        exe = tmp_path / "prog"
        proc = subprocess.run(["cc", "-std=gnu11", "-Wall", "-Werror", "-Wno-unused-function", *flags,
                               "-I", str(SRC), "-I", str(tmp_path), "-o", str(exe), str(tmp_path / "prog.c")],
                              capture_output=True, text=True)
        if proc.returncode != 0 and "sanitize" in " ".join(flags) and "libasan" in proc.stderr:
            pytest.skip("this compiler has no AddressSanitizer runtime")
        assert proc.returncode == 0, proc.stderr
        out = subprocess.run([str(exe)], capture_output=True, text=True, timeout=30)
        assert out.returncode == 0, flags + [out.stderr]
        assert out.stdout == ("swabbed 1 0 opc 4030201 projid a0b0c0d uid 1 gid 2\n"
                              "size_round 100000000 10 crypto 340bc6d9 4\n"), flags


def test_make_without_a_tree_says_how_to_give_one():
    require_tool("make")
    proc = subprocess.run(["make", "-C", str(SRC), "BUILD=/nonexistent-build-dir"], capture_output=True, text=True)
    assert proc.returncode != 0 and "make LUSTRE=/path/to/lustre-release" in proc.stderr


TREE = os.environ.get("PTLRPC_LUSTRE_TREE")


@pytest.mark.skipif(not TREE, reason="not run: $PTLRPC_LUSTRE_TREE does not name a lustre-release tree, and the "
                                     "real build and certification need one (examples/lustre-testee/README.md)")
def test_real_lustre_agrees_except_the_documented_bugs(run_cli, tmp_path):
    """Lustre's own code of the tree, judged under its own release's profile, fails only the
    documented Lustre bugs: the wrap of a rounded buffer length (a read past the message,
    which the testee's guard page turns into a crash), the swab routines that trust a count
    of elements more than the bytes they are given hold (the `*-overclaim-be` structure
    cases: a read or write past the buffer, docs/certifications/lustre-*-notes.md) and, where
    the release does not NUL-terminate an unterminated jobid (2.12), that jobid."""
    from ptlrpc_conformance.harness.data import registry
    from ptlrpc_conformance.spec import releases
    build = tmp_path / "build"
    proc = subprocess.run(["make", "-C", str(SRC), f"LUSTRE={TREE}", f"BUILD={build}"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    info = json.loads((build / "lustre_extract.json").read_text())
    release = info["version"] if info["version"] in registry.releases() else registry.profile(None).release
    run = run_cli("--iut", f"exec:{build / 'lustre-testee'}", "--profile", f"lustre-{release}")
    assert run.report["lustre_version"] == release
    bad = {c["id"]: c for c in run.report["cases"] if c["verdict"] in ("fail", "error")}
    assert bad, "the 0xFFFFFFF9..0xFFFFFFFF wrap no longer fails: update docs/divergences.md"
    terminated = releases.load(release)["behaviour"]["jobid_nul_terminated"]["value"]
    for cid, c in bad.items():
        if c["verdict"] == "error":       # a crash: a buffer length whose rounding wraps, or an overclaim
            assert "signal 11" in c["message"], cid
            assert ("HDR-BUFLEN-2" in c["requirements"] or "(wrap)" in c["message"]
                    or cid.endswith("-overclaim-be.decode") and c["requirements"] == ["DEC-ROBUST-1"]), cid
        else:                             # 2.12's unterminated jobid, read whole
            assert not terminated and c["failed_requirements"] == ["BODY-JOBID-1"], cid
