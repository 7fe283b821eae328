"""Who may see and do what, by team: the one place every page, API answer, export, alert and
Quality Lab action asks.

The rules:
- While no team exists the desk is one team: everyone sees every collection, and the roles
  people hold (Django groups: viewer, operator, reviewer, admin) apply everywhere.
- Once a team exists, a person sees the collections their teams own. A collection no team
  owns (and records with no collection) are seen by admins and by the members of the team
  named in ``TRIAGE_UNOWNED_COLLECTIONS_TEAM``.
- Admins (superusers and holders of the admin role) see everything.
- A person's role in a team applies to that team's collections (``has_collection_perm``); the
  role they hold outside any team (their Django groups) applies to every collection they see.
- An API key with no scope serves every collection; a key scoped to collections or to a
  team serves those only, for ingest and for reads alike.

``visible_q`` is a filter, not a list: it adds subqueries to the page's own statement, so a
page that was one query stays one query.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db.models import Exists, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce

from organisation.models import Membership, OwnedCollection, Team
from organisation.roles import team_role_permissions, user_roles


def is_admin(user: Any) -> bool:
    """Sees every collection: a superuser or a holder of the admin role."""
    if not getattr(user, "is_authenticated", False) or not getattr(user, "is_active", False):
        return False
    return bool(user.is_superuser) or "admin" in user_roles(user)


def api_key_of(user: Any) -> Any:
    """The API key behind an API request's principal (triage.intake.auth), or None."""
    return getattr(user, "api_key", None)


def key_is_scoped(api_key: Any) -> bool:
    return bool(api_key.collections) or api_key.team_id is not None


def key_q(api_key: Any, field: str = "collection") -> Q:
    """The collections a key serves, as a filter on ``field``."""
    if not key_is_scoped(api_key):
        return Q()
    allowed = Q(**{f"{field}__in": list(api_key.collections)})
    if api_key.team_id is not None:
        allowed |= Q(
            **{
                f"{field}__in": OwnedCollection.objects.filter(team_id=api_key.team_id).values(
                    "collection"
                )
            }
        )
    return allowed


def key_collections(api_key: Any) -> frozenset[str] | None:
    """The names a key may send (one query for a team-scoped key), or None for every name."""
    if not key_is_scoped(api_key):
        return None
    names = set(api_key.collections)
    if api_key.team_id is not None:
        names.update(
            OwnedCollection.objects.filter(team_id=api_key.team_id).values_list(
                "collection", flat=True
            )
        )
    return frozenset(names)


def _unowned_team() -> str:
    return str(getattr(settings, "TRIAGE_UNOWNED_COLLECTIONS_TEAM", "") or "")


def visible_q(user: Any, field: str = "collection") -> Q:
    """A filter on ``field`` (a collection name column, or a path to one such as
    ``collection__name``) that keeps what ``user`` may see. No query runs here."""
    api_key = api_key_of(user)
    if api_key is not None:
        return key_q(api_key, field)
    if not getattr(user, "is_authenticated", False) or not getattr(user, "is_active", False):
        return Q(pk__in=[])
    if is_admin(user):
        return Q()
    person = user.pk
    own = Q(
        **{
            f"{field}__in": OwnedCollection.objects.filter(
                team__memberships__person_id=person
            ).values("collection")
        }
    )
    visible = ~Q(Exists(Team.objects.all())) | own
    unowned_team = _unowned_team()
    if unowned_team:
        visible |= ~Q(**{f"{field}__in": OwnedCollection.objects.values("collection")}) & Q(
            Exists(Membership.objects.filter(person_id=person, team__name=unowned_team))
        )
    return visible


def seen_by(user: Any, field: str = "collection") -> Q:
    """``visible_q``, where ``None`` is the desk reading for itself (alerts, tasks,
    commands): every collection."""
    return Q() if user is None else visible_q(user, field)


def visible(queryset: QuerySet[Any], user: Any, field: str = "collection") -> QuerySet[Any]:
    return queryset.filter(visible_q(user, field))


def can_see(user: Any, collection: str) -> bool:
    """Whether ``user`` may see ``collection`` (at most two small queries; none for an admin
    or an unscoped key)."""
    api_key = api_key_of(user)
    if api_key is not None:
        names = key_collections(api_key)
        return names is None or collection in names
    if not getattr(user, "is_authenticated", False) or not getattr(user, "is_active", False):
        return False
    if is_admin(user) or not Team.objects.exists():
        return True
    memberships = Membership.objects.filter(person_id=user.pk)
    owners = OwnedCollection.objects.filter(collection=collection)
    owner_id = owners.values_list("team_id", flat=True).first()
    if owner_id is not None:
        return memberships.filter(team_id=owner_id).exists()
    unowned_team = _unowned_team()
    return bool(unowned_team) and memberships.filter(team__name=unowned_team).exists()


def team_roles_for(user: Any, collection: str) -> list[str]:
    """The roles ``user`` holds in the team that owns ``collection`` (or in the unowned
    collections' team when no team owns it)."""
    owner = OwnedCollection.objects.filter(collection=collection).values("team_id")
    memberships = Membership.objects.filter(person_id=user.pk)
    unowned_team = _unowned_team()
    if unowned_team:
        memberships = memberships.filter(
            Q(team_id__in=owner)
            | (
                Q(team__name=unowned_team)
                & ~Exists(OwnedCollection.objects.filter(collection=collection))
            )
        )
    else:
        memberships = memberships.filter(team_id__in=owner)
    return list(memberships.values_list("role", flat=True))


# Said by a row read with ``team_role_column``: the role is already known, maybe as None.
_NOT_READ = object()


def team_role_column(user: Any, field: str = "collection") -> Any:
    """The role ``user`` holds in the team that owns the row's collection (or in the
    unowned collections' team when no team owns it), None when none: an expression to
    annotate a row with, so that the page that shows the row knows what the person may do
    to it without another query (``has_collection_perm(..., team_role=row.attr)``)."""
    person = getattr(user, "pk", None)
    owner_role = Subquery(
        Membership.objects.filter(
            person_id=person, team__collections__collection=OuterRef(field)
        ).values("role")[:1]
    )
    unowned_team = _unowned_team()
    if not unowned_team:
        return owner_role
    unowned_role = Subquery(
        Membership.objects.filter(person_id=person, team__name=unowned_team)
        .exclude(Exists(OwnedCollection.objects.filter(collection=OuterRef(OuterRef(field)))))
        .values("role")[:1]
    )
    return Coalesce(owner_role, unowned_role)


def has_collection_perm(
    user: Any, perm: str, collection: str, *, team_role: Any = _NOT_READ
) -> bool:
    """Whether ``user`` may do ``perm`` ("triage.act_on_group") on ``collection``'s things:
    their role outside teams grants it everywhere they see, their role in the owning team
    grants it on that team's collections. Call it after the thing was found through
    ``visible`` (so an unseen thing is a 404 first). ``team_role``: the role read with the
    row (``team_role_column``), so no query runs here."""
    if not getattr(user, "is_active", False) or not getattr(user, "is_authenticated", False):
        return False
    if user.is_superuser:
        return True
    if perm in global_perms(user):
        return True
    if team_role is not _NOT_READ:
        return team_role is not None and perm in team_role_permissions(team_role)
    return any(perm in team_role_permissions(role) for role in team_roles_for(user, collection))


def global_perms(user: Any) -> set[str]:
    """The permissions of the roles a person holds outside teams (their Django groups)."""
    if getattr(user, "_global_perm_cache", None) is None:
        user.get_all_permissions()  # fills the caches (triage.language.PreferenceModelBackend)
    held: set[str] = getattr(user, "_global_perm_cache", None) or set()
    return set(held)
