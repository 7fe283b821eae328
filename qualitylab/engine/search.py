"""The search stage: ``retrieve_graphify`` over the case's Top-K, optionally reranked, and
the retrieval failures (``no_candidates``, ``not_retrieved``, ``low_confidence``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from graph_tool_call.graphify import retrieve_graphify

from qualitylab.engine.outcome import CaseRunState, failure_record

LOW_CONFIDENCE_RULE = "direct match: the expected target must be a retrieval seed (seed > 0)"


class SearchStage(CaseRunState):
    """Retrieval: what a search case runs, and the first stage of every other mode."""

    def search_failure_reason(self, rows: list[dict[str, Any]]) -> str | None:
        """What check_search would say about these rows, without failing the case."""
        expected = self.case.expected_target
        if not rows:
            return "no_candidates"
        if expected is None:
            return None
        names = [str(row.get("name")) for row in rows]
        if expected not in names:
            return "not_retrieved"
        breakdown = rows[names.index(expected)].get("score_breakdown") or {}
        return "low_confidence" if float(breakdown.get("seed") or 0.0) <= 0.0 else None

    # -- search ----------------------------------------------------------------------

    def search(self) -> list[dict[str, Any]]:
        case = self.case
        with self.timed("search"):
            response = retrieve_graphify(
                self.collection.graph, case.query, top_k=case.expected_top_k, include_evidence=True
            )
            rows = [
                {key: value for key, value in row.items() if key != "tool"}
                for row in response.get("results") or []
                if isinstance(row, dict)
            ]
            if self.rerank is not None:
                rows = list(self.rerank(case.query, rows))[: case.expected_top_k]
                self.outcome.learning = {"rerank_applied": True}
        self.current_rows = rows
        names = [str(row.get("name")) for row in rows]
        hit_rank = names.index(case.expected_target) + 1 if case.expected_target in names else None
        scores = [float(row.get("score") or 0.0) for row in rows]
        self.outcome.search = {
            "query": case.query,
            "top_k": case.expected_top_k,
            "expected_target": case.expected_target,
            "hit": None if case.expected_target is None else hit_rank is not None,
            "hit_rank": hit_rank,
            "results": [_compact_row(rank, row) for rank, row in enumerate(rows, start=1)],
            "seeds": list((response.get("stats") or {}).get("seeds") or []),
            "intent": dict(response.get("intent") or {}),
            "score_distribution": _score_distribution(scores),
        }
        return rows

    def check_search(self, rows: list[dict[str, Any]]) -> None:
        case = self.case
        if not rows:
            self.fail(self.no_candidates())
        if case.expected_target is None:
            return
        names = [str(row.get("name")) for row in rows]
        if case.expected_target not in names:
            self.fail(self.not_retrieved(names))
        hit = rows[names.index(case.expected_target)]
        breakdown = hit.get("score_breakdown") or {}
        if float(breakdown.get("seed") or 0.0) <= 0.0:
            self.fail(
                failure_record(
                    "retrieve",
                    "low_confidence",
                    f"{case.expected_target} is in the Top-{case.expected_top_k} only through "
                    "graph expansion, without a direct match",
                    tool=case.expected_target,
                    evidence={
                        "expected_target": case.expected_target,
                        "hit_rank": names.index(case.expected_target) + 1,
                        "score_breakdown": dict(breakdown),
                        "expanded_from": hit.get("expanded_from"),
                        "score_distribution": self.outcome.search["score_distribution"]
                        if self.outcome.search
                        else {},
                        "threshold": LOW_CONFIDENCE_RULE,
                    },
                )
            )

    def no_candidates(self) -> dict[str, Any]:
        return failure_record(
            "retrieve",
            "no_candidates",
            "retrieval returned no tool for the query",
            evidence={"query": self.case.query, "filter": None, "top_k": self.case.expected_top_k},
        )

    def not_retrieved(self, names: list[str]) -> dict[str, Any]:
        case = self.case
        return failure_record(
            "retrieve",
            "not_retrieved",
            f"{case.expected_target} is not in the Top-{case.expected_top_k}",
            tool=case.expected_target,
            evidence={"expected_target": case.expected_target, "returned_tool_names": names},
        )


def _compact_row(rank: int, row: Mapping[str, Any]) -> dict[str, Any]:
    semantic = row.get("semantic_evidence") or {}
    compact: dict[str, Any] = {
        "rank": rank,
        "name": row.get("name"),
        "score": row.get("score"),
        "score_breakdown": dict(row.get("score_breakdown") or {}),
        "semantic": {
            key: semantic.get(key)
            for key in ("canonical_action", "primary_resource", "result_shape", "matched_terms")
            if key in semantic
        },
    }
    if row.get("expanded_from"):
        compact["expanded_from"] = row["expanded_from"]
    edges = row.get("edge_evidence") or []
    if edges and isinstance(edges[0], Mapping):
        edge = edges[0]
        compact["edge"] = {
            key: edge.get(key) for key in ("source", "target", "relation", "confidence")
        }
    if row.get("learning_evidence"):
        compact["learning"] = row["learning_evidence"]
    return compact


def _score_distribution(scores: list[float]) -> dict[str, Any]:
    if not scores:
        return {"count": 0}
    return {
        "count": len(scores),
        "top": round(max(scores), 4),
        "min": round(min(scores), 4),
        "gap_1_2": round(scores[0] - scores[1], 4) if len(scores) > 1 else None,
    }
