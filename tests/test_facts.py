"""Protocol facts live in one place: ptlrpc_conformance/spec/facts.json, generated from
spec-sources/ by tools/gen_facts.py.  Regenerating must change nothing."""
import subprocess
import sys

import yaml

from conftest import ROOT
from ptlrpc_conformance import spec


def test_regeneration_changes_nothing(spec_sources):
    """The generator's default sources are the repository's copy (spec-sources/)."""
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "gen_facts.py"), "--check"],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr


def test_message_layouts_match_wire_facts(spec_sources):
    wire = yaml.safe_load((spec_sources / "wire_facts.yaml").read_text())
    for name in ("lustre_msg_v2", "ptlrpc_body_v3", "ptlrpc_body_v2"):
        ours = spec.layout(name)
        theirs = wire["structs"][name]
        assert ours.size == theirs["size"]
        assert [(f.name, f.offset, f.size) for f in ours.fields] == \
               [(f["name"], f["offset"], f["size"]) for f in theirs["fields"]]


def test_constants_used_by_the_suite():
    assert spec.constant("LUSTRE_MSG_MAGIC_V2") == 0x0BD00BD3
    assert spec.constant("LUSTRE_MSG_MAGIC_V2_SWABBED") == 0xD30BD00B
    assert spec.constant("LUSTRE_MSG_MAGIC_V2_SWABBED") == int.from_bytes(
        spec.constant("LUSTRE_MSG_MAGIC_V2").to_bytes(4, "little"), "big")
    assert spec.constant("PTLRPC_MAX_BUFCOUNT") == 32
    assert spec.constant("PTLRPC_MAX_BUFLEN") == 1024000
    assert spec.constant("PTLRPC_BODY_V2_SIZE") == spec.layout("ptlrpc_body_v2").size == 152
    assert spec.constant("PTLRPC_BODY_V3_SIZE") == spec.layout("ptlrpc_body_v3").size == 184
    assert (spec.constant("PTL_RPC_MSG_REQUEST"), spec.constant("PTL_RPC_MSG_ERR"),
            spec.constant("PTL_RPC_MSG_REPLY")) == (4711, 4712, 4713)
    assert spec.errno_value("ENOTCONN") == 107 and spec.errno_name(22) == "EINVAL"


def test_limits_arithmetic_from_limits_md():
    """PTLRPC_MAX_BUFLEN = max(OST_IO_MAXREQSIZE, MDS_REG_MAXREQSIZE, OUT_MAXREQSIZE) on 4 KiB pages."""
    ost_sum = 480 + 16 * (67108864 >> 12)
    ost_io = max(16 * 1024, ((ost_sum - 1) | 1023) + 1)
    mds_reg = ((max(66288, 362 + 2000 * 24) + 1023) >> 10) << 10
    assert max(ost_io, mds_reg, 1000 * 1024) == spec.constant("PTLRPC_MAX_BUFLEN")
