"""The Lustre testee (examples/lustre-testee): the extraction script and the shim header,
against a small stand-in tree written here (CI has no Lustre tree); the real build and
certification only where a lustre-release tree is given ($PTLRPC_LUSTRE_TREE)."""
import importlib.util
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
    # no alternative is there: the first one's error
    with pytest.raises(X.ExtractError, match=r"lustre_req_layout\.h: no such file"):
        _extract(tree, functions_of=ALTERNATIVES)
    (tree / "lustre/ptlrpc/standin.c").write_text("int standin_swab(void)\n{\n\tif (1) {\n")
    with pytest.raises(X.ExtractError, match="unbalanced braces"):
        _extract(tree)
    proc = subprocess.run(["python3", str(SRC / "extract.py"), "--lustre", str(tmp_path / "nothing"),
                           "--out", str(tmp_path / "x.c")], capture_output=True, text=True)
    assert proc.returncode == 2 and "not a lustre-release tree" in proc.stderr and "Traceback" not in proc.stderr


# The layout of releases before 2.17.57: Lustre's uapi headers under lustre/include/uapi,
# LNet's under lnet/include/uapi (included by lustre_idl.h), a field that is padding there,
# and the swab helpers in lustre_net.h taking the request instead of the capsule.
OLD_UAPI = UAPI.replace("#include <linux/types.h>\n", "#include <linux/types.h>\n#include <linux/lnet/standin_lnet.h>\n")
OLD_UAPI = OLD_UAPI.replace("__u32 lm_magic;", "__u32 lm_magic; __u32 lm_padding_2 /* today lm_opc */;")
LNET = "#define STANDIN_LNET_ONLY 7\n"
NEW_UAPI = UAPI.replace("__u32 lm_magic;", "__u32 lm_magic; __u32 lm_opc;")

OLD_NET = HEADER + """
static inline bool standin_req_swabbed(struct ptlrpc_request *req, size_t index)
{
\treturn req->rq_req_swab_mask & (1 << index);
}
"""
NEW_LAYOUT = """
static inline bool standin_capsule_swabbed(struct req_capsule *pill, size_t index)
{
\treturn pill->rc_req_swab_mask & BIT(index);
}
"""
# the first alternative whose first function is there; a function looked for in two files
ALTERNATIVES = (
    ((("lustre/include/lustre_req_layout.h", ("standin_capsule_swabbed",)),),
     (("lustre/include/lustre_net.h", ("standin_req_swabbed",)),)),
    (("lustre/ptlrpc/other.c", "lustre/ptlrpc/standin.c"), ("standin_swab", "standin_round", "standin_static")),
)

LAYOUT_PROGRAM = r"""
#include "lustre_shim.h"
#include <linux/lustre/lustre_idl.h>
int counter;
#include "standin_extract.c"

int main(void)
{
	struct ptlrpc_request req = { 0 };
	unsigned char digits[] = "123456789";
	unsigned char hash[4];
	unsigned int hlen = sizeof hash;
	__u32 crc;

	CLASSERT(sizeof(__u32) == 4);
#ifdef LUSTRE_EXTRACT_PARAMS_standin_req_swabbed
	req.rq_req_swab_mask = 1U << 31;
	printf("old %d fields %d\n", standin_req_swabbed(&req, 31), LUSTRE_EXTRACT_FIELD_lm_padding_2);
#else
	req.rq_pill.rc_req_swab_mask = 1U << 31;
	printf("new %d fields %d\n", standin_capsule_swabbed(&req.rq_pill, 31), LUSTRE_EXTRACT_FIELD_lm_opc);
#endif
	cfs_crypto_hash_digest(CFS_HASH_ALG_CRC32, digits, 9, NULL, 0, hash, &hlen);
	memcpy(&crc, hash, 4);
	printf("size_round %zx %zx crypto %08x %u\n", cfs_size_round(0xFFFFFFF9u), cfs_size_round(9), crc, hlen);
	return 0;
}
"""


@pytest.fixture(params=["2.17.57", "2.12.9"])
def layout(request, tmp_path):
    """A stand-in tree of each layout (shape only, nothing of Lustre's): its root and version."""
    root = tmp_path / f"lustre-{request.param}"
    if request.param == "2.17.57":
        files = (("include/uapi/linux/lustre/lustre_idl.h", NEW_UAPI), ("lustre/include/lustre_net.h", HEADER),
                 ("lustre/include/lustre_req_layout.h", NEW_LAYOUT))
    else:
        files = (("lustre/include/uapi/linux/lustre/lustre_idl.h", OLD_UAPI),
                 ("lnet/include/uapi/linux/lnet/standin_lnet.h", LNET), ("lustre/include/lustre_net.h", OLD_NET),
                 ("lustre/include/lustre_req_layout.h", "/* no swab helpers here before 2.15 */\n"))
    for rel, text in files + (("lustre/ptlrpc/standin.c", SOURCE),
                              ("LUSTRE-VERSION-GEN", f"#!/bin/sh\nDEFAULT_VERSION={request.param}\n")):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root, request.param


def test_both_uapi_layouts_and_the_helpers_each_release_has(layout, tmp_path):
    """2.17.57 keeps the uapi headers in include/uapi, older releases in lustre/include/uapi
    and lnet/include/uapi; the extraction finds them, picks the swab helpers the tree has,
    and lists its functions' parameters and its header's fields for the testee's #if."""
    _need_cc()
    tree, version = layout
    text, info = _extract(tree, functions_of=ALTERNATIVES)
    old = version == "2.12.9"
    assert info["version"] == version
    assert info["uapi"] == ("lustre/include/uapi" if old else "include/uapi")
    chosen = "standin_req_swabbed" if old else "standin_capsule_swabbed"
    assert info["functions"] == [chosen, "standin_swab", "standin_round", "standin_static"]
    assert f"#define LUSTRE_EXTRACT_PARAMS_{chosen} 2" in text
    assert "#define LUSTRE_EXTRACT_PARAMS_standin_swab 1" in text
    assert ("standin_capsule_swabbed" in text) != old and ("standin_req_swabbed" in text) == old
    assert '"lustre/ptlrpc/standin.c"\nint standin_swab(__u32 *p)' in text     # the second file named
    assert info["fields"]["lustre_msg_v2"] == ["lm_bufcount", "lm_secflvr", "lm_magic",
                                               "lm_padding_2" if old else "lm_opc", "lm_buflens"]
    assert ("#define LUSTRE_EXTRACT_FIELD_lm_opc 1" in text) != old
    assert "#define STANDIN_LNET_ONLY" not in text      # the LNet uapi header was seen
    (tmp_path / "standin_extract.c").write_text(text)
    (tmp_path / "prog.c").write_text(LAYOUT_PROGRAM)
    exe = tmp_path / "prog"
    includes = [a for d in X.uapi_dirs(tree) for a in ("-I", str(d))]
    proc = subprocess.run(["cc", "-std=gnu11", "-Wall", "-Werror", "-Wno-unused-function", "-I", str(SRC),
                           "-I", str(tmp_path), *includes, "-o", str(exe), str(tmp_path / "prog.c")],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    out = subprocess.run([str(exe)], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("old 1 fields 1\n" if old else "new 1 fields 1\n")
    # cfs_size_round sums in 64 bits; libcfs's CRC32 is crc32_le seeded with ~0, no inversion
    assert "size_round 100000000 10 crypto 340bc6d9 4\n" in out.stdout
    # the Makefile hands the compiler the layout's uapi directories
    require_tool("make")
    dry = subprocess.run(["make", "-n", "-C", str(SRC), f"LUSTRE={tree}", f"BUILD={tmp_path / 'build'}"],
                         capture_output=True, text=True)
    assert dry.returncode == 0, dry.stderr
    compile_line = next(line for line in dry.stdout.splitlines() if " -o " in line and "main.c" in line)
    for d in X.UAPI_DIRS:
        assert (f"-I{tree / d}" in compile_line) == (tree / d).is_dir(), d


def test_make_without_a_tree_says_how_to_give_one():
    require_tool("make")
    proc = subprocess.run(["make", "-C", str(SRC), "BUILD=/nonexistent-build-dir"], capture_output=True, text=True)
    assert proc.returncode != 0 and "make LUSTRE=/path/to/lustre-release" in proc.stderr


TREE = os.environ.get("PTLRPC_LUSTRE_TREE")


@pytest.mark.skipif(not TREE, reason="not run: $PTLRPC_LUSTRE_TREE does not name a lustre-release tree, and the "
                                     "real build and certification need one (examples/lustre-testee/README.md)")
def test_real_lustre_agrees_except_the_documented_wrap(run_cli, tmp_path):
    build = tmp_path / "build"
    proc = subprocess.run(["make", "-C", str(SRC), f"LUSTRE={TREE}", f"BUILD={build}"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run = run_cli("--iut", f"exec:{build / 'lustre-testee'}")
    bad = {c["id"]: c for c in run.report["cases"] if c["verdict"] in ("fail", "error")}
    # every failing case is a crash on a buffer length whose rounding wraps (HDR-BUFLEN-2, HDR-8 (wrap))
    assert bad, "the 0xFFFFFFF9..0xFFFFFFFF wrap no longer fails: update docs/divergences.md"
    for cid, c in bad.items():
        assert c["verdict"] == "error" and "signal 11" in c["message"], cid
        assert "HDR-BUFLEN-2" in c["requirements"] or "(wrap)" in c["message"], cid
