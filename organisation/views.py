"""The admins' pages: teams (members, owned collections) and the audit of people's actions."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.utils.translation import gettext
from django.views.decorators.http import require_POST, require_safe

from organisation import selectors, teams
from organisation.access import is_admin
from organisation.audit import ACTIONS
from organisation.forms import AuditQueryForm, CollectionForm, MemberForm, TeamForm
from organisation.models import Membership, OwnedCollection, Team

AUDIT_PAGE_SIZE = 50

View = Callable[..., HttpResponse]


def admin_required(view: View) -> View:
    """Signed in, and an admin (a superuser or a holder of the admin role outside teams):
    a team's own admin manages that team's collections, not who is in which team."""

    @wraps(view)
    @login_required
    def checked(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not is_admin(request.user):
            raise PermissionDenied
        return view(request, *args, **kwargs)

    return checked


# --- teams -----------------------------------------------------------------------------------


def _render_teams(
    request: HttpRequest, *, form: TeamForm | None = None, status: int = 200
) -> HttpResponse:
    context = {"teams": list(selectors.teams_list()), "form": form or TeamForm()}
    return render(request, "organisation/teams.html", context, status=status)


@require_safe
@admin_required
def teams_page(request: HttpRequest) -> HttpResponse:
    return _render_teams(request)


@require_POST
@admin_required
def team_create_view(request: HttpRequest) -> HttpResponse:
    form = TeamForm(request.POST)
    if form.is_valid():
        try:
            team = teams.team_create(name=form.cleaned_data["name"], actor=request.user)
        except teams.TeamError as exc:
            form.add_error(exc.field or None, exc.message)
        else:
            messages.success(request, gettext("Created the team %(name)s.") % {"name": team.name})
            return HttpResponseRedirect(reverse("organisation:team", args=[team.pk]))
    return _render_teams(request, form=form, status=400)


def _team(team_id: int) -> Team:
    team = selectors.team_detail(team_id=team_id)
    if team is None:
        raise Http404
    return team


def _render_team(
    request: HttpRequest,
    team: Team,
    *,
    status: int = 200,
    error: str = "",
    **forms: Any,
) -> HttpResponse:
    context = {
        "team": team,
        "memberships": list(team.memberships.all()),
        "owned": list(team.collections.all()),
        "rename_form": forms.get("rename_form") or TeamForm(initial={"name": team.name}),
        "member_form": forms.get("member_form") or MemberForm(),
        "collection_form": forms.get("collection_form") or CollectionForm(),
        "error": error,
    }
    return render(request, "organisation/team.html", context, status=status)


@require_safe
@admin_required
def team_page(request: HttpRequest, team_id: int) -> HttpResponse:
    return _render_team(request, _team(team_id))


def _back(team: Team) -> HttpResponse:
    return HttpResponseRedirect(reverse("organisation:team", args=[team.pk]))


@require_POST
@admin_required
def team_rename_view(request: HttpRequest, team_id: int) -> HttpResponse:
    team = _team(team_id)
    form = TeamForm(request.POST)
    if form.is_valid():
        try:
            teams.team_rename(team=team, name=form.cleaned_data["name"], actor=request.user)
        except teams.TeamError as exc:
            form.add_error(exc.field or None, exc.message)
        else:
            return _back(team)
    return _render_team(request, _team(team_id), rename_form=form, status=400)


@require_POST
@admin_required
def team_delete_view(request: HttpRequest, team_id: int) -> HttpResponse:
    team = _team(team_id)
    try:
        teams.team_delete(team=team, actor=request.user)
    except teams.TeamError as exc:
        return _render_team(request, team, error=exc.message, status=400)
    messages.success(request, gettext("Deleted the team %(name)s.") % {"name": team.name})
    return HttpResponseRedirect(reverse("organisation:teams"))


@require_POST
@admin_required
def member_set_view(request: HttpRequest, team_id: int) -> HttpResponse:
    team = _team(team_id)
    form = MemberForm(request.POST)
    if form.is_valid():
        try:
            teams.member_set(
                team=team,
                person=form.cleaned_data["username"],
                role=form.cleaned_data["role"],
                actor=request.user,
            )
        except teams.TeamError as exc:
            form.add_error(exc.field or None, exc.message)
        else:
            return _back(team)
    return _render_team(request, team, member_form=form, status=400)


@require_POST
@admin_required
def member_remove_view(request: HttpRequest, team_id: int, membership_id: int) -> HttpResponse:
    team = _team(team_id)
    membership = get_object_or_404(
        Membership.objects.select_related("person", "team"), pk=membership_id, team=team
    )
    try:
        teams.member_remove(membership=membership, actor=request.user)
    except teams.TeamError as exc:
        return _render_team(request, team, error=exc.message, status=400)
    return _back(team)


@require_POST
@admin_required
def collection_give_view(request: HttpRequest, team_id: int) -> HttpResponse:
    team = _team(team_id)
    form = CollectionForm(request.POST)
    if form.is_valid():
        try:
            teams.collection_give(
                team=team, collection=form.cleaned_data["collection"], actor=request.user
            )
        except teams.TeamError as exc:
            form.add_error(exc.field or None, exc.message)
        else:
            return _back(team)
    return _render_team(request, team, collection_form=form, status=400)


@require_POST
@admin_required
def collection_take_view(request: HttpRequest, team_id: int, owned_id: int) -> HttpResponse:
    team = _team(team_id)
    owned = get_object_or_404(
        OwnedCollection.objects.select_related("team"), pk=owned_id, team=team
    )
    teams.collection_take(owned=owned, actor=request.user)
    return _back(team)


# --- audit -----------------------------------------------------------------------------------


@require_safe
@admin_required
def audit_page(request: HttpRequest) -> HttpResponse:
    form = AuditQueryForm(request.GET)
    valid = form.cleaned_data if form.is_valid() else {}
    entries = selectors.audit_entries(
        person=valid.get("person") or "",
        action=valid.get("action") or "",
        since=valid.get("since"),
        until=valid.get("until"),
    )
    page = Paginator(entries, AUDIT_PAGE_SIZE).get_page(valid.get("page") or 1)
    # The filters without the page number: the pager's links add theirs.
    filters = urlencode(
        [(name, value) for name, value in request.GET.items() if name != "page" and value]
    )
    context = {
        "form": form,
        "page": page,
        "rows": [(entry, ACTIONS.get(entry.action, entry.action)) for entry in page],
        "filters": filters,
    }
    return render(request, "organisation/audit.html", context, status=400 if form.errors else 200)
