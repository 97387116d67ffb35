"""The harness: everything between a conformance case and an implementation under test.

Subpackages, by job (docs/architecture.md walks one case through them):

  transport/  the adapter interface and its loaders: in-process, exec: (testee protocol v1
              over a pipe), tshark; the protocol's message shapes and response checks
  data/       golden vectors and scenario files as data, the requirement and profile registry,
              the MESSAGE's field values
  verdicts/   the suite's own model of a receiver, derived variants, the judge of a case,
              the suite's encoder of messages, annotated hex dumps
  ost/        the suite's clients of a target: request builder and reply reader, what each
              request expects back, the invariants, sessions, scenarios and check-trace
  capture/    LNet over TCP: socklnd framing, pcap reading and writing
  outputs/    report.json, report.html, the level a run reached, the regression gate,
              certification documents, the verdict block
  tools/      developer commands: the benchmark and the mutant runner

docs/architecture.md says which of them may import which ("Who may import whom").

Modules at this level: `options` (exit statuses, argument types, the option table),
`settings` (a run's settings, resolved once) and `runstate` (what the plugin, report and CLI
share during a run).
"""
