"""Every door into the one ingest path.

Two doors, one path: the native batch API (`native.py`, `POST /api/v1/ingest`, and the
`ingest` command) and the OTLP door (`otlp.py`, `POST /v1/traces`, with what a span means
in `otlp_spans.py`) hand items to `ingest.batch_ingest`, which scrubs, classifies and stores
each item exactly once and writes the ledger; the native door's request and response shapes
are in `serializers.py`. Both doors share API-key authentication (`auth.py`), the per-key
quota (`quota.py`), the pool's batch slots (`capacity.py`), the body reader with its size
and gzip limits (`parsers.py`) and the error handling (`errors.py`); items are parsed per type in
`normalize.py`, with `runner_events.py` for graph-tool-call runner events and `envelope.py`
for seed 004's error envelopes (and the taxonomy document runtimes read).
"""
