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


__all__ = ["Codec", "CodecConfig", "CodecError", "ReferenceTestee", "Target", "TargetConfig", "make_testee"]
