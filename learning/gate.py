"""The promotion gate: when a suggestion may leave `suggested`, and when policy promotes it.

Pure: facts in, verdict out (no ORM), so the whole rule reads as one table in
tests/learning/test_gate.py. graph-tool-call's own helper promotes on the observation count
alone and ignores failures once a suggestion has two observations; this gate is the one the
desk enforces:

* repeated success: at least ``LEARNING_MIN_SUCCESS_OBSERVATIONS`` pieces of distinct
  evidence for the same query family: successful observations counted once per runtime
  session and once per Quality Lab case (a case repeated five times, or run again, is one);
* failure ratio: of the recent attempts of that family that used the target, at most
  ``LEARNING_MAX_RECENT_FAILURE_RATIO`` failed (2 successes and 3 failures stay suggested);
* stable target: at least ``LEARNING_MIN_TARGET_AGREEMENT`` of the family's recent
  successes chose this target (plan path, edge);
* scrubbed evidence: no attempt behind it arrived carrying a secret;
* same collection: the suggestion and every attempt behind it belong to the collection;
* the collection's policy allows learning.

All pass: ``promotable``. Policy then promotes by itself only in a collection whose learning
mode is ``promoted``, that is read-only, and where no person has demoted the suggestion:
write-capable collections always wait for a reviewer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.utils.translation import ngettext

SUGGESTED = "suggested"
PROMOTABLE = "promotable"


@dataclass(frozen=True)
class Thresholds:
    min_success_observations: int = 2
    max_recent_failure_ratio: float = 0.5
    min_target_agreement: float = 0.8
    auto_promote: bool = True

    @classmethod
    def from_settings(cls) -> Thresholds:
        return cls(
            min_success_observations=settings.LEARNING_MIN_SUCCESS_OBSERVATIONS,
            max_recent_failure_ratio=settings.LEARNING_MAX_RECENT_FAILURE_RATIO,
            min_target_agreement=settings.LEARNING_MIN_TARGET_AGREEMENT,
            auto_promote=settings.LEARNING_AUTO_PROMOTE,
        )


@dataclass(frozen=True)
class GateFacts:
    """What the gate looks at, counted by the caller from the stored attempts."""

    observations: int
    recent_successes: int  # recent attempts of the family that used the target and succeeded
    recent_failures: int  # ... and failed
    agreeing_successes: int  # recent successes of the family that chose this target
    family_successes: int  # recent successes of the family that chose any target
    sensitive: bool = False
    same_collection: bool = True
    learning_allowed: bool = True
    write_capable: bool = False
    learning_mode: str = "observe"
    demoted_before: bool = False
    # Distinct evidence behind the observations; None counts every observation as distinct.
    production_sessions: int | None = None
    test_cases: int = 0

    @property
    def distinct_evidence(self) -> int:
        if self.production_sessions is None:
            return self.observations
        return self.production_sessions + self.test_cases


@dataclass(frozen=True)
class GateCheck:
    name: str
    passed: bool
    detail: str  # in English; the pages write it again from params in the reader's language
    params: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "passed": self.passed,
            "detail": self.detail,
            "params": self.params,
        }


@dataclass(frozen=True)
class GateVerdict:
    status: str  # suggested | promotable
    checks: tuple[GateCheck, ...]
    auto_promote: bool  # policy may promote it now, without a reviewer
    why_reviewer: str  # why a person must approve it (empty when policy may)

    @property
    def promotable(self) -> bool:
        return self.status == PROMOTABLE

    @property
    def blocked_by(self) -> list[str]:
        return [check.name for check in self.checks if not check.passed]


def evaluate_gate(facts: GateFacts, thresholds: Thresholds) -> GateVerdict:
    needed = thresholds.min_success_observations
    total = facts.recent_successes + facts.recent_failures
    ratio = facts.recent_failures / total if total else 0.0
    agreement = facts.agreeing_successes / facts.family_successes if facts.family_successes else 0.0
    checks = (
        GateCheck(
            "repeated_success",
            facts.distinct_evidence >= needed,
            evidence_text(_evidence_params(facts, needed)),
            _evidence_params(facts, needed),
        ),
        GateCheck(
            "failure_ratio",
            ratio <= thresholds.max_recent_failure_ratio,
            f"{facts.recent_failures} of {total} recent attempt{_s(total)} with this target "
            f"failed ({ratio:.0%}; at most {thresholds.max_recent_failure_ratio:.0%})",
            {
                "failures": facts.recent_failures,
                "total": total,
                "ratio": f"{ratio:.0%}",
                "limit": f"{thresholds.max_recent_failure_ratio:.0%}",
            },
        ),
        GateCheck(
            "stable_target",
            facts.family_successes > 0 and agreement >= thresholds.min_target_agreement,
            f"{facts.agreeing_successes} of {facts.family_successes} recent successes of the "
            f"query family agree ({agreement:.0%}; needs {thresholds.min_target_agreement:.0%})",
            {
                "agreeing": facts.agreeing_successes,
                "successes": facts.family_successes,
                "agreement": f"{agreement:.0%}",
                "needed": f"{thresholds.min_target_agreement:.0%}",
            },
        ),
        GateCheck(
            "scrubbed_evidence",
            not facts.sensitive,
            "an attempt behind it carried a secret (stored scrubbed)"
            if facts.sensitive
            else "no attempt behind it carried a secret",
            {"sensitive": facts.sensitive},
        ),
        GateCheck(
            "same_collection",
            facts.same_collection,
            "suggestion and attempts belong to this collection"
            if facts.same_collection
            else "evidence from another collection",
            {"same_collection": facts.same_collection},
        ),
        GateCheck(
            "collection_allows_learning",
            facts.learning_allowed,
            "the collection's policy allows learning"
            if facts.learning_allowed
            else "the collection's policy does not allow learning",
            {"learning_allowed": facts.learning_allowed},
        ),
    )
    status = PROMOTABLE if all(check.passed for check in checks) else SUGGESTED
    if facts.write_capable:
        why = "write-capable collection: a reviewer approves every promotion"
    elif facts.learning_mode != "promoted":
        why = f"the collection's learning mode is {facts.learning_mode}, not promoted"
    elif facts.demoted_before:
        why = "a person demoted it before: policy does not promote it again"
    elif not thresholds.auto_promote:
        why = "automatic promotion is off (LEARNING_AUTO_PROMOTE)"
    else:
        why = ""
    return GateVerdict(
        status=status,
        checks=checks,
        auto_promote=status == PROMOTABLE and not why,
        why_reviewer=why,
    )


def _evidence_params(facts: GateFacts, needed: int) -> dict[str, Any]:
    return {
        "count": facts.distinct_evidence,
        "sessions": facts.production_sessions,
        "cases": facts.test_cases,
        "observations": facts.observations,
        "needed": needed,
    }


def evidence_text(params: dict[str, Any]) -> str:
    """The repeated-success check in words, in the active language (the review pages call it
    again with the stored numbers, so a reader sees it in their own)."""
    distinct = params["count"]
    if params["sessions"] is None:
        return ngettext(
            "%(count)d successful observation (needs %(needed)d)",
            "%(count)d successful observations (needs %(needed)d)",
            distinct,
        ) % {"count": distinct, "needed": params["needed"]}
    return (
        ngettext(
            "%(count)d distinct piece of evidence: %(sessions)d production session(s), "
            "%(cases)d Quality Lab case(s), from %(observations)d successful observation(s) "
            "(needs %(needed)d distinct)",
            "%(count)d distinct pieces of evidence: %(sessions)d production session(s), "
            "%(cases)d Quality Lab case(s), from %(observations)d successful observation(s) "
            "(needs %(needed)d distinct)",
            distinct,
        )
        % params
    )


def _s(count: int) -> str:
    return "" if count == 1 else "s"
