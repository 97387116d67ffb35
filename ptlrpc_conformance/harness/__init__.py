"""The harness: everything between a conformance case and an implementation under test.

Subpackages, by job (docs/architecture.md walks one case through them):

  transport/  the adapter interface and its loaders: in-process, exec: (testee protocol v1
              over a pipe), tshark; the protocol's message shapes and response checks
  data/       golden vectors and scenario files as data, the requirement and profile registry
  verdicts/   the suite's own model of a receiver, derived variants, the judge of a case,
              the suite's view of wire structures, the checksum helper
  ost/        the suite's clients of a target: request builder and reply reader, what each
              request expects back, the invariants, sessions, scenarios and check-trace
  capture/    LNet over TCP: socklnd framing, pcap reading and writing
  outputs/    report.json, report.html, junit helpers, the regression gate, certification
              documents, annotated hex dumps
  tools/      developer commands: the benchmark and the mutant runner

Modules at this level: `options` (exit statuses, argument types, the option table),
`runstate` (what the plugin, report and CLI share during a run) and three compatibility
paths documented before the split (`adapter`, `vectors`, `lnet`).
"""
