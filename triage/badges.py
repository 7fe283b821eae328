"""Badges other apps put on a tool's rows in the triage and group pages.

An app registers a provider in its `ready()`; the pages ask every provider once per page
with the (collection, tool) pairs they show. Triage imports no app that provides one."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

ToolKey = tuple[str, str]  # (collection, tool)


@dataclass(frozen=True)
class ToolBadge:
    label: str
    title: str  # what the badge means, on hover and focus
    url: str


Provider = Callable[[Iterable[ToolKey]], dict[ToolKey, ToolBadge]]
_PROVIDERS: list[Provider] = []


def register_tool_badges(provider: Provider) -> None:
    if provider not in _PROVIDERS:
        _PROVIDERS.append(provider)


def tool_badges(keys: Iterable[ToolKey]) -> dict[ToolKey, list[ToolBadge]]:
    wanted = {key for key in keys if key[1]}
    badges: dict[ToolKey, list[ToolBadge]] = {}
    if not wanted:
        return badges
    for provider in _PROVIDERS:
        for key, badge in provider(wanted).items():
            badges.setdefault(key, []).append(badge)
    return badges
