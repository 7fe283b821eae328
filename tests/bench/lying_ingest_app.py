"""An ingest door that answers every batch "all accepted" and stores nothing, for
bench/ingest.py to measure as its fast path (``--app``): its answers pass, its database
check must not."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

from config.wsgi import application as desk


def application(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    if environ.get("PATH_INFO") != "/api/v1/ingest" or environ["REQUEST_METHOD"] != "POST":
        return desk(environ, start_response)  # /healthz and the rest: the desk's own
    body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
    items = json.loads(body)["items"]
    answer = json.dumps(
        {
            "batch_id": 1,
            "accepted": len(items),
            "duplicates": 0,
            "conflicts": 0,
            "rejected": 0,
            "items": [
                {"index": index, "id": item["id"], "status": "accepted"}
                for index, item in enumerate(items)
            ],
        }
    ).encode()
    start_response(
        "200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(answer)))]
    )
    return [answer]
