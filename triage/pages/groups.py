"""The triage page, the group page and the actions on groups."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import parse_qsl, urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required, permission_required
from django.core.exceptions import ValidationError
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect, QueryDict
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.utils import timezone
from django.utils.text import capfirst
from django.utils.translation import gettext, ngettext
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST, require_safe
from django_htmx.http import push_url

from core.drafts import draft_keep, draft_take, errors_in_words
from core.http import is_partial
from organisation import roles
from organisation.access import can_see, has_collection_perm, team_role_column
from triage import selectors
from triage.badges import tool_badges
from triage.forms import (
    RUNBOOK_SCOPE_COLLECTION,
    RUNBOOK_SCOPE_EVERY,
    UNASSIGN,
    BulkActionForm,
    GroupActionForm,
    GroupRecordsForm,
    RunbookForm,
    TriageFilterForm,
    group_draft_key,
    group_page_url,
    posted_back,
    triage_back_query,
)
from triage.models import BulkAction, FailureGroup, GroupAction
from triage.pages.visibility import require_collection_perm, visible_or_404
from triage.services import (
    GroupActionError,
    bulk_action_undo,
    group_act,
    group_act_undoable,
    groups_bulk_act,
    runbook_set,
)
from triage.timezones import local_moment, local_span
from triage.vocabulary import taxonomy

BULK_ACTIONS = ("acknowledge", "resolve", "mute", "reopen", "assign")


def _action_label(action: str) -> str:
    """What the pages call an action (its code is the form's value)."""
    return str(dict(GroupActionForm.base_fields["action"].choices).get(action, action))  # type: ignore[attr-defined]


# The first screen's window when anything failed in it.
RECENT_WINDOW_KEY = "1h"
RECENT_WINDOW = timedelta(hours=1)


def _first_screen_window(filters: dict[str, str], *, now: datetime, user: Any) -> str:
    """The window of a triage view whose URL names none: the first screen is now, so the
    last 60 minutes when anything these filters show failed in them, else the last 24
    hours. The bulk bar judges its posted view the same way, so it acts on what was shown
    (and refuses, by the count, when the hour turned quiet in between)."""
    recent = selectors.failed_between(
        filters=filters, start=now - RECENT_WINDOW, end=now, user=user
    )
    return RECENT_WINDOW_KEY if recent else str(TriageFilterForm.DEFAULTS["window"])


@require_safe
@login_required
@permission_required("triage.view_failuregroup", raise_exception=True)
def triage_page(request: HttpRequest) -> HttpResponse:
    data = request.GET.copy()
    for key, value in TriageFilterForm.DEFAULTS.items():
        data.setdefault(key, value)  # a link setting only some filters shows the defaults
    now = timezone.now()
    form = TriageFilterForm(data, now=now)
    filters = form.filters()
    default_window = ""
    if "window" not in request.GET:
        default_window = _first_screen_window(filters, now=now, user=request.user)
        if default_window != data["window"]:
            data["window"] = default_window
            form = TriageFilterForm(data, now=now)
    window = form.window_range(now=now)
    overview = selectors.triage_overview(
        start=window.start,
        end=window.end,
        filters=filters,
        sort=form.sort_order(),
        now=now,
        user=request.user,
    )
    # The shareable URL of this view: only the filters that are set (and valid). Without a
    # window it opens on the first screen's choice, then as now.
    shown = [(key, value) for key, value in form.query_items() if key in request.GET]
    query = urlencode(shown)
    query_without_reason = urlencode([(k, v) for k, v in shown if k not in ("stage", "reason")])
    query_without_source = urlencode([(k, v) for k, v in shown if k != "source"])
    query_without_window = urlencode([(k, v) for k, v in shown if k != "window"])
    context = {
        "form": form,
        "window": window,
        "default_window": default_window,
        "sort": form.sort_order(),
        "view": form.view_mode(),
        "filters": filters,
        "overview": overview,
        "query": query,
        "query_without_reason": query_without_reason,
        "query_without_source": query_without_source,
        "query_without_window": query_without_window,
        "back_suffix": f"?{urlencode({'back': query})}" if query else "",
        "bulk_form": _bulk_form(request),
        "bulk_actions": [(action, _action_label(action)) for action in BULK_ACTIONS],
        "can_act": request.user.has_perm(roles.ACT_ON_GROUP),
        "last_bulk": _last_bulk(request, view=query),
        "as_of": now,
        "refresh_seconds": form.refresh_seconds(),
        "form_state": json.dumps(form.shown_values()),
        "spark_caption": _spark_caption(overview),
        "spark_span": local_span(overview.spark_start, min(window.end, _spark_end(overview))),
        "tool_badges": _page_tool_badges(overview),
    }
    # A refused filter is a form error shown on the page, with a 400 (htmx swaps it in).
    status = 400 if form.errors else 200
    if is_partial(request):
        response = render(request, "triage/triage.html#results", context, status=status)
        if request.htmx.trigger == AUTO_REFRESH:  # type: ignore[attr-defined]
            return response  # the same view again: no new history entry
        return push_url(response, f"{request.path}?{query}" if query else request.path)
    return render(request, "triage/triage.html", context, status=status)


def _page_tool_badges(overview: selectors.TriageOverview) -> list[tuple[str, str, Any]]:
    """(collection, tool, badges) for the tools of the groups the page shows that another
    app badges (the contracts page: a first-batch tool whose runtimes send no contract)."""
    # Every group of the reason rows is one of the page's groups.
    keys = {(row.group.collection, row.group.tool) for row in overview.groups_by_count}
    found = tool_badges(keys)
    return [(collection, tool, found[(collection, tool)]) for collection, tool in sorted(found)]


BULK_DRAFT = "bulk"


def _bulk_form(request: HttpRequest) -> BulkActionForm:
    """The bulk bar's form: bound to what was typed when the last try was refused."""
    draft = draft_take(request, key=BULK_DRAFT) if request.user.is_authenticated else None
    form = BulkActionForm(draft, user=request.user) if draft else BulkActionForm()
    return form


# The id of the triage page's "refresh now" link, which also refreshes on a timer.
AUTO_REFRESH = "auto-refresh"


def _spark_end(overview: selectors.TriageOverview) -> datetime:
    return overview.spark_start + timedelta(hours=overview.spark_hours)


def _spark_caption(overview: selectors.TriageOverview) -> str:
    """What the sparkline spans, which is not always the window (a 1h window's line shows
    the day, so that the hour reads against it)."""
    if overview.spark_daily:
        days = overview.spark_hours // 24
        if overview.spark_unit == "day":
            return ngettext("%(days)s UTC day, per day", "%(days)s UTC days, per day", days) % {
                "days": days
            }
        return _("%(days)s UTC days in %(bins)s bars") % {
            "days": days,
            "bins": overview.spark_bins,
        }
    if overview.spark_unit == "hour":
        return _("%(hours)s hours, per hour") % {"hours": overview.spark_hours}
    return _("%(hours)s hours in %(bins)s bars") % {
        "hours": overview.spark_hours,
        "bins": overview.spark_bins,
    }


def _last_bulk(request: HttpRequest, *, view: str) -> BulkAction | None:
    """The person's last bulk action, offered for undo on the view it was applied from only:
    once the view changes the offer is gone (an Undo under other filters would undo what
    the page no longer shows)."""
    bulk_id = request.session.get("last_bulk_id")
    if not bulk_id:
        return None
    if _view_key(request.session.get(LAST_BULK_VIEW, view)) != _view_key(view):
        request.session.pop("last_bulk_id", None)
        request.session.pop(LAST_BULK_VIEW, None)
        return None
    return BulkAction.objects.filter(
        pk=bulk_id, undone_at__isnull=True, actor_id=request.user.pk
    ).first()


# The triage view a bulk action was applied from: where its Undo is offered and returns to.
LAST_BULK_VIEW = "last_bulk_view"


def _view_key(query: str) -> list[tuple[str, str]]:
    """A triage query's filters, whatever their order in the address."""
    return sorted(parse_qsl(query, keep_blank_values=False))


@require_safe
@login_required
@permission_required("triage.view_failuregroup", raise_exception=True)
def group_page(request: HttpRequest, group_id: int) -> HttpResponse:
    group = visible_or_404(
        FailureGroup.objects.select_related("assignee").annotate(
            viewer_team_role=team_role_column(request.user)
        ),
        user=request.user,
        pk=group_id,
    )
    form = GroupRecordsForm(request.GET)
    form.is_valid()
    before = form.cleaned_data.get("before")
    back = form.cleaned_data.get("back") or ""
    page = selectors.group_records(group=group, before=before or None)
    keys = sorted({r.idempotency_key for r in page.records if r.idempotency_key})
    timeline, timeline_start = selectors.group_timeline(group=group)
    draft = draft_take(request, key=group_draft_key(group.pk)) if not is_partial(request) else None
    draft_form = draft.get("form") if draft is not None else None
    action_form = GroupActionForm(draft if draft_form == "act" else None, user=request.user)
    runbooks = selectors.runbooks_for(
        reason=group.reason, tool=group.tool, collection=group.collection
    )
    context = {
        "group": group,
        "tool_badges": tool_badges([(group.collection, group.tool)]).get(
            (group.collection, group.tool), []
        ),
        "info": taxonomy.reason_info(group.reason),
        "stage_info": taxonomy.STAGE_INFO.get(group.stage),
        "lane_info": taxonomy.LANE_INFO.get(group.lane),
        "page": page,
        "timeline": timeline,
        "timeline_start": timeline_start,
        "siblings": selectors.group_siblings(group=group, user=request.user),
        "releases_seen": selectors.group_releases(group=group),
        "known_releases": selectors.collection_releases(collection=group.collection),
        "receipts": selectors.group_related_receipts(group=group, keys=keys, user=request.user),
        # A reconcile_first group asks for a status lookup: the runs waiting for one.
        "waiting_receipts": (
            selectors.group_waiting_receipts(group=group, keys=keys, user=request.user)
            if group.lane == "reconcile_first"
            else []
        ),
        "events": group.events.select_related("actor")[:50],
        "action_form": action_form,
        # Which of the group page's forms was refused ("assign", "mute", ...), to show its
        # errors beside it.
        "refused_action": action_form.data.get("action") if action_form.is_bound else "",
        "runbooks": runbooks,
        "runbook_forms": _runbook_forms(
            group, runbooks, draft if draft_form == "runbook" else None
        ),
        "runbook_history": selectors.runbook_history(
            reason=group.reason, tool=group.tool, collection=group.collection
        ),
        # The person's role in the team that owns the group's collection.
        "can_act": has_collection_perm(
            request.user,
            roles.ACT_ON_GROUP,
            group.collection,
            team_role=getattr(group, "viewer_team_role", None),
        ),
        "query_form": form,
        "back": back,
        "back_url": f"{reverse('triage:home')}?{back}" if back else reverse("triage:home"),
        "last_undoable": _last_group_action(request, group),
    }
    template = "triage/group.html#records" if is_partial(request) else "triage/group.html"
    return render(request, template, context, status=400 if form.errors else 200)


def _runbook_forms(
    group: FailureGroup, runbooks: selectors.Runbooks, draft: QueryDict | None
) -> dict[str, RunbookForm]:
    """The edit forms of the group's reason and tool runbooks, filled with what they say
    (or with what was typed, when saving it was refused)."""
    forms = {}
    subjects = ["reason", "tool"] if group.tool else ["reason"]
    for subject in subjects:
        if draft is not None and draft.get("subject") == subject:
            forms[subject] = RunbookForm(draft)
            forms[subject].is_valid()
            continue
        runbook = runbooks.reason if subject == "reason" else runbooks.tool
        scope = (
            RUNBOOK_SCOPE_EVERY
            if runbook is not None and subject == "tool" and not runbook.collection
            else RUNBOOK_SCOPE_COLLECTION
        )
        if subject == "tool" and not group.collection:
            scope = RUNBOOK_SCOPE_EVERY
        forms[subject] = RunbookForm(
            initial={
                "subject": subject,
                "scope": scope,
                "url": runbook.url if runbook else "",
                "note": runbook.note if runbook else "",
            }
        )
    return forms


def _last_group_action(request: HttpRequest, group: FailureGroup) -> BulkAction | None:
    """This person's last action on this group, while it can still be undone."""
    action_id = request.session.get("last_group_action_id")
    if not action_id:
        return None
    return BulkAction.objects.filter(
        pk=action_id,
        undone_at__isnull=True,
        actor_id=request.user.pk,
        previous__has_key=str(group.pk),
    ).first()


@require_POST
@login_required
@permission_required(roles.ACT_ON_GROUP, raise_exception=True)
def group_act_view(request: HttpRequest, group_id: int) -> HttpResponse:
    group = _group_to_act_on(request, group_id)
    form = GroupActionForm(request.POST, user=request.user)
    back = posted_back(request.POST)
    if form.is_valid() and _assignee_sees(form, [group.collection]):
        data = form.cleaned_data
        action = GroupAction.ASSIGN if data["action"] == UNASSIGN else data["action"]
        options = {
            "group": group,
            "actor": request.user,
            "action": action,
            "note": data["note"] or "",
            "assignee": None if data["action"] == UNASSIGN else data["assignee"],
            "muted_until": data["muted_until"],
            "mute_count": data["mute_count"],
            "resolved_in_release": data["resolved_in_release"],
            "resolved_in_next_release": data["resolved_in_next_release"],
        }
        try:
            if action == GroupAction.NOTE:
                group_act(**options)
            else:
                undoable = group_act_undoable(**options, query=back)
                request.session["last_group_action_id"] = undoable.pk
        except GroupActionError as exc:
            messages.error(request, str(exc))
            draft_keep(request, key=group_draft_key(group.pk), form=form, extra={"form": "act"})
        else:
            messages.success(request, _done_message(data))
    else:
        messages.error(
            request, _("Nothing was changed. %(errors)s") % {"errors": errors_in_words(form)}
        )
        draft_keep(request, key=group_draft_key(group.pk), form=form, extra={"form": "act"})
    return HttpResponseRedirect(group_page_url(group.pk, back))


@require_POST
@login_required
@permission_required(roles.ACT_ON_GROUP, raise_exception=True)
def group_runbook_view(request: HttpRequest, group_id: int) -> HttpResponse:
    """Save the runbook link and note of the group's reason or tool."""
    group = _group_to_act_on(request, group_id)
    form = RunbookForm(request.POST)
    back = posted_back(request.POST)
    if form.is_valid() and form.cleaned_data["subject"] == "tool" and not group.tool:
        form.add_error("subject", _("This group has no tool to keep a runbook for."))
    if not form.is_valid():
        messages.error(
            request,
            _("The runbook was not saved. %(errors)s") % {"errors": errors_in_words(form)},
            extra_tags="in-section",
        )
        draft_keep(request, key=group_draft_key(group.pk), form=form, extra={"form": "runbook"})
        return HttpResponseRedirect(group_page_url(group.pk, back) + "#runbooks")
    data = form.cleaned_data
    every = data["scope"] == RUNBOOK_SCOPE_EVERY or not group.collection
    runbook_set(
        subject=data["subject"],
        reason=group.reason,
        tool=group.tool,
        collection="" if every else group.collection,
        url=data["url"],
        note=data["note"],
        actor=request.user,
    )
    # Shown in the runbook card, where the page lands (#runbooks), not above the fold.
    messages.success(request, _("Runbook saved."), extra_tags="in-section")
    return HttpResponseRedirect(group_page_url(group.pk, back) + "#runbooks")


@require_POST
@login_required
@permission_required(roles.ACT_ON_GROUP, raise_exception=True)
def group_undo_view(request: HttpRequest, group_id: int, action_id: int) -> HttpResponse:
    """Undo one action on one group (kept like a bulk action of one group)."""
    group = _group_to_act_on(request, group_id)
    # Like a bulk undo, any operator may undo it (the button shows to the person who acted).
    action = get_object_or_404(BulkAction, pk=action_id, previous__has_key=str(group.pk))
    _require_undoable(request, action)
    try:
        restored = bulk_action_undo(bulk=action, actor=request.user)
    except GroupActionError as exc:
        messages.error(request, str(exc))
    else:
        if restored:
            label = _action_label(action.action)
            messages.success(request, gettext("Undid %(action)s.") % {"action": label})
        else:
            label = _action_label(action.action)
            messages.error(
                request,
                gettext("Not undone: the group changed after the %(action)s.") % {"action": label},
            )
    request.session.pop("last_group_action_id", None)
    return HttpResponseRedirect(group_page_url(group.pk, action.query))


@require_POST
@login_required
@permission_required(roles.ACT_ON_GROUP, raise_exception=True)
def bulk_act_view(request: HttpRequest) -> HttpResponse:
    """Acts on exactly the groups the posted filter shows, if the count still matches."""
    form = BulkActionForm(request.POST, user=request.user)
    query = request.POST.get("query", "")
    # A row's shortcut acts on that row's groups and comes back to the whole list it left.
    raw_return = request.POST.get("return_query")
    returned = _triage_view(raw_return) if raw_return is not None else None
    back_to = returned if returned is not None else query
    back = f"{reverse('triage:home')}?{back_to}" if back_to else reverse("triage:home")
    if not form.is_valid() or form.cleaned_data["action"] not in BULK_ACTIONS:
        errors = errors_in_words(form) or _("Choose an action for the groups.")
        messages.error(request, _("Nothing was changed. %(errors)s") % {"errors": errors})
        draft_keep(request, key=BULK_DRAFT, form=form)
        return HttpResponseRedirect(back)
    now = timezone.now()
    posted = _query_dict(query)
    filter_form = TriageFilterForm(posted, now=now)
    if not filter_form.is_valid():
        messages.error(
            request, gettext("The filter of these groups is not valid: nothing was changed.")
        )
        return HttpResponseRedirect(reverse("triage:home"))
    if "window" not in posted:
        posted = posted.copy()
        posted["window"] = _first_screen_window(filter_form.filters(), now=now, user=request.user)
        filter_form = TriageFilterForm(posted, now=now)
        filter_form.is_valid()
    window = filter_form.window_range(now=now)
    groups = list(
        selectors.triage_groups_in_window(
            start=window.start,
            end=window.end,
            filters=filter_form.filters(),
            now=now,
            user=request.user,
        )
    )
    chosen = _chosen_rows(request.POST.getlist("rows"))
    chosen_groups = _chosen_groups(request.POST.getlist("groups"))
    if chosen is None or chosen_groups is None:
        messages.error(
            request, gettext("The chosen rows are not rows of this page: nothing was changed.")
        )
        return HttpResponseRedirect(back)
    if chosen:
        # Rows ticked: their groups only, among those the filter shows.
        groups = [group for group in groups if (group.stage, group.reason) in chosen]
    if chosen_groups:
        # A row of the group view (its "a" or "r"): that group, if the filter still shows it.
        groups = [group for group in groups if group.pk in chosen_groups]
    data = form.cleaned_data
    if len(groups) != data["confirm_count"]:
        messages.error(
            request,
            ngettext(
                "The filter now shows %(shown)d group, not %(confirmed)d: nothing was changed. "
                "Check the list and confirm again.",
                "The filter now shows %(shown)d groups, not %(confirmed)d: nothing was changed. "
                "Check the list and confirm again.",
                len(groups),
            )
            % {"shown": len(groups), "confirmed": data["confirm_count"]},
        )
        draft_keep(request, key=BULK_DRAFT, form=form)
        return HttpResponseRedirect(back)
    # Only groups the person sees were read; their role must allow acting in each one's team.
    collections = {group.collection for group in groups}
    require_collection_perm(request.user, roles.ACT_ON_GROUP, collections)
    if not _assignee_sees(form, collections):
        messages.error(
            request, _("Nothing was changed. %(errors)s") % {"errors": errors_in_words(form)}
        )
        draft_keep(request, key=BULK_DRAFT, form=form)
        return HttpResponseRedirect(back)
    try:
        bulk = groups_bulk_act(
            groups=groups,
            actor=request.user,
            action=data["action"],
            query=query,
            note=data["note"] or "",
            assignee=data["assignee"],
            muted_until=data["muted_until"],
            mute_count=data["mute_count"],
        )
    except GroupActionError as exc:
        messages.error(request, str(exc))
        return HttpResponseRedirect(back)
    request.session["last_bulk_id"] = bulk.pk
    request.session[LAST_BULK_VIEW] = back_to
    messages.success(
        request,
        ngettext("%(action)s: %(count)d group.", "%(action)s: %(count)d groups.", bulk.group_count)
        % {"action": capfirst(_action_label(data["action"])), "count": bulk.group_count},
    )
    return HttpResponseRedirect(back)


@require_POST
@login_required
@permission_required(roles.ACT_ON_GROUP, raise_exception=True)
def bulk_undo_view(request: HttpRequest, bulk_id: int) -> HttpResponse:
    bulk = get_object_or_404(BulkAction, pk=bulk_id)
    _require_undoable(request, bulk)
    try:
        restored = bulk_action_undo(bulk=bulk, actor=request.user)
    except GroupActionError as exc:
        messages.error(request, str(exc))
    else:
        skipped = bulk.group_count - restored
        label = _action_label(bulk.action)
        text = ngettext(
            "Undid %(action)s on %(count)d group.",
            "Undid %(action)s on %(count)d groups.",
            restored,
        ) % {"action": label, "count": restored}
        if skipped:
            text += " " + ngettext(
                "(%(skipped)d changed since and was left alone.)",
                "(%(skipped)d changed since and were left alone.)",
                skipped,
            ) % {"skipped": skipped}
        messages.success(request, text)
    request.session.pop("last_bulk_id", None)
    view = request.session.pop(LAST_BULK_VIEW, bulk.query)  # the view it was applied from
    back = f"{reverse('triage:home')}?{view}" if view else reverse("triage:home")
    return HttpResponseRedirect(back)


def _group_to_act_on(request: HttpRequest, group_id: int) -> FailureGroup:
    """The group, if the person sees it (else 404) and their role in the team that owns its
    collection lets them act on groups (else 403)."""
    group = visible_or_404(FailureGroup.objects.all(), user=request.user, pk=group_id)
    require_collection_perm(request.user, roles.ACT_ON_GROUP, [group.collection])
    return group


def _require_undoable(request: HttpRequest, bulk: BulkAction) -> None:
    """An undo puts back every group the action changed: all of them must be groups the
    person sees (else 404, like an action they cannot see) and may act on (else 403)."""
    group_ids = [int(key) for key in bulk.previous if key.isdigit()]
    groups = FailureGroup.objects.filter(pk__in=group_ids)
    every = dict(groups.values_list("pk", "collection"))
    seen = groups.filter(selectors.seen_by(request.user)).values_list("pk", flat=True)
    if set(seen) != set(every):
        raise Http404
    require_collection_perm(request.user, roles.ACT_ON_GROUP, every.values())


def _assignee_sees(form: GroupActionForm, collections: Iterable[str]) -> bool:
    """Whether the person an assignment names sees every collection of the groups given to
    them (always, for other actions); the form gets an error when not."""
    if form.cleaned_data.get("action") != GroupAction.ASSIGN:
        return True
    assignee = form.cleaned_data.get("assignee")
    if assignee is not None and not all(can_see(assignee, name) for name in set(collections)):
        form.add_error(
            "assignee",
            gettext("%(person)s cannot see these groups' collection: assign someone of its team.")
            % {"person": assignee.get_username()},
        )
    return form.is_valid()


# A row's checkbox names its stage and reason ("execute/http_5xx"); a page has far fewer.
_ROW_VALUE = re.compile(r"\A([a-z0-9_]{1,64})/([a-z0-9_]{1,100})\Z")
_MAX_CHOSEN_ROWS = 500


def _chosen_rows(values: list[str]) -> set[tuple[str, str]] | None:
    """The (stage, reason) of each ticked row; None when a value is no row's."""
    if len(values) > _MAX_CHOSEN_ROWS:
        return None
    chosen = set()
    for value in values:
        match = _ROW_VALUE.match(value)
        if match is None:
            return None
        chosen.add((match[1], match[2]))
    return chosen


def _chosen_groups(values: list[str]) -> set[int] | None:
    """The ids of the group view's chosen rows; None when a value is no group's id."""
    if len(values) > _MAX_CHOSEN_ROWS:
        return None
    chosen = set()
    for value in values:
        if not (value.isascii() and value.isdigit()) or len(value) > 18:
            return None
        chosen.add(int(value))
    return chosen


def _triage_view(raw: str) -> str | None:
    """A triage query the triage page accepts ("" is its default view), or None (refused)."""
    try:
        return triage_back_query(raw)
    except ValidationError:
        return None


def _done_message(data: dict[str, Any]) -> str:
    if data["action"] == GroupAction.MUTE and data["muted_until"] is not None:
        return _("Muted until %(moment)s.") % {
            "moment": local_moment(data["muted_until"], weekday=True)
        }
    label = capfirst(_action_label(data["action"]))
    return gettext("%(action)s: done.") % {"action": label}


def _query_dict(query: str) -> QueryDict:
    return QueryDict(query)
