"""The bundled reference implementation: the default implementation under test.

It is reached by the suites only through the adapter interface, like any other IUT.
`make_testee()` is the factory that `--iut reference` and
`--iut python:ptlrpc_conformance.reference:make_testee` load.
"""
from .codec import Codec, CodecConfig, CodecError
from .target import Target, TargetConfig
from .testee import ReferenceTestee


def make_testee(config: CodecConfig | None = None, **kw) -> ReferenceTestee:
    return ReferenceTestee(config, **kw)


def release_testee(release: str) -> ReferenceTestee:
    """The reference decoding as the code of an older Lustre release does (`--iut
    reference:RELEASE`): that release's swab lists, and, where its lustre_msg_get_jobid does
    not NUL-terminate, an unterminated jobid read whole.  Facts from spec/releases/."""
    from ptlrpc_conformance.spec import releases
    facts = releases.load(release)
    unswabbed = frozenset(facts["unswabbed"]["lustre_msg_v2"] + facts["unswabbed"]["ptlrpc_body_v3"])
    terminated = facts["behaviour"]["jobid_nul_terminated"]["value"]
    config = CodecConfig(unswabbed=unswabbed,
                         **({} if terminated else {"jobid_chars": CodecConfig().jobid_chars + 1}))
    return ReferenceTestee(config, name=f"ptlrpc-conformance reference (as Lustre {release})")


__all__ = ["Codec", "CodecConfig", "CodecError", "ReferenceTestee", "Target", "TargetConfig", "make_testee",
           "release_testee"]
