"""``evalharness traces receive``: an OTLP/HTTP endpoint that appends the spans an
application's exporter sends to rotated files our readers read (docs/traces-receive.md).

:mod:`.otlp` decodes and checks a request and encodes the answers, :mod:`.writer` appends to
the files (one thread, behind a bounded queue), :mod:`.server` is the HTTP side and its
back-pressure, :mod:`.join` joins what was received to cases.
"""
