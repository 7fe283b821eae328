"""Quality Lab's engine: the only package that calls graph-tool-call for collection runs.

Pure Python plus graph-tool-call: no Django ORM, nothing read from settings. Everything a
caller needs is passed in, and everything returned is JSON-able (``to_dict()``).

Public API
----------
Collections
    ``parse_spec(text, *, max_bytes=DEFAULT_MAX_SPEC_BYTES) -> dict``
        JSON or YAML (``yaml.safe_load``) text or bytes to a spec dict; raises
        :class:`SpecError` (safe to show: what failed, with line/column) unless it is an
        OpenAPI 3.x or Swagger 2 document with at least one operation, at most
        ``max_bytes`` long (callers pass the QUALITYLAB_MAX_SPEC_BYTES setting).
    ``build_artifact(spec, *, progress=None, semantic_options=None) -> BuiltArtifact``
        graph-tool-call's ``build_openapi_collection_artifact`` on the dict (never a URL:
        nothing is fetched; ``allow_private_hosts=False``). ``BuiltArtifact`` carries the
        artifact, its ``artifact_hash`` (the key of what the build read: see
        :func:`artifact_hash`), the readiness report,
        ``readiness_summary`` (issue codes counted by severity), the semantic summary, the
        operation count, the spec's default server URL and the engine version.
    ``artifact_hash(spec, *, semantic_options, engine_version=GRAPH_TOOL_CALL_VERSION)``
        sha256 over the canonical JSON (sorted keys) of the parsed spec, graph-tool-call's
        version and the build options. The build is a pure function of these, so the key
        identifies the artifact as well as a hash of the artifact would, for a 13 MB spec's
        hash instead of a 160 MB artifact's; the same spec and engine version give the
        same key whenever they are built.
    ``engine_for(artifact, artifact_hash) -> LoadedCollection``
        The loaded ``ToolGraph`` plus what the selector and synthesizer need, cached per
        process by hash (LRU of :data:`ENGINE_CACHE_SIZE`); the same hash returns the same
        object.
    ``check_case_tools(case, tool_names)``
        Checks every tool name a case mentions (targets, cleanup steps, assertions) against
        the collection's tools; an unknown one raises :class:`CaseSpecError` naming the
        closest tools. Tool names are operationIds as the spec spells them (``pulls/list``).

Cases
    ``CaseSpec.from_json(data)`` validates the documented case schema (``id, mode, query,
    expected_target, expected_top_k, provided_entities, mutation_safety, timeout_sec,
    assertions``) plus ``llm_target``, ``cleanup`` (``[{"tool", "args"}]``; ``args`` may
    bind ``${<step id or tool name>.<path>}`` and ``${input.<entity>}`` from the main run),
    ``auth_session`` (which runtime session of the :class:`ExecutionContext` to use;
    default ``"default"``) and ``description``. Unknown keys are kept in ``extra``
    (the schema is additive). Errors are :class:`CaseSpecError` naming the field.
    ``run_case(collection, case, *, execution=None, rerank=None, shadow=None) -> CaseOutcome``
        Never raises: any exception inside a case becomes ``service/uncaught_server_error``
        (the exception type in evidence, never its message).

Execution
    ``ExecutionContext(base_url, allowed_hosts, auth_headers=None, sessions={},
    auth_profile=None, timeout_sec=30.0, allow_mutations=False, private_allowed=(),
    max_response_bytes=10 MiB, credential_refusals={})``. Header values are given
    at run time and are never copied into an outcome (``repr=False``). ``timeout_sec`` is a
    ceiling a case's own ``timeout_sec`` may lower; a session listed in
    ``credential_refusals`` fails at ``auth_preflight`` (``auth_header_resolution_failed``).
    Every request goes through ``core.outbound.fetch`` (HttpExecutor only builds it):
    public addresses only unless ``private_allowed``, redirects checked hop by hop and
    without credentials across origins, the body capped; a refusal is
    ``execute/network_error`` with ``blocked_by`` ``address`` / ``redirect`` /
    ``response_size`` / ``scheme`` and the refusal's evidence. An empty ``base_url`` (or
    no context at all) means the collection is not configured for execute mode.
    ``AuthProfile`` describes the collection's auth (header names, required flag), never a secret.

What each mode does (failure reasons are taxonomy codes; first failure wins)
------------------------------------------------------------------------------
search   ``retrieve_graphify(..., include_evidence=True)`` over ``expected_top_k``:
         ``retrieve/no_candidates`` (nothing returned), ``retrieve/not_retrieved``
         (expected target not in Top-K), ``retrieve/low_confidence`` (in Top-K only through
         graph expansion: no direct seed match, see :data:`LOW_CONFIDENCE_RULE`).
plan     search, then ``select_target_candidate`` (with the case's ``llm_target``), then
         ``PathSynthesizer.synthesize``. A wrong selection is ``retrieve/not_retrieved``
         when the expected target was not in Top-K, ``select_target/
         llm_target_not_in_candidates`` when the kept LLM target was outside the retrieved
         catalog, ``select_target/llm_target_mismatch`` when the selector kept the LLM's
         wrong target, ``select_target/ambiguous_target`` when the selector itself reported
         weak evidence, else ``select_target/selector_mismatch``. Synthesis failures are
         ``PlanSynthesisError.to_dict()`` as given. A required field left as a
         ``${user_input.*}`` slot (no producer, no provided entity) is
         ``synthesize/unsatisfied_field``: graph-tool-call 0.47 falls back to a user input
         slot instead of raising, and Quality Lab has no user to ask.
execute  plan, then, before any request: mutation safety (a plan with a POST/PUT/PATCH/
         DELETE step needs ``mutation_safety: "mutating"``, cleanup steps naming known
         tools, and ``allow_mutations``; else ``cleanup/cleanup_not_configured``; judged
         first, it needs no base URL), a base URL (else ``execute/base_url_not_configured``,
         Quality Lab's own reason: a configuration gap, nothing sent), the base
         URL's host in ``allowed_hosts`` (else ``execute/network_error`` with
         ``request_sent: false`` and ``blocked_by: "allowed_hosts"``: the seed files
         allowlist problems under ``network_error`` and no code fits better), and the auth
         preflight (``auth_profile_missing`` / ``auth_context_required`` /
         ``auth_header_resolution_failed``). Then the plan runs through ``PlanRunner``
         over ``HttpExecutor``; non-2xx raises (``HTTP 404: Not Found``) and the status is
         attached to the ``step.failed`` error, which ``triage.intake.runner_events.
         failure_from_runner_event`` classifies exactly as ingest does (401/403
         ``auth_failed``, 4xx, 5xx, timeouts, connection errors). Cleanup runs when a
         mutating step completed; ``cleanup/cleanup_failed`` is reported (as the case's
         failure when the main run passed, else inside ``execute.cleanup``).

Outcome sections (``CaseOutcome.to_dict()``): ``search``, ``target_selector``, ``plan``,
``execute`` (compact runner ``events``: ``dataclasses.asdict`` with argument values,
outputs and previews replaced by shapes; ``http_status``; ``calls``; ``cleanup``;
``json_paths``), ``auth_readiness``, ``learning``, ``assertions``, ``failure`` (the seed's
normalized record), ``failure_allowed``, ``latency_ms`` per stage (``search``, ``select``,
``plan``, ``execute``, ``cleanup``). No response body is stored: JSON-path assertions keep
only ``{exists, shape}``.

Extension points for learning
-----------------------------
``run_case(..., rerank=...)`` takes ``(query, retrieval_rows) -> retrieval_rows`` and runs
it between retrieval and target selection: the case then runs on the reranked rows and the
outcome records ``learning = {"rerank_applied": true}``.

``run_case(..., shadow=...)`` takes the same kind of callable (the learning review passes a
closure over graph-tool-call's ``apply_learning_suggestions(query, rows, suggestions,
mode="shadow")``, sorted best first) but changes nothing about the run: the case selects,
plans and executes on the current rows, and ``learning`` records the comparison
(``mode: "shadow"``): ``expected_target``, ``current_rank`` / ``shadow_rank`` of it in the
Top-K, ``rank_delta`` (current minus shadow: positive when learning moves it up),
``current_selected_target`` / ``shadow_selected_target`` and ``selected_target_changed``
(the selector run again on the shadow rows; ``None`` for search cases),
``current_failure_reason`` / ``shadow_failure_reason`` and ``failure_reason_changed`` (the
shadow reason is judged at retrieval and selection; when the shadow run would select the
same target the later stages are the same, when it selects another one they are unknown
and ``shadow_failure_reason`` is ``None``), the shadow Top-5 and the applied ``signals``
(suggestion id, type, target, status, boost). A case whose collection is not in shadow mode
has no comparison; its learning assertions read ``null`` and are not evaluated.

Modules (each imports only the ones listed before it)
-----------------------------------------------------
``spec`` parse, build and hash; ``cases`` the case schema and execution settings;
``collection`` the loaded collection and its cache; ``outcome`` the outcome, the failure
record and the state every stage shares; ``search``, ``plan`` (target selection and
synthesis), ``http_adapter`` and ``execute`` the stages; ``run`` :func:`run_case`. The
names below are the package's API: import them from ``qualitylab.engine``.
"""

from __future__ import annotations

from qualitylab.assertions import CaseSpecError
from qualitylab.engine.cases import (
    AuthProfile,
    CaseSpec,
    CleanupStep,
    ExecutionContext,
    check_case_tools,
)
from qualitylab.engine.collection import (
    ENGINE_CACHE_SIZE,
    LoadedCollection,
    clear_engine_cache,
    engine_for,
)
from qualitylab.engine.http_adapter import HostNotAllowedError, ToolHttpError
from qualitylab.engine.outcome import CaseOutcome, Rerank, failure_record
from qualitylab.engine.run import run_case
from qualitylab.engine.search import LOW_CONFIDENCE_RULE
from qualitylab.engine.spec import (
    DEFAULT_MAX_SPEC_BYTES,
    GRAPH_TOOL_CALL_VERSION,
    BuiltArtifact,
    Progress,
    SpecError,
    artifact_hash,
    build_artifact,
    format_size,
    parse_spec,
)

__all__ = [
    "DEFAULT_MAX_SPEC_BYTES",
    "ENGINE_CACHE_SIZE",
    "GRAPH_TOOL_CALL_VERSION",
    "LOW_CONFIDENCE_RULE",
    "AuthProfile",
    "BuiltArtifact",
    "CaseOutcome",
    "CaseSpec",
    "CaseSpecError",
    "CleanupStep",
    "ExecutionContext",
    "HostNotAllowedError",
    "LoadedCollection",
    "Progress",
    "Rerank",
    "SpecError",
    "ToolHttpError",
    "artifact_hash",
    "build_artifact",
    "check_case_tools",
    "clear_engine_cache",
    "engine_for",
    "failure_record",
    "format_size",
    "parse_spec",
    "run_case",
]
