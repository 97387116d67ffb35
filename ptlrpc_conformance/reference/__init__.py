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
    """The reference as the code of an older Lustre release behaves (`--iut
    reference:RELEASE`): its decoding follows that release's swab lists, structure layouts and
    valid-bit table (in today's field names: spec/layouts.py view, swab_rules, valid_bits) and, where its
    lustre_msg_get_jobid does not NUL-terminate, reads an unterminated jobid whole; its
    target answers as that release's OST (release_ost).  Facts from spec/releases/."""
    from ptlrpc_conformance.spec import layouts, releases
    from .structs import StructConfig
    facts = releases.load(release)
    unswabbed = frozenset(facts["unswabbed"]["lustre_msg_v2"] + facts["unswabbed"]["ptlrpc_body_v3"])
    terminated = facts["behaviour"]["jobid_nul_terminated"]["value"]
    config = CodecConfig(unswabbed=unswabbed,
                         **({} if terminated else {"jobid_chars": CodecConfig().jobid_chars + 1}))
    structs = StructConfig(layouts=layouts.view(release), swab=layouts.swab_rules(release),
                           valid_bits=layouts.valid_bits(release))
    return ReferenceTestee(config, struct_config=structs, target_config=TargetConfig(release=release),
                           name=f"ptlrpc-conformance reference (as Lustre {release})")


def release_ost(release: str) -> ReferenceTestee:
    """The reference target answering as the OST of an older Lustre release does, where the
    target rules differ between releases (docs/target-rules.md, "Releases"): the facts of
    spec/releases/<release>.json decide (TargetConfig.release).  Its decoding stays the
    default release's."""
    return ReferenceTestee(target_config=TargetConfig(release=release),
                           name=f"ptlrpc-conformance reference (an OST of Lustre {release})")


# The reference in the configurations of Lustre's OST that change what a target answers, each
# declared in the hello (docs/testee-protocol.md §2.1.2):
#   --iut python:ptlrpc_conformance.reference:ost_without_project_quota
#   --iut python:ptlrpc_conformance.reference:ost_without_recovery
def ost_with_configuration(**settings) -> ReferenceTestee:
    """The reference OST set up with TargetConfig `settings`, declaring them in its hello."""
    return ReferenceTestee(target_config=TargetConfig(**settings), declare_configuration=True)


def ost_without_project_quota() -> ReferenceTestee:
    """An OST without project quota (ldiskfs without the project feature)."""
    return ost_with_configuration(project_quota=False)


def ost_without_recovery() -> ReferenceTestee:
    """An OST set up with recovery disabled: a restart remembers no client."""
    return ost_with_configuration(recovery=False)


__all__ = ["Codec", "CodecConfig", "CodecError", "ReferenceTestee", "Target", "TargetConfig", "make_testee",
           "ost_with_configuration", "ost_without_project_quota", "ost_without_recovery", "release_ost",
           "release_testee"]
