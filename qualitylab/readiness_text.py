"""graph-tool-call's readiness report in the catalog: what each issue says and what to do.

The library writes these sentences in English (graph_tool_call/analyze/openapi_readiness.py,
version pinned in pyproject.toml); they are listed here, word for word, so makemessages puts
them in the catalog and the collection page shows them translated. A test keeps the list
equal to the library's own (tests/qualitylab/test_translations.py).
"""

from __future__ import annotations

from django.utils.translation import gettext_noop

# (issue code, message, recommendation), in the library's order.
READINESS_TEXTS: tuple[tuple[str, str, str], ...] = (
    (
        "missing_response_schema",
        gettext_noop("No success response schema or response fields were extracted."),
        gettext_noop(
            "Add a 2xx response schema or examples so producer search and plan binding can "
            "use outputs."
        ),
    ),
    (
        "auth_required",
        gettext_noop("OpenAPI security is required for execution."),
        gettext_noop(
            "Provide credentials in the XGEN adapter or executor layer; do not store secrets "
            "in the graph."
        ),
    ),
    (
        "array_leaf_alignment_required",
        gettext_noop("Request body contains array leaf fields that require row-wise alignment."),
        gettext_noop(
            "Forward array diagnostics from HttpExecutor so missing indexes can be resumed "
            "precisely."
        ),
    ),
    (
        "weak_edge_evidence",
        gettext_noop("Graph has edges, but none carry strong deterministic evidence."),
        gettext_noop(
            "Prefer api_contract/openapi_link/manual/run evidence for Planflow graph edges "
            "and keep name-based edges as low-trust expansion hints."
        ),
    ),
    (
        "missing_operation_id",
        gettext_noop("OperationId was generated from method and path."),
        gettext_noop("Add a stable operationId so tool names and saved plans stay stable."),
    ),
    (
        "duplicate_operation_id",
        gettext_noop("OperationId is duplicated and the tool name was deduped."),
        gettext_noop(
            "Make operationId values unique, or use operationRef for ambiguous OpenAPI links."
        ),
    ),
    (
        "response_envelope_detected",
        gettext_noop("Success response appears to use a wrapper envelope."),
        gettext_noop("Keep body_view/value-path metadata when forwarding runtime responses."),
    ),
    (
        "no_contract_fields",
        gettext_noop("No request, response, auth, or link contract fields were extracted."),
        gettext_noop(
            "Add request/response schemas or examples so graph search has contract evidence."
        ),
    ),
    (
        "missing_request_schema",
        gettext_noop("Required request body declares content but no schema."),
        gettext_noop(
            "Add a requestBody schema or concrete request examples for executable fields."
        ),
    ),
    (
        "generic_request_body",
        gettext_noop("Request body schema is a generic object without declared properties."),
        gettext_noop(
            "Declare body properties in schema; examples are useful but should not be the "
            "only contract."
        ),
    ),
    (
        "unsupported_content_type",
        gettext_noop("Request body declares a media type outside the built-in executor renderers."),
        gettext_noop(
            "Add an adapter renderer for this media type or prefer JSON/form/multipart/raw body."
        ),
    ),
    (
        "low_graph_connectivity",
        gettext_noop(
            "Contract fields suggest producer/consumer pairs, but no data-flow edges exist."
        ),
        gettext_noop(
            "Enable graphify contract promotion or relink the collection before Planflow rollout."
        ),
    ),
    (
        "low_graph_connectivity",
        gettext_noop("All tools are isolated in the graph."),
        gettext_noop(
            "Run dependency detection or graphify ingestion so retrieval can use graph expansion."
        ),
    ),
    (
        "semantic_action_unknown_rate_high",
        gettext_noop("Canonical action coverage is below the XGEN semantic graph target."),
        gettext_noop(
            "Add operationId verbs, summaries, or adapter action_aliases so search can "
            "distinguish search/read/write/action tools."
        ),
    ),
    (
        "semantic_resource_unassigned_rate_high",
        gettext_noop("Primary resource coverage is below the XGEN semantic graph target."),
        gettext_noop(
            "Use tags, stable path modules, or adapter resource_aliases so the graph can "
            "cluster tools by business resource."
        ),
    ),
    (
        "module_cluster_too_large",
        gettext_noop("One module cluster is large enough to reduce graph browsing value."),
        gettext_noop(
            "Pass module_aliases or improve path grouping so XGEN can show smaller collection "
            "map clusters before rendering node-level graphs."
        ),
    ),
)
