"""The contracts page's rows, written in Python: a page of a hundred tools in four tables is
thousands of cells, which Django's template loop renders about ten times slower (the triage
page's rows are written the same way)."""

from __future__ import annotations

from typing import Any

from django import template
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.http import urlencode
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext

from contracts.models import RETRY_RULE_KINDS, FindingKind
from contracts.selectors import CRITERIA, ContractsOverview, ToolContract, percent_text

register = template.Library()


# Seed 004's own sentences (its practical half), quoted as written: the rollout criteria and
# the retry rules in the words of the document the contracts page answers to. A quotation
# is never translated (translate="no"), in either language.
SEED_QUOTES = {
    "rollout": (
        "먼저 최근 30일 실패율이 1% 이상이거나 retry가 월 10회 이상 발생한 tool, 외부 "
        "write·credential 사용·비용 발생·production 변경이 있는 tool, timeout 뒤 상태를 "
        "사람이 수동 확인하는 tool, 중복 실행이 실제 문제였던 tool 중 4~5개를 고릅니다. 각 "
        "tool에 side_effect, idempotency, execution_state, next_action, evidence_ref 다섯 "
        "필드를 먼저 붙입니다."
    ),
    "retry_rules": (
        "read-only retry_safe 호출은 최대 2회, 1초·4초 지수 backoff와 jitter를 적용하고, 같은 "
        "operation에서 5분 안에 3회 실패하면 자동 재시도를 멈춥니다. reconcile_first는 재시도 "
        "0회로 두고 status lookup을 1회만 수행합니다. lookup도 timeout이면 "
        "manual_investigation으로 승격합니다."
    ),
}


@register.simple_tag
def seed_quote(name: str) -> SafeString:
    return format_html(
        '<blockquote class="seed small" lang="ko" translate="no">{} '
        '<span class="muted">(seed 004)</span></blockquote>',
        SEED_QUOTES[name],
    )


@register.filter
def share(value: float | None) -> str:
    return percent_text(value)


@register.filter
def example_label(finding: object) -> str:
    kind = getattr(finding, "example_type", "")
    number = getattr(finding, "example_id", "")
    if kind == "receipt":
        return gettext("receipt %(id)s") % {"id": number}
    return gettext("failure record %(id)s") % {"id": number}


def _tool_cell(tool: ToolContract, label: str) -> SafeString:
    return format_html(
        '<td data-label="{}"><span class="code">{}</span> <span class="small muted">{}</span></td>',
        label,
        tool.tool,
        tool.collection,
    )


def _findings_url(overview: ContractsOverview, tool: ToolContract, kind: str) -> str:
    query: dict[str, Any] = {"days": overview.filters.days, "kind": kind, "tool": tool.tool}
    if tool.collection:
        query["collection"] = tool.collection
    return f"{reverse('contracts:findings')}?{urlencode(query)}"


def _states() -> dict[str, tuple[str, str, str]]:
    return {
        "keeping": ("state-keeping", gettext("contracted, kept"),
                    gettext("sends the five fields and broke no retry rule")),
        "violating": ("state-violating", gettext("contracted, broken"),
                      gettext("sends the five fields but broke a retry rule")),
        "first_in_line": ("state-first", gettext("no contract"),
                          gettext("in the first batch, without the five fields")),
        "first_in_line_partly": ("state-first", gettext("partly sent"),
                                 gettext("in the first batch, without the five fields")),
        "partial": ("", gettext("partly sent"), ""),
    }  # fmt: skip


def _state(tool: ToolContract, states: dict[str, tuple[str, str, str]], none: str) -> SafeString:
    state = tool.state
    if state == "first_in_line" and tool.coverage != "none":
        state = "first_in_line_partly"
    if state not in states:
        return format_html('<span class="muted small">{}</span>', none)
    css, text, title = states[state]
    return format_html('<span class="pill {}" title="{}">{}</span>', css, title, text)


@register.simple_tag
def ranked_rows(overview: ContractsOverview) -> SafeString:
    labels = {
        "rank": gettext("rank"),
        "tool": gettext("tool"),
        "contract": gettext("contract"),
        "batch": gettext("first batch"),
        "batch_title": gettext("in the seed first batch: contract this tool first"),
        "meets": gettext("meets"),
        "no": gettext("no"),
        "no_collection": gettext("no collection"),
    }
    states, none = _states(), gettext("none sent")
    criteria = {code: str(label) for code, label in CRITERIA.items()}
    rows = []
    for tool in overview.ranked:
        query: dict[str, Any] = {"days": overview.filters.days, "tool": tool.tool}
        if tool.collection:
            query["collection"] = tool.collection
        batch = (
            format_html(
                '<br><span class="pill first-batch-pill" title="{}">{}</span>',
                labels["batch_title"],
                labels["batch"],
            )
            if tool.first_batch
            else ""
        )
        cells = format_html_join(
            "",
            '<td data-label="{}" class="criterion{}">{}<br><span class="small">{}</span></td>',
            (
                (
                    criteria[criterion.code],
                    " met" if criterion.met else "",
                    format_html("<strong>&#10003; {}</strong>", labels["meets"])
                    if criterion.met
                    else format_html('<span class="muted">{}</span>', labels["no"]),
                    criterion.figure,
                )
                for criterion in tool.criteria
            ),
        )
        rows.append(
            format_html(
                '<tr{}><td class="num" data-label="{}">{}{}</td>'
                '<td data-label="{}"><a class="code" href="?{}">{}</a><br>'
                '<span class="small muted">{}</span></td><td data-label="{}">{}</td>{}</tr>\n',
                mark_safe(' class="first-batch"') if tool.first_batch else "",
                labels["rank"],
                tool.rank,
                batch,
                labels["tool"],
                urlencode(query),
                tool.tool,
                tool.collection or labels["no_collection"],
                labels["contract"],
                _state(tool, states, none),
                cells,
            )
        )
    return mark_safe("".join(rows))


def _share_rows(
    tools: list[ToolContract],
    *,
    count_label: str,
    count: Any,
    shares: Any,
    mark_none_sent: bool,
) -> SafeString:
    """One row per tool: its count, then the share of it carrying each field."""
    tool_label = gettext("tool")
    rows = []
    for tool in tools:
        if not count(tool):
            continue
        cells = format_html_join(
            "",
            '<td class="num{}" data-label="{}">{}</td>',
            ((" contradiction" if mark_none_sent and value == 0 else "", name,
              percent_text(value))
             for name, value in shares(tool)),
        )  # fmt: skip
        rows.append(
            format_html(
                '<tr>{}<td class="num" data-label="{}">{}</td>{}</tr>\n',
                _tool_cell(tool, tool_label),
                count_label,
                f"{count(tool):,}",
                cells,
            )
        )
    return mark_safe("".join(rows))


@register.simple_tag
def sent_rows(overview: ContractsOverview) -> SafeString:
    """The five fields as sent, a share of each tool's failures and receipts."""
    return _share_rows(
        overview.sending,
        count_label=gettext("items"),
        count=lambda tool: tool.items,
        shares=lambda tool: tool.shares,
        mark_none_sent=True,
    )


@register.simple_tag
def envelope_rows(overview: ContractsOverview) -> SafeString:
    """The seed's envelope fields, a share of each tool's envelopes (tools that send any)."""
    return _share_rows(
        overview.sending,
        count_label=gettext("envelopes"),
        count=lambda tool: tool.envelopes,
        shares=lambda tool: tool.envelope_shares,
        mark_none_sent=False,
    )


@register.simple_tag
def rule_rows(overview: ContractsOverview) -> SafeString:
    tool_label, broken_label = gettext("tool"), gettext("broken")
    kinds = {kind: str(FindingKind(kind).label) for kind in RETRY_RULE_KINDS}
    rows = []
    for tool in overview.keeping_rules:
        cells = format_html_join(
            "",
            '<td class="num" data-label="{}">{}</td>',
            (
                (
                    kinds[kind],
                    format_html(
                        '<a class="contradiction" href="{}">{}</a>',
                        _findings_url(overview, tool, kind),
                        tool.findings[kind],
                    )
                    if tool.findings.get(kind)
                    else "0",
                )
                for kind in RETRY_RULE_KINDS
            ),
        )
        rows.append(
            format_html(
                '<tr>{}{}<td class="num" data-label="{}"><strong>{}</strong></td></tr>\n',
                _tool_cell(tool, tool_label),
                cells,
                broken_label,
                tool.violations,
            )
        )
    return mark_safe("".join(rows))


@register.simple_tag
def self_report_rows(overview: ContractsOverview) -> SafeString:
    labels = (gettext("not_started claims"), gettext("the audit saw the call"))
    doubles_label, tool_label = gettext("double completions"), gettext("tool")
    rows = []
    for tool in overview.self_reports:
        seen: Any = "0"
        if tool.contradicted:
            seen = format_html(
                '<a class="contradiction" href="{}">{}</a>{}',
                _findings_url(overview, tool, "not_started_contradicted"),
                tool.contradicted,
                f" ({percent_text(tool.contradicted_share)})"
                if tool.contradicted_share is not None
                else "",
            )
        doubles: Any = "0"
        if tool.double_completions:
            doubles = format_html(
                '<a class="contradiction" href="{}">{}</a>',
                _findings_url(overview, tool, "double_completion"),
                tool.double_completions,
            )
        rows.append(
            format_html(
                '<tr>{}<td class="num" data-label="{}">{}</td><td class="num" data-label="{}">'
                '{}</td><td class="num" data-label="{}">{}</td></tr>\n',
                _tool_cell(tool, tool_label),
                labels[0],
                tool.not_started_claims,
                labels[1],
                seen,
                doubles_label,
                doubles,
            )
        )
    return mark_safe("".join(rows))
