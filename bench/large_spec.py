"""A deterministic OpenAPI description the size of GitHub's REST description.

    .venv/bin/python bench/large_spec.py OUT.json [--operations 1223] [--seed 7]

GitHub's own (``api.github.com.json`` in the npm package ``@octokit/openapi``: 13 MB,
1,223 operations) is what Quality Lab must take; it cannot be committed and the network may
not be there, so ``bench/qualitylab.py --large-spec`` uses it when given (or found at
``var/bench/api.github.com.json``) and otherwise this generator. It writes the same shape:
OpenAPI 3.0.3, operationIds like ``pulls/list-comments`` grouped by tag, path parameters
and query parameters through ``components/parameters`` ``$ref``s, about a thousand
component schemas with nested objects, arrays of ``$ref``s and ``allOf`` compositions,
named examples, long Markdown descriptions, pretty-printed with two-space indents.
The same seed and operation count always give the same bytes.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path
from typing import Any

TAGS = (
    "actions", "activity", "apps", "billing", "checks", "code-scanning", "codespaces",
    "copilot", "dependabot", "dependency-graph", "gists", "git", "gitignore", "interactions",
    "issues", "licenses", "markdown", "meta", "migrations", "oidc", "orgs", "packages",
    "projects", "pulls", "rate-limit", "reactions", "repos", "search", "secret-scanning",
    "security-advisories", "teams", "users", "classroom", "credentials", "emojis",
    "hosted-compute", "private-registries", "campaigns",
)  # fmt: skip
NOUNS = (
    "artifact", "cache", "variable", "secret", "runner", "workflow", "job", "run", "label",
    "comment", "review", "reviewer", "branch", "commit", "deployment", "environment",
    "release", "asset", "hook", "delivery", "invitation", "member", "collaborator", "key",
    "ruleset", "rule", "alert", "analysis", "codespace", "machine", "package", "version",
    "project", "card", "column", "reaction", "team", "repository", "discussion", "milestone",
    "event", "status", "check", "suite", "annotation", "autolink", "topic", "tag", "page",
)  # fmt: skip
VERBS = (
    ("get", "list", "List {plural}"),
    ("get", "get", "Get a {noun}"),
    ("post", "create", "Create a {noun}"),
    ("patch", "update", "Update a {noun}"),
    ("delete", "delete", "Delete a {noun}"),
    ("put", "set", "Set {plural}"),
)
WORDS = [
    "repository",
    "organization",
    "enterprise",
    "authenticated",
    "user",
    "token",
    "permission",
    "scope",
    "access",
    "request",
    "response",
    "endpoint",
    "resource",
    "visibility",
    "public",
    "private",
    "internal",
    "webhook",
    "payload",
    "pagination",
    "cursor",
    "header",
    "media",
    "type",
    "preview",
    "feature",
    "account",
    "installation",
    "workflow",
    "default",
    "branch",
    "protection",
    "required",
    "status",
    "checks",
    "review",
    "approvals",
    "merge",
    "queue",
    "fork",
    "owner",
    "administrator",
    "maintainer",
    "triage",
    "write",
    "read",
    "pull",
    "issue",
    "label",
    "milestone",
    "release",
]


def _sentence(rng: random.Random, words: int) -> str:
    text = " ".join(rng.choice(WORDS) for _ in range(words))
    return text[0].upper() + text[1:] + "."


def _markdown(rng: random.Random, paragraphs: int) -> str:
    parts = [" ".join(_sentence(rng, rng.randint(8, 18)) for _ in range(3))]
    for _ in range(paragraphs - 1):
        parts.append(
            "- **`application/vnd.github."
            + rng.choice(WORDS)
            + "+json`**: "
            + _sentence(rng, rng.randint(10, 20))
        )
    parts.append(
        "OAuth app tokens and personal access tokens (classic) need the `repo` scope to use "
        "this endpoint with a private repository."
    )
    return "\n\n".join(parts)


def _property(rng: random.Random, depth: int, schema_names: list[str]) -> dict[str, Any]:
    kind = rng.random()
    if depth < 2 and kind < 0.12:
        return {
            "type": "object",
            "description": _sentence(rng, 8),
            "properties": {
                f"{rng.choice(WORDS)}_{index}": _property(rng, depth + 1, schema_names)
                for index in range(rng.randint(2, 6))
            },
        }
    if schema_names and kind < 0.12:
        return {"$ref": f"#/components/schemas/{rng.choice(schema_names)}"}
    if schema_names and kind < 0.15:
        return {
            "type": "array",
            "items": {"$ref": f"#/components/schemas/{rng.choice(schema_names)}"},
        }
    if kind < 0.55:
        return {"type": "string", "example": rng.choice(WORDS), "description": _sentence(rng, 6)}
    if kind < 0.7:
        return {"type": "integer", "example": rng.randint(1, 10_000)}
    if kind < 0.8:
        return {"type": "string", "format": "date-time", "example": "2011-01-26T19:01:12Z"}
    if kind < 0.9:
        return {"type": "boolean", "example": rng.random() < 0.5}
    return {"type": "string", "enum": sorted({rng.choice(WORDS) for _ in range(4)})}


def _schema(
    rng: random.Random, title: str, schema_names: list[str], size: tuple[int, int] = (10, 34)
) -> dict[str, Any]:
    properties = {"id": {"type": "integer", "example": 42}, "node_id": {"type": "string"}}
    properties["url"] = {"type": "string", "format": "uri"}
    for index in range(rng.randint(*size)):
        properties[f"{rng.choice(WORDS)}_{index}"] = _property(rng, 0, schema_names)
    schema: dict[str, Any] = {
        "title": title,
        "description": _sentence(rng, 12),
        "type": "object",
        "properties": properties,
        "required": sorted(rng.sample(sorted(properties), k=min(5, len(properties)))),
    }
    if schema_names and rng.random() < 0.15:
        return {"allOf": [{"$ref": f"#/components/schemas/{rng.choice(schema_names)}"}, schema]}
    return schema


def _example(rng: random.Random, depth: int = 0) -> Any:
    value: dict[str, Any] = {"id": rng.randint(1, 10**9), "node_id": "MDQ6VXNlcjE="}
    for index in range(rng.randint(6, 14)):
        key = f"{rng.choice(WORDS)}_{index}"
        if depth < 2 and rng.random() < 0.15:
            value[key] = _example(rng, depth + 1)
        else:
            value[key] = f"https://api.github.com/{rng.choice(TAGS)}/{rng.choice(WORDS)}"
    return value


def generate(*, operations: int = 1223, seed: int = 7) -> dict[str, Any]:
    """The spec as a dict; :func:`write` gives it the file's shape."""
    rng = random.Random(seed)
    schema_names: list[str] = []
    schemas: dict[str, Any] = {}
    # Three tiers, like GitHub's (simple-user, then repository, then pull-request): a schema
    # refers only to the tiers below it, so a $ref chain is at most three deep and what the
    # engine resolves per operation stays near GitHub's own.
    tiers: list[list[str]] = [[], [], []]
    count = max(40, operations * 4 // 5)
    for index in range(count):
        tier = min(2, index * 4 // count)
        name = f"{rng.choice(NOUNS)}-{rng.choice(WORDS)}-{index}"
        # Mostly leaves (like simple-user), now and then a middle one (like repository).
        below = tiers[0] + tiers[1][::8] if tier == 2 else list(tiers[0]) if tier else []
        schemas[name] = _schema(rng, name.replace("-", " ").title(), below)
        tiers[tier].append(name)
        schema_names.append(name)
    parameters = {
        name: {
            "name": name,
            "in": "path",
            "required": True,
            "description": f"The {name.replace('_', ' ')}. {_sentence(rng, 6)}",
            "schema": {"type": "integer" if name.endswith("_id") else "string"},
        }
        for name in ("owner", "repo", "org", "username", "team_slug", "resource_id")
    }
    parameters["per-page"] = {
        "name": "per_page", "in": "query", "description": "Results per page (max 100).",
        "schema": {"type": "integer", "default": 30},
    }  # fmt: skip
    parameters["page"] = {
        "name": "page", "in": "query", "description": "The page number of the results.",
        "schema": {"type": "integer", "default": 1},
    }  # fmt: skip
    examples = {
        f"{name}-example": {"value": _example(rng)} for name in schema_names[: operations // 2]
    }
    paths: dict[str, dict[str, Any]] = {}
    made = 0
    index = 0
    while made < operations:
        tag = TAGS[index % len(TAGS)]
        noun = NOUNS[(index // len(TAGS)) % len(NOUNS)]
        index += 1
        scope = rng.choice(("/repos/{owner}/{repo}", "/orgs/{org}", "/users/{username}"))
        collection_path = f"{scope}/{tag}/{noun}s"
        item_path = f"{collection_path}/{{resource_id}}"
        scope_parameters = [
            {"$ref": f"#/components/parameters/{name}"}
            for name in ("owner", "repo", "org", "username")
            if f"{{{name}}}" in scope
        ]
        for method, verb, summary in VERBS:
            if made >= operations:
                break
            on_item = verb in ("get", "update", "delete")
            path = item_path if on_item else collection_path
            schema = rng.choice(schema_names)
            operation_parameters = list(scope_parameters)
            if on_item:
                operation_parameters.append({"$ref": "#/components/parameters/resource_id"})
            if verb == "list":
                operation_parameters += [
                    {"$ref": "#/components/parameters/per-page"},
                    {"$ref": "#/components/parameters/page"},
                ]
            body_schema = {"$ref": f"#/components/schemas/{schema}"}
            success: dict[str, Any] = {
                "description": "Response",
                "content": {
                    "application/json": {
                        "schema": {"type": "array", "items": body_schema}
                        if verb == "list"
                        else body_schema,
                        "examples": {
                            "default": {
                                "$ref": f"#/components/examples/{rng.choice(sorted(examples))}"
                            }
                        },
                    }
                },
            }
            operation: dict[str, Any] = {
                "summary": summary.format(noun=noun, plural=f"{noun}s"),
                "description": _markdown(rng, rng.randint(1, 3)),
                "tags": [tag],
                "operationId": f"{tag}/{verb}-{noun}s-for-{scope.split('/')[1][:-1]}",
                "externalDocs": {
                    "description": "API method documentation",
                    "url": f"https://docs.github.com/rest/{tag}/{noun}s#{verb}",
                },
                "parameters": operation_parameters,
                "responses": {
                    "204" if verb == "delete" else "201" if verb == "create" else "200": success
                    if verb != "delete"
                    else {"description": "Response"},
                    "404": {"description": "Resource not found"},
                },
                "x-github": {"githubCloudOnly": False, "enabledForGitHubApps": True,
                             "category": tag, "subcategory": noun},
            }  # fmt: skip
            if verb in ("create", "update", "set"):
                operation["requestBody"] = {
                    "required": True,
                    "content": {
                        "application/json": {
                            "schema": _schema(rng, f"{verb} {noun}", tiers[0], (1, 5))
                        }
                    },
                }
            if operation["operationId"] in {
                op.get("operationId") for item in paths.values() for op in item.values()
            }:
                operation["operationId"] += f"-{index}"
            paths.setdefault(path, {})[method] = operation
            made += 1
    return {
        "openapi": "3.0.3",
        "info": {
            "version": "1.1.4",
            "title": "GitHub-shaped REST API (generated)",
            "description": "A generated description shaped like GitHub's REST API.",
        },
        "tags": [{"name": tag, "description": _sentence(rng, 6)} for tag in TAGS],
        "servers": [{"url": "https://api.github.com"}],
        "paths": paths,
        "components": {"schemas": schemas, "examples": examples, "parameters": parameters},
    }


def write(path: Path, *, operations: int = 1223, seed: int = 7) -> Path:
    """Write the spec as GitHub publishes its own (two-space indents) and return the path."""
    text = json.dumps(generate(operations=operations, seed=seed), indent=2, ensure_ascii=False)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n", encoding="utf-8")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--operations", type=int, default=1223)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    path = write(args.out, operations=args.operations, seed=args.seed)
    size = path.stat().st_size
    print(f"{path}: {size / 1_000_000:.1f} MB, {args.operations} operations")
    return 0


if __name__ == "__main__":
    sys.exit(main())
