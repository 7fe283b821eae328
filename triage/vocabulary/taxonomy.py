"""The failure vocabulary of Triage Desk: stages, reasons, lanes and execution states.

Every other module imports its codes from here, so the spelling of a code is decided in
exactly one place. The codes come from two seed documents (the failure taxonomy and the
"errors as contracts" lanes) and from what graph-tool-call itself emits; they are stable
contracts shared with agent runtimes and must never be renamed.

This module is deliberately pure Python: it is imported by settings-free code (scrubbing,
normalisation, CLI tools, benchmarks) and must not need Django or the engine to load.
"""

from __future__ import annotations

from dataclasses import dataclass


def gettext_noop(message: str) -> str:
    """Marks a text for the message catalog (makemessages reads this name) without needing
    Django here: the pages translate it as they show it (templates, triage/templatetags)."""
    return message


# Bump when a code's classification (lane, retryable, execution state, stage) changes: each
# stored record keeps the version it was classified under, so old rows stay explainable.
TAXONOMY_VERSION: str = "2026.12.1"


# --------------------------------------------------------------------------------------
# Stages
# --------------------------------------------------------------------------------------

# Lifecycle order is also display order on the triage page: a failure early in the
# pipeline hides everything after it, so operators read top to bottom.
STAGES: tuple[str, ...] = (
    "retrieve",
    "select_target",
    "synthesize",
    "bind_request",
    "auth_preflight",
    "execute",
    "cleanup",
    "learn",
    "service",
)


@dataclass(frozen=True, slots=True)
class StageInfo:
    code: str
    title: str
    usually_fixed_in: str


STAGE_INFO: dict[str, StageInfo] = {
    info.code: info
    for info in (
        StageInfo(
            "retrieve",
            gettext_noop("Retrieval"),
            gettext_noop("semantic metadata, aliases, OpenAPI summaries, graph edges"),
        ),
        StageInfo(
            "select_target",
            gettext_noop("Target selection"),
            gettext_noop(
                "target selector evidence, result shape, contract fit, the LLM catalog prompt"
            ),
        ),
        StageInfo(
            "synthesize",
            gettext_noop("Plan synthesis"),
            gettext_noop("IO contract, producer edges, context defaults, user input UX"),
        ),
        StageInfo(
            "bind_request",
            gettext_noop("Request binding"),
            gettext_noop("schema contract, field mapping, the runtime argument builder"),
        ),
        StageInfo(
            "auth_preflight",
            gettext_noop("Auth preflight"),
            gettext_noop("collection auth profile, product session, session header resolver"),
        ),
        StageInfo(
            "execute",
            gettext_noop("Execution"),
            gettext_noop("downstream API, request construction, credentials, retry policy"),
        ),
        StageInfo(
            "cleanup",
            gettext_noop("Cleanup"),
            gettext_noop("the owner of the Quality Lab mutation case"),
        ),
        StageInfo(
            "learn",
            gettext_noop("Learning"),
            gettext_noop("trace scrubbing, promotion policy, human review"),
        ),
        StageInfo(
            "service",
            gettext_noop("Service"),
            gettext_noop("a bug in the adapter or the service"),
        ),
    )
}


# --------------------------------------------------------------------------------------
# Lanes and execution state (seed 004)
# --------------------------------------------------------------------------------------

LANES: tuple[str, ...] = (
    "retry_safe",
    "reconcile_first",
    "input_stale",
    "policy_blocked",
    "manual_investigation",
)


@dataclass(frozen=True, slots=True)
class LaneInfo:
    code: str
    default_action: str
    operator_needs: str


LANE_INFO: dict[str, LaneInfo] = {
    info.code: info
    for info in (
        LaneInfo(
            "retry_safe",
            gettext_noop(
                "Retry automatically with a bounded backoff (rate limits, transient read timeouts)."
            ),
            gettext_noop("How many attempts were made and when the next retry is due."),
        ),
        LaneInfo(
            "reconcile_first",
            gettext_noop(
                "Look up the remote status first; retry only after that lookup, never blindly "
                "(write timeouts, lost callbacks)."
            ),
            gettext_noop("The idempotency key and the remote operation id."),
        ),
        LaneInfo(
            "input_stale",
            gettext_noop(
                "Refresh the inputs, then re-plan (base revision mismatch, expired plan, "
                "missing user input)."
            ),
            gettext_noop("Which input is stale or missing, and since when."),
        ),
        LaneInfo(
            "policy_blocked",
            gettext_noop(
                "Stop; never work around the policy automatically (permission, scope or "
                "approval refused)."
            ),
            gettext_noop("The policy id, the approval that is needed, and when it expires."),
        ),
        LaneInfo(
            "manual_investigation",
            gettext_noop(
                "Stop automatic retries and compensation (partial deletes, data mismatches)."
            ),
            gettext_noop("The affected targets and the last confirmed evidence."),
        ),
    )
}

EXECUTION_STATES: tuple[str, ...] = (
    "not_started",
    "started_unknown",
    "partially_completed",
    "completed",
)

EXECUTION_STATE_MEANING: dict[str, str] = {
    "not_started": gettext_noop(
        "No request reached the remote side; repeating the work cannot duplicate it."
    ),
    "started_unknown": (
        gettext_noop(
            "The request may have reached the remote side but the outcome is unknown "
            "(timeout after send, connection reset)."
        )
    ),
    "partially_completed": gettext_noop("Some of the work happened remotely and some did not."),
    "completed": (
        gettext_noop("The remote side finished the request: a success or a definitive rejection.")
    ),
}

SIDE_EFFECT_GRADES: tuple[str, ...] = ("read", "internal_write", "external_write", "privileged")

SOURCES: tuple[str, ...] = ("runtime", "quality_lab", "learning", "log", "otlp")


# --------------------------------------------------------------------------------------
# Reasons
# --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReasonInfo:
    code: str
    stage: str
    meaning: str
    evidence_keys: tuple[str, ...]
    usually_fixed_in: str
    usual_action: str
    operator_action: str
    triage_advice: str
    api_called: str
    retryable: bool
    lane: str
    default_execution_state: str
    # "catalog" (seed 000), "engine" (graph-tool-call emits it) or "adapter" (Triage Desk's
    # own, added where no catalog code fits; listed apart on the ingestion page).
    origin: str


# Nothing before auth_preflight talks to the downstream API and the auth preflight exists
# precisely to stop before it; cleanup steps are API calls by definition; a service crash
# can happen on either side of the call.
_STAGE_API_CALLED: dict[str, str] = {
    "retrieve": "no",
    "select_target": "no",
    "synthesize": "no",
    "bind_request": "no",
    "auth_preflight": "no",
    "execute": "yes",
    "cleanup": "yes",
    "learn": "no",
    "service": "maybe",
}

# A failure before the call cannot have reached the remote side; an execute failure is by
# default a definitive answer, and each uncertain reason overrides this below.
_STAGE_EXECUTION_STATE: dict[str, str] = {
    "retrieve": "not_started",
    "select_target": "not_started",
    "synthesize": "not_started",
    "bind_request": "not_started",
    "auth_preflight": "not_started",
    "execute": "completed",
    "cleanup": "partially_completed",
    "learn": "not_started",
    "service": "started_unknown",
}

# Triage Guide lines of seed 000, shared by the reasons whose symptom they describe.
_ADVICE_NOT_IN_TOP_K = gettext_noop(
    "Look first at the retrieval evidence and the semantic metadata; improve aliases, "
    "summaries, contracts or graph edges."
)
_ADVICE_IN_TOP_K_NOT_SELECTED = gettext_noop(
    "Look first at target_selector.rank_signals and the LLM target; improve action, "
    "resource or result-shape evidence, or the selector policy."
)
_ADVICE_ASKS_USER = gettext_noop(
    "Look first at api_contract.consumes, the producer edges and the context defaults; add "
    "a context default, a field mapping or a producer."
)
_ADVICE_AUTH_PREFLIGHT = gettext_noop(
    "Look first at auth_readiness.failure_reason; set up the auth profile or the session "
    "header resolution."
)
_ADVICE_401_403 = gettext_noop(
    "Look first at the downstream request header names and the freshness of the auth "
    "profile; refresh auth or check the downstream policy."
)
_ADVICE_400 = gettext_noop(
    "Look first at the rendered request arguments; fix the schema binding, the enum mapping "
    "or the user input."
)
_ADVICE_WRITE_LEFT_DATA = gettext_noop(
    "Look first at the cleanup result; add a cleanup assertion before allowing mutations."
)
_ADVICE_REPEATED_SUCCESS = gettext_noop(
    "Look first at the learning attempts and the suggestion; keep shadow mode until the "
    "promotion gate passes."
)
_ADVICE_OVERRIDE_GUARD = gettext_noop(
    "Look first at target_selector.override_assessment and rank_signals; the guard named "
    "here kept the LLM target, so the deterministic winner lacked decisive evidence."
)
_ADVICE_ADMISSION = gettext_noop(
    "Look first at the admission signals (scores, dropped candidates, token budget) of the "
    "target candidate admission step."
)


def _reason(
    code: str,
    stage: str,
    *,
    meaning: str,
    evidence_keys: tuple[str, ...],
    usual_action: str,
    operator_action: str,
    lane: str,
    triage_advice: str,
    usually_fixed_in: str = "",
    api_called: str = "",
    retryable: bool = False,
    default_execution_state: str = "",
    origin: str = "catalog",
) -> ReasonInfo:
    # Stage-level defaults keep the table below to what is specific to each reason.
    return ReasonInfo(
        code=code,
        stage=stage,
        meaning=meaning,
        evidence_keys=evidence_keys,
        usually_fixed_in=usually_fixed_in or STAGE_INFO[stage].usually_fixed_in,
        usual_action=usual_action,
        operator_action=operator_action,
        triage_advice=triage_advice,
        api_called=api_called or _STAGE_API_CALLED[stage],
        retryable=retryable,
        lane=lane,
        default_execution_state=default_execution_state or _STAGE_EXECUTION_STATE[stage],
        origin=origin,
    )


# Evidence keys are the seed's "evidence to keep" column in snake_case, plus the detail keys
# graph-tool-call 0.47's PlanSynthesisError.to_dict() really emits for that reason (for
# example "tool" next to the seed's "current_tool"), so nothing the engine sends is lost.
# Keys name facts, never raw values: the scrubber still runs over whatever they hold.
_REASON_LIST: tuple[ReasonInfo, ...] = (
    # ---- retrieve ------------------------------------------------------------------
    _reason(
        "no_candidates",
        "retrieve",
        meaning=gettext_noop("Retrieval returned no usable tool."),
        evidence_keys=("query", "filter", "top_k"),
        usual_action=gettext_noop("Check the catalog build and the index coverage."),
        operator_action="check_catalog_index_coverage",
        triage_advice=(
            gettext_noop(
                "Look first at the collection's build and index: is the tool catalog empty or "
                "filtered out?"
            )
        ),
        lane="manual_investigation",
    ),
    _reason(
        "not_retrieved",
        "retrieve",
        meaning=gettext_noop("The expected target is not in the Top-K."),
        evidence_keys=("expected_target", "returned_tool_names"),
        usual_action=gettext_noop("Enrich the semantic metadata or add aliases."),
        operator_action="enrich_semantic_metadata",
        triage_advice=_ADVICE_NOT_IN_TOP_K,
        lane="manual_investigation",
    ),
    _reason(
        "low_confidence",
        "retrieve",
        meaning=gettext_noop("The candidate scores are weak."),
        evidence_keys=("score_distribution", "threshold"),
        usual_action=gettext_noop("Widen the Top-K or add evidence."),
        operator_action="widen_top_k_or_add_evidence",
        triage_advice=(
            gettext_noop(
                "Look first at the score distribution against the threshold; weak scores "
                "everywhere mean thin metadata."
            )
        ),
        lane="manual_investigation",
    ),
    # ---- select_target: seed catalog -----------------------------------------------
    _reason(
        "llm_target_mismatch",
        "select_target",
        meaning=gettext_noop("The LLM picked a different tool than the expected target."),
        evidence_keys=("llm_target", "expected_target", "selected_target"),
        usual_action=gettext_noop("Check the target selector diagnostic."),
        operator_action="inspect_target_selector_diagnostic",
        triage_advice=_ADVICE_IN_TOP_K_NOT_SELECTED,
        lane="manual_investigation",
    ),
    _reason(
        "llm_target_not_in_candidates",
        "select_target",
        meaning=gettext_noop("The LLM picked a tool outside the retrieved catalog."),
        evidence_keys=("llm_target", "candidate_names"),
        usual_action=gettext_noop("Give the LLM the selector-ranked catalog."),
        operator_action="pass_ranked_catalog_to_llm",
        triage_advice=(
            gettext_noop(
                "Look first at which catalog the LLM was shown; it should be the selector-ranked "
                "candidates."
            )
        ),
        lane="manual_investigation",
    ),
    _reason(
        "ambiguous_target",
        "select_target",
        meaning=gettext_noop("Several tools have similar evidence."),
        evidence_keys=("margin", "tied_candidates", "ambiguity_set"),
        usual_action=gettext_noop("Ask the user to confirm, or keep the LLM target."),
        operator_action="confirm_target_with_user",
        triage_advice=_ADVICE_IN_TOP_K_NOT_SELECTED,
        lane="input_stale",
    ),
    _reason(
        "selector_mismatch",
        "select_target",
        meaning=gettext_noop("The deterministic selector picked the wrong target."),
        evidence_keys=("rank_signals", "override_flag"),
        usual_action=gettext_noop("Adjust the generic selector policy or the metadata."),
        operator_action="tune_selector_policy_or_metadata",
        triage_advice=_ADVICE_IN_TOP_K_NOT_SELECTED,
        lane="manual_investigation",
    ),
    # ---- select_target: graph_tool_call.graphify.select_target_candidate -----------
    # The selector reports decisions, not only failures; these codes become failure
    # reasons when a runtime or a Quality Lab case attributes a wrong target to them.
    _reason(
        "llm_target_overridden",
        "select_target",
        meaning=gettext_noop(
            "The selector replaced the LLM's target with its own, better-evidenced winner."
        ),
        evidence_keys=("llm_target", "selected_target", "margin", "llm_margin", "rank_signals"),
        usual_action=gettext_noop(
            "Check that the override was right; tune the selector policy if not."
        ),
        operator_action="review_selector_override",
        triage_advice=_ADVICE_IN_TOP_K_NOT_SELECTED,
        lane="manual_investigation",
        origin="engine",
    ),
    _reason(
        "llm_target_preserved",
        "select_target",
        meaning=gettext_noop(
            "The selector kept the LLM's target although another candidate scored higher."
        ),
        evidence_keys=("llm_target", "selected_target", "llm_margin", "override_assessment"),
        usual_action=gettext_noop(
            "Check the override guard; add decisive evidence if the LLM was wrong."
        ),
        operator_action="review_llm_target_choice",
        triage_advice=_ADVICE_OVERRIDE_GUARD,
        lane="manual_investigation",
        origin="engine",
    ),
    _reason(
        "insufficient_contrastive_evidence",
        "select_target",
        meaning=gettext_noop(
            "Sibling candidates could not be told apart by their distinguishing terms."
        ),
        evidence_keys=("ambiguity_set", "margin", "query_facets"),
        usual_action=gettext_noop(
            "Ask the user to confirm, or add qualifiers that separate the siblings."
        ),
        operator_action="confirm_target_or_add_contrastive_metadata",
        triage_advice=_ADVICE_IN_TOP_K_NOT_SELECTED,
        lane="input_stale",
        origin="engine",
    ),
    _reason(
        "selected_by_strong_evidence",
        "select_target",
        meaning=gettext_noop(
            "The selector chose the target on strong evidence, with no LLM conflict."
        ),
        evidence_keys=("selected_target", "margin", "rank_signals"),
        usual_action=gettext_noop(
            "If the target was wrong, the metadata evidence misleads: fix it."
        ),
        operator_action="review_selector_evidence",
        triage_advice=_ADVICE_IN_TOP_K_NOT_SELECTED,
        lane="manual_investigation",
        origin="engine",
    ),
    _reason(
        "selected_by_rank",
        "select_target",
        meaning=gettext_noop(
            "The selector chose the target by retrieval rank only, without strong evidence."
        ),
        evidence_keys=("selected_target", "margin", "rank_signals"),
        usual_action=gettext_noop(
            "Add action, resource or result-shape evidence to the tool metadata."
        ),
        operator_action="add_selector_evidence",
        triage_advice=_ADVICE_IN_TOP_K_NOT_SELECTED,
        lane="manual_investigation",
        origin="engine",
    ),
    _reason(
        "action_incompatible_override_blocked",
        "select_target",
        meaning=gettext_noop(
            "No override: the selector's winner has an action the query does not ask for."
        ),
        evidence_keys=("llm_target", "selected_target", "override_assessment", "query_facets"),
        usual_action=gettext_noop("Check the canonical_action metadata of both tools."),
        operator_action="review_action_metadata",
        triage_advice=_ADVICE_OVERRIDE_GUARD,
        lane="manual_investigation",
        origin="engine",
    ),
    _reason(
        "candidate_tie_override_blocked",
        "select_target",
        meaning=gettext_noop("No override: the selector's winner is tied with the runner-up."),
        evidence_keys=("llm_target", "margin", "override_assessment"),
        usual_action=gettext_noop("Ask the user to confirm, or add evidence that breaks the tie."),
        operator_action="confirm_target_with_user",
        triage_advice=_ADVICE_OVERRIDE_GUARD,
        lane="input_stale",
        origin="engine",
    ),
    _reason(
        "insufficient_pairwise_margin",
        "select_target",
        meaning=gettext_noop("No override: the winner beats the LLM target by too small a margin."),
        evidence_keys=("llm_target", "llm_margin", "override_assessment"),
        usual_action=gettext_noop(
            "Ask the user to confirm, or add evidence that separates the two tools."
        ),
        operator_action="confirm_target_with_user",
        triage_advice=_ADVICE_OVERRIDE_GUARD,
        lane="input_stale",
        origin="engine",
    ),
    _reason(
        "weak_winner_evidence",
        "select_target",
        meaning=gettext_noop("No override: the selector's winner has no strong evidence."),
        evidence_keys=("llm_target", "rank_signals", "override_assessment"),
        usual_action=gettext_noop(
            "Add action, resource or result-shape evidence to the tool metadata."
        ),
        operator_action="add_selector_evidence",
        triage_advice=_ADVICE_OVERRIDE_GUARD,
        lane="manual_investigation",
        origin="engine",
    ),
    _reason(
        "non_discriminative_override_blocked",
        "select_target",
        meaning=gettext_noop(
            "No override: no evidence source decisively favours the winner over the LLM."
        ),
        evidence_keys=("llm_target", "override_assessment"),
        usual_action=gettext_noop("Add metadata that distinguishes the two tools."),
        operator_action="add_distinguishing_metadata",
        triage_advice=_ADVICE_OVERRIDE_GUARD,
        lane="manual_investigation",
        origin="engine",
    ),
    _reason(
        "negative_only_override_blocked",
        "select_target",
        meaning=gettext_noop(
            "No override: the only case against the LLM target is a weak penalty."
        ),
        evidence_keys=("llm_target", "override_assessment"),
        usual_action=gettext_noop(
            "Add positive evidence for the intended tool, not only penalties."
        ),
        operator_action="add_distinguishing_metadata",
        triage_advice=_ADVICE_OVERRIDE_GUARD,
        lane="manual_investigation",
        origin="engine",
    ),
    _reason(
        "contradictory_evidence_override_blocked",
        "select_target",
        meaning=gettext_noop(
            "No override: some evidence favours the winner and some favours the LLM target."
        ),
        evidence_keys=("llm_target", "override_assessment"),
        usual_action=gettext_noop("Resolve the contradicting metadata of the two tools."),
        operator_action="resolve_contradictory_metadata",
        triage_advice=_ADVICE_OVERRIDE_GUARD,
        lane="manual_investigation",
        origin="engine",
    ),
    _reason(
        "lower_rank_surface_override_blocked",
        "select_target",
        meaning=gettext_noop(
            "No override: the winner ranked lower in retrieval and has no decisive evidence."
        ),
        evidence_keys=("llm_target", "rank_signals", "override_assessment"),
        usual_action=gettext_noop("Check the retrieval ranking and the metadata of both tools."),
        operator_action="review_retrieval_ranking",
        triage_advice=_ADVICE_OVERRIDE_GUARD,
        lane="manual_investigation",
        origin="engine",
    ),
    # ---- select_target: graph_tool_call.graphify.admit_target_candidates -----------
    _reason(
        "score_cliff_detected",
        "select_target",
        meaning=gettext_noop("Candidate admission cut the list at a sharp drop in scores."),
        evidence_keys=("score_cliff", "admitted_candidate_count", "dropped_target_candidates"),
        usual_action=gettext_noop("Check that the expected target was not cut below the cliff."),
        operator_action="review_candidate_scores",
        triage_advice=_ADVICE_ADMISSION,
        lane="manual_investigation",
        origin="engine",
    ),
    _reason(
        "ambiguous_admission_boundary",
        "select_target",
        meaning=gettext_noop(
            "Candidates just inside and just outside the admitted set scored almost alike."
        ),
        evidence_keys=("boundary_margin", "admitted_candidate_count", "dropped_target_candidates"),
        usual_action=gettext_noop("Expand the candidate set and select again."),
        operator_action="expand_candidates",
        triage_advice=_ADVICE_ADMISSION,
        lane="input_stale",
        origin="engine",
    ),
    _reason(
        "token_budget_limited",
        "select_target",
        meaning=gettext_noop(
            "Candidates were dropped because the catalog exceeded the token budget."
        ),
        evidence_keys=("token_budget", "admitted_candidate_count", "dropped_target_candidates"),
        usual_action=gettext_noop("Raise the token budget or compact the tool schemas."),
        operator_action="increase_token_budget",
        triage_advice=_ADVICE_ADMISSION,
        lane="manual_investigation",
        origin="engine",
    ),
    _reason(
        "minimum_candidate_shortfall",
        "select_target",
        meaning=gettext_noop("Fewer candidates were admitted than the configured minimum."),
        evidence_keys=("min_candidates", "admitted_candidate_count", "raw_candidate_count"),
        usual_action=gettext_noop("Expand the candidate set and select again."),
        operator_action="expand_candidates",
        triage_advice=_ADVICE_ADMISSION,
        lane="input_stale",
        origin="engine",
    ),
    _reason(
        "adaptive_admission_complete",
        "select_target",
        meaning=gettext_noop("Candidate admission finished without any warning."),
        evidence_keys=("admitted_candidate_count", "raw_candidate_count"),
        usual_action=gettext_noop("Look downstream: admission did not cause this failure."),
        operator_action="review_selector_evidence",
        triage_advice=_ADVICE_ADMISSION,
        lane="manual_investigation",
        origin="engine",
    ),
    # ---- synthesize ----------------------------------------------------------------
    _reason(
        "unknown_target",
        "synthesize",
        meaning=gettext_noop("The target tool is not in the graph artifact."),
        evidence_keys=("target_tool", "graph_version", "target"),
        usual_action=gettext_noop("Rebuild the artifact or repair the target selection."),
        operator_action="rebuild_artifact_or_repair_target_selection",
        triage_advice=(
            gettext_noop(
                "Look first at the graph version: the artifact may predate the tool, or selection "
                "named a tool that does not exist."
            )
        ),
        lane="manual_investigation",
    ),
    _reason(
        "unsatisfied_field",
        "synthesize",
        meaning=gettext_noop("A required consumed field cannot be supplied."),
        evidence_keys=("field_name", "semantic_tag", "target_tool"),
        usual_action=gettext_noop("Add a producer edge, a context default or a user slot."),
        operator_action="ask_user_or_add_context_default",
        triage_advice=_ADVICE_ASKS_USER,
        lane="input_stale",
    ),
    _reason(
        "enum_required",
        "synthesize",
        meaning=gettext_noop("No value was chosen for a required enum field."),
        evidence_keys=("field_name", "safe_enum_values", "semantic_tag", "tool"),
        usual_action=gettext_noop("Map enum labels, or let the user choose."),
        operator_action="map_enum_labels_or_ask_user",
        triage_advice=(
            gettext_noop(
                "Look first at the field's enum values and whether an enum label mapping exists "
                "for it."
            )
        ),
        lane="input_stale",
    ),
    _reason(
        "dynamic_option_required",
        "synthesize",
        meaning=gettext_noop("A producer can fetch the runtime options for the missing field."),
        evidence_keys=(
            "producer_name",
            "options_path",
            "label_field_hints",
            "field_name",
            "semantic_tag",
        ),
        usual_action=gettext_noop("Show an option picker before the final plan."),
        operator_action="show_option_picker",
        triage_advice=(
            gettext_noop(
                "Look first at the producer and its options path; the UI should offer these "
                "options before planning."
            )
        ),
        lane="input_stale",
    ),
    _reason(
        "cycle",
        "synthesize",
        meaning=gettext_noop("The tool dependency chain visits the same tool again."),
        evidence_keys=("chain", "tool_name", "tool"),
        usual_action=gettext_noop("Check the graph edges and the producer ranking."),
        operator_action="review_graph_edges_and_producer_ranking",
        triage_advice=(
            gettext_noop(
                "Look first at the chain: which producer edge leads back to a tool already being "
                "resolved."
            )
        ),
        lane="manual_investigation",
    ),
    _reason(
        "max_depth",
        "synthesize",
        meaning=gettext_noop(
            "The dependency search went deeper than the synthesizer's depth limit."
        ),
        evidence_keys=("max_depth", "current_tool", "tool"),
        usual_action=gettext_noop("Reduce graph noise, or adjust the depth on purpose."),
        operator_action="reduce_graph_noise_or_adjust_depth",
        triage_advice=(
            gettext_noop(
                "Look first at the current tool and its producer chain; deep chains usually come "
                "from noisy graph edges."
            )
        ),
        lane="manual_investigation",
    ),
    _reason(
        "user_input_fallback",
        "synthesize",
        meaning=gettext_noop("The planner went on with a user input slot for a field."),
        evidence_keys=("field_name", "required", "semantic_tag", "tool", "cause"),
        usual_action=gettext_noop("Add a UX slot or a context default."),
        operator_action="add_ux_slot_or_context_default",
        triage_advice=_ADVICE_ASKS_USER,
        lane="input_stale",
    ),
    _reason(
        "synthesis_error",
        "synthesize",
        meaning=(
            gettext_noop(
                "Plan synthesis failed without a more specific reason (generic PlanSynthesisError)."
            )
        ),
        evidence_keys=("target_tool", "graph_version"),
        usual_action=gettext_noop(
            "Read the synthesis diagnostic and report a specific reason upstream."
        ),
        operator_action="inspect_synthesis_diagnostic",
        triage_advice=(
            gettext_noop(
                "Look first at the diagnostic's detail keys; the engine gave no specific reason."
            )
        ),
        lane="manual_investigation",
        origin="engine",
    ),
    # ---- bind_request --------------------------------------------------------------
    # The seed lists these three only in its lifecycle table; their texts derive from it.
    _reason(
        "binding_failed",
        "bind_request",
        meaning=gettext_noop(
            "A step argument binding could not be resolved from earlier step outputs."
        ),
        evidence_keys=("step_id", "binding_path", "error_kind"),
        usual_action=gettext_noop(
            "Repair the field mapping, or re-plan so the binding points at real output."
        ),
        operator_action="repair_binding_or_field_mapping",
        triage_advice=_ADVICE_400,
        lane="input_stale",
    ),
    _reason(
        "argument_coercion_failed",
        "bind_request",
        meaning=gettext_noop(
            "An argument could not be coerced to the type or enum its schema requires."
        ),
        evidence_keys=("field_name", "expected_type", "coercion_rule"),
        usual_action=gettext_noop(
            "Fix the schema contract or the field mapping, or ask for a valid value."
        ),
        operator_action="fix_argument_schema_mapping",
        triage_advice=_ADVICE_400,
        lane="input_stale",
    ),
    _reason(
        "missing_required_argument",
        "bind_request",
        meaning=gettext_noop("A required request argument has no value when the request is built."),
        evidence_keys=("field_name", "location", "target_tool"),
        usual_action=gettext_noop(
            "Ask the user for the value or fix the runtime argument builder."
        ),
        operator_action="ask_user_or_fix_argument_builder",
        triage_advice=_ADVICE_ASKS_USER,
        lane="input_stale",
    ),
    # ---- auth_preflight ------------------------------------------------------------
    _reason(
        "auth_context_required",
        "auth_preflight",
        meaning=gettext_noop("Auth is required but there is no runtime user or session context."),
        evidence_keys=("auth_readiness", "auth_profile_id_present", "auth_token_present"),
        usual_action=gettext_noop("Run from the login UI or with a service account."),
        operator_action="run_with_login_or_service_account",
        triage_advice=_ADVICE_AUTH_PREFLIGHT,
        lane="policy_blocked",
    ),
    _reason(
        "auth_profile_missing",
        "auth_preflight",
        meaning=gettext_noop("The collection or tool requires auth but has no auth profile."),
        evidence_keys=("auth_readiness", "auth_profile_id_present"),
        usual_action=gettext_noop("Configure the collection's auth profile."),
        operator_action="configure_auth_profile",
        triage_advice=_ADVICE_AUTH_PREFLIGHT,
        lane="policy_blocked",
    ),
    _reason(
        "auth_header_resolution_failed",
        "auth_preflight",
        meaning=gettext_noop("An auth profile exists but the adapter could not build the headers."),
        evidence_keys=("auth_readiness", "session_station_header_names"),
        usual_action=gettext_noop("Check the session header resolver."),
        operator_action="check_session_header_resolver",
        triage_advice=_ADVICE_AUTH_PREFLIGHT,
        lane="policy_blocked",
    ),
    # ---- execute -------------------------------------------------------------------
    _reason(
        "auth_failed",
        "execute",
        meaning=gettext_noop("The downstream API returned 401 or 403."),
        evidence_keys=("http_status", "session_station_header_names", "auth_profile_id_present"),
        usual_action=gettext_noop("Refresh the credentials or check the downstream policy."),
        operator_action="refresh_credentials",
        triage_advice=_ADVICE_401_403,
        api_called="yes",
        # Left false although a header refresh may help: this lane never retries blindly,
        # and true here would contradict it.
        retryable=False,
        lane="policy_blocked",
        default_execution_state="completed",
    ),
    _reason(
        "http_4xx",
        "execute",
        meaning=gettext_noop("The downstream API rejected the request."),
        evidence_keys=("http_status", "argument_names", "error_code"),
        usual_action=gettext_noop("Check the request arguments and the business validation."),
        operator_action="fix_request_arguments",
        triage_advice=_ADVICE_400,
        api_called="yes",
        lane="input_stale",
        default_execution_state="completed",
    ),
    _reason(
        "http_5xx",
        "execute",
        meaning=gettext_noop("The downstream API failed on the server side."),
        evidence_keys=("http_status", "request_id", "attempt"),
        usual_action=gettext_noop("Retry only when it is safe; check the API logs."),
        operator_action="retry_with_backoff",
        api_called="yes",
        retryable=True,
        triage_advice=(
            gettext_noop(
                "Look first at the downstream API logs for the request id; retry only reads or "
                "idempotent writes."
            )
        ),
        lane="retry_safe",
        # A read is assumed; the lane module upgrades writes to started_unknown.
        default_execution_state="completed",
    ),
    _reason(
        "timeout",
        "execute",
        meaning=gettext_noop("The request exceeded its timeout."),
        evidence_keys=("timeout_ms", "elapsed_ms", "request_sent"),
        usual_action=gettext_noop("Check the timeout, the paging and the downstream latency."),
        operator_action="check_timeout_and_latency",
        api_called="maybe",
        retryable=True,
        triage_advice=(
            gettext_noop(
                "Look first at whether the request was sent; a write that timed out after send "
                "needs a status lookup."
            )
        ),
        # Reads are assumed; the lane module sends writes timed out after send to
        # reconcile_first, and evidence that nothing was sent to not_started.
        lane="retry_safe",
        default_execution_state="started_unknown",
    ),
    _reason(
        "network_error",
        "execute",
        meaning=gettext_noop("The transport failed before a meaningful HTTP response."),
        evidence_keys=("error_class", "host", "request_sent"),
        usual_action=gettext_noop("Check DNS, TLS, the proxy and the allowlist."),
        operator_action="check_dns_tls_proxy_allowlist",
        api_called="maybe",
        retryable=True,
        triage_advice=gettext_noop(
            "Look first at DNS, TLS, proxy and allowlist settings for the host."
        ),
        lane="retry_safe",
        default_execution_state="started_unknown",
    ),
    # Quality Lab's own (origin "adapter"): the seed lets an adapter add codes; no catalog
    # code fits an execute case whose collection has no base URL to call (network_error
    # would send it to retry_safe and uncaught_server_error calls it a bug).
    _reason(
        "base_url_not_configured",
        "execute",
        meaning=gettext_noop(
            "An execute case could not call the API: its collection has no base URL."
        ),
        evidence_keys=("base_url_present", "spec_server_url", "request_sent"),
        usual_action=gettext_noop(
            "Set the collection's base URL (its settings, or import-collection "
            "--base-url), then run the execute cases again."
        ),
        operator_action="configure_collection_base_url",
        triage_advice=(
            gettext_noop(
                "Look first at the collection's settings: a spec without an absolute servers "
                "URL gives no base URL, and nothing is called until someone sets one."
            )
        ),
        usually_fixed_in=gettext_noop("Quality Lab collection settings (base URL, allowed hosts)"),
        # Nothing was sent; the collection must be configured, never worked around.
        api_called="no",
        lane="policy_blocked",
        default_execution_state="not_started",
        origin="adapter",
    ),
    # The desk's own (origin "adapter"): an MCP server span that says only error.type =
    # tool_error (the SDK turned the tool's exception into an isError result before its
    # span saw it). Any catalog code would be a guess; this one says what is known.
    _reason(
        "tool_error_unreported",
        "execute",
        meaning=gettext_noop(
            "An MCP tool call failed, but its span says only that the tool returned an "
            "error result (error.type = tool_error), not why."
        ),
        evidence_keys=("error_type", "jsonrpc_code", "tool_call_id"),
        usual_action=gettext_noop(
            "Add triage-desk-client's NextActionContract middleware to the MCP server (or "
            "have the tool set tool_call.failure.reason and tool_call.execution_state on its "
            "span), so its failures arrive with their real reason."
        ),
        operator_action="report_the_reason_on_the_span",
        triage_advice=gettext_noop(
            "Look first at the MCP server's own logs for this call. To get the real reason "
            "next time, add triage-desk-client's NextActionContract middleware to the server: "
            "it classifies each failed call, answers the agent with the next-action envelope, "
            "reports the failure and names its reason on the span, so span and report are one "
            "record. Without the middleware, have the tool set the span attributes "
            "tool_call.failure.reason, tool_call.failure.stage and tool_call.execution_state "
            "before it fails (the desk reads them before anything else)."
        ),
        usually_fixed_in=gettext_noop(
            "the MCP server: its middleware, or its tools' span attributes"
        ),
        # The tool ran and may have written before it failed; nothing says how far it got.
        api_called="maybe",
        lane="manual_investigation",
        default_execution_state="started_unknown",
        origin="adapter",
    ),
    # ---- cleanup -------------------------------------------------------------------
    _reason(
        "cleanup_failed",
        "cleanup",
        meaning=gettext_noop("A mutating validation case could not restore the state it changed."),
        evidence_keys=("case_id", "cleanup_step", "http_status", "affected_targets"),
        usual_action=gettext_noop("Fix the cleanup steps before activating the case."),
        operator_action="fix_cleanup_steps",
        triage_advice=_ADVICE_WRITE_LEFT_DATA,
        lane="manual_investigation",
        default_execution_state="partially_completed",
    ),
    _reason(
        "cleanup_not_configured",
        "cleanup",
        meaning=gettext_noop("A mutating execute case has no cleanup plan."),
        evidence_keys=("case_id", "mutation_safety"),
        usual_action=gettext_noop("Keep the case inactive or add cleanup."),
        operator_action="add_cleanup_or_keep_case_inactive",
        triage_advice=_ADVICE_WRITE_LEFT_DATA,
        # The guard fires before the mutating case runs, so nothing was called.
        api_called="no",
        # A rule that mutations need cleanup, not a broken cleanup: stop, never bypass.
        lane="policy_blocked",
        default_execution_state="not_started",
    ),
    # ---- learn ---------------------------------------------------------------------
    _reason(
        "scrub_failed",
        "learn",
        meaning=gettext_noop("The trace payload could not be compacted safely."),
        evidence_keys=("record_type", "field_path"),
        usual_action=gettext_noop("Reject the learning record."),
        operator_action="reject_learning_record",
        triage_advice=(
            gettext_noop(
                "Look first at which field path could not be scrubbed; the record stays rejected."
            )
        ),
        # The security boundary refused the record; there is nothing to retry.
        lane="policy_blocked",
    ),
    _reason(
        "insufficient_repeated_success",
        "learn",
        meaning=gettext_noop("The promotion threshold is not met yet."),
        evidence_keys=("query_family", "observations", "required_observations", "failure_ratio"),
        usual_action=gettext_noop("Stay in shadow mode."),
        operator_action="keep_shadow_mode",
        triage_advice=_ADVICE_REPEATED_SUCCESS,
        # The promotion gate is a policy: waiting for observations, never bypassing it.
        lane="policy_blocked",
    ),
    _reason(
        "promotion_rejected",
        "learn",
        meaning=gettext_noop("A person or a policy rejected the suggestion."),
        evidence_keys=("suggestion_kind", "rejection_reason", "query_family"),
        usual_action=gettext_noop("Store the rejection reason; never apply the boost."),
        operator_action="record_rejection_reason",
        triage_advice=_ADVICE_REPEATED_SUCCESS,
        lane="policy_blocked",
    ),
    # ---- service -------------------------------------------------------------------
    _reason(
        "uncaught_server_error",
        "service",
        meaning=gettext_noop("The adapter or the service raised an error nobody handled."),
        evidence_keys=("exception_type", "request_id"),
        usual_action=gettext_noop("Fix the bug in the adapter or the service."),
        operator_action="fix_adapter_or_service_bug",
        triage_advice=gettext_noop(
            "Look first at the exception type and the service logs for the request id."
        ),
        lane="manual_investigation",
        default_execution_state="started_unknown",
    ),
)


def _index_reasons(reasons: tuple[ReasonInfo, ...]) -> dict[str, ReasonInfo]:
    # A duplicated code would silently shadow the first entry; fail at import instead.
    indexed: dict[str, ReasonInfo] = {}
    for info in reasons:
        if info.code in indexed:
            raise ValueError(f"duplicate reason code in taxonomy: {info.code}")
        indexed[info.code] = info
    return indexed


REASONS: dict[str, ReasonInfo] = _index_reasons(_REASON_LIST)


def reason_info(code: str) -> ReasonInfo | None:
    """Return the catalog entry for ``code``, or None for an unmapped reason."""
    return REASONS.get(code)


_STAGE_POSITION: dict[str, int] = {stage: index for index, stage in enumerate(STAGES)}


ORIGINS: tuple[str, ...] = ("catalog", "engine", "adapter")


def adapter_reasons() -> list[ReasonInfo]:
    """The reasons Triage Desk added itself (not in the seed catalog, not from the engine)."""
    return [info for info in _REASON_LIST if info.origin == "adapter"]


def stage_index(stage: str) -> int:
    """Position of ``stage`` in the lifecycle; adapter stages sort after every known one."""
    return _STAGE_POSITION.get(stage, len(STAGES))


def is_known_stage(stage: str) -> bool:
    return stage in _STAGE_POSITION


# --------------------------------------------------------------------------------------
# The taxonomy as runtimes read it (GET /api/v1/taxonomy, manage.py taxonomy)
# --------------------------------------------------------------------------------------

# What an agent does next in each lane, as seed 004's envelope spells `retry.next_action`
# (the seed writes query_by_idempotency_key and request_approval; the others follow suit).
LANE_NEXT_ACTION: dict[str, str] = {
    "retry_safe": "retry_with_backoff",
    "reconcile_first": "query_by_idempotency_key",
    "input_stale": "refresh_inputs_and_replan",
    "policy_blocked": "request_approval",
    "manual_investigation": "stop_automation_and_investigate",
}

# The languages every text of the document comes in; codes are never translated.
PUBLIC_LANGUAGES: tuple[str, ...] = ("en", "ko")


class MessageCatalog:
    """Where public_document() reads a text in a language. This module imports no Django,
    so the triage app installs the one that reads Django's catalogs (triage/apps.py)."""

    def text(self, message: str, language: str) -> str:
        raise NotImplementedError


_CATALOGS: list[MessageCatalog] = []


def use_message_catalog(catalog: MessageCatalog) -> None:
    _CATALOGS[:] = [catalog]


def public_document() -> dict[str, object]:
    """The vocabulary as one JSON document: stages, reasons and lanes, each text in English
    and Korean (from the message catalogs). Reads no database; the same for every caller
    and whatever language is active."""
    if not _CATALOGS:
        raise RuntimeError("public_document() needs the triage app loaded (django.setup()).")
    catalog = _CATALOGS[0]

    def texts(message: str) -> dict[str, str]:
        return {language: catalog.text(message, language) for language in PUBLIC_LANGUAGES}

    return {
        "version": TAXONOMY_VERSION,
        "stages": [{"code": code, "title": texts(STAGE_INFO[code].title)} for code in STAGES],
        "reasons": [
            {
                "code": info.code,
                "stage": info.stage,
                "lane": info.lane,
                "retryable": info.retryable,
                "api_called": info.api_called,
                "execution_state": info.default_execution_state,
                "meaning": texts(info.meaning),
                "advice": texts(info.triage_advice),
            }
            for info in _REASON_LIST
        ],
        "lanes": [
            {
                "code": code,
                "next_action": LANE_NEXT_ACTION[code],
                "meaning": texts(LANE_INFO[code].default_action),
            }
            for code in LANES
        ],
    }
