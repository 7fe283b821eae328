"""Every door into the one ingest path.

Two doors, one path: the native batch API (`native.py`, `POST /api/v1/ingest`) and the
`ingest` command hand typed items to `ingest.batch_ingest`, which scrubs, classifies and
stores each item exactly once and writes the ledger. Beside them: API-key authentication
(`auth.py`), the per-key quota (`quota.py`), the body reader with its size and gzip limits
(`parsers.py`), the error shapes (`errors.py`), and the per-type normalization
(`normalize.py`, with `runner_events.py` for graph-tool-call runner events).
"""
