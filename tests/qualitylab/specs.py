"""Specs shaped like real-world descriptions, shared by the Quality Lab tests."""

from __future__ import annotations

import json
from typing import Any


def slash_spec() -> dict[str, Any]:
    """GitHub-shaped: operationIds like ``pulls/list`` and only a relative server URL, so
    a collection built from it has no base URL until someone sets one."""

    def operation(operation_id: str, summary: str) -> dict[str, Any]:
        return {
            "operationId": operation_id,
            "summary": summary,
            "parameters": [
                {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
                for name in ("owner", "repo")
            ],
            "responses": {"200": {"description": "ok"}},
        }

    return {
        "openapi": "3.0.3",
        "info": {"title": "GitHub-like", "version": "1"},
        "servers": [{"url": "/api/v3"}],
        "paths": {
            "/repos/{owner}/{repo}/pulls": {
                "get": operation("pulls/list", "List pull requests"),
                "post": operation("pulls/create", "Create a pull request"),
            },
            "/repos/{owner}/{repo}/issues": {
                "get": operation("issues/list-for-repo", "List repository issues"),
            },
        },
    }


def slash_spec_text() -> str:
    return json.dumps(slash_spec(), indent=1)


# An execute case of that collection: a read, so only the base URL is missing.
LIST_PULLS_CASE: dict[str, Any] = {
    "id": "gh-list-pulls",
    "mode": "execute",
    "query": "list the pull requests of a repository",
    "expected_target": "pulls/list",
    "provided_entities": {"owner": "octo", "repo": "hello"},
}
