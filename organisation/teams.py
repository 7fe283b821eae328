"""Writes of the teams page: teams, their members and the collections they own. Each change
is audited in its own transaction (organisation.audit)."""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import ProtectedError
from django.utils.translation import gettext

from organisation import audit
from organisation.models import Membership, MembershipSource, OwnedCollection, Team
from organisation.roles import ROLES


class TeamError(ValueError):
    """A change the teams page refuses; ``field`` names the form field at fault ("" for the
    form as a whole)."""

    def __init__(self, message: str, *, field: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.field = field


def team_create(*, name: str, actor: Any) -> Team:
    if Team.objects.filter(name=name).exists():
        raise TeamError(
            gettext("A team named %(name)s exists already.") % {"name": name}, field="name"
        )
    with transaction.atomic():
        team = Team.objects.create(name=name)
        audit.record(actor, "team.created", f"team {team.name}")
    return team


def team_rename(*, team: Team, name: str, actor: Any) -> Team:
    if name == team.name:
        return team
    if Team.objects.filter(name=name).exclude(pk=team.pk).exists():
        raise TeamError(
            gettext("A team named %(name)s exists already.") % {"name": name}, field="name"
        )
    before = team.name
    with transaction.atomic():
        team.name = name
        team.save(update_fields=["name"])
        audit.record(
            actor, "team.renamed", f"team {name}", detail={"before": before, "after": name}
        )
    return team


def team_delete(*, team: Team, actor: Any) -> None:
    """Delete a team, its memberships and what it owns (the collections become unowned).
    Refused while an API key is scoped to it: the key would serve every collection."""
    members = list(team.memberships.values_list("person__username", flat=True))
    collections = list(team.collections.values_list("collection", flat=True))
    try:
        with transaction.atomic():
            audit.record(
                actor,
                "team.deleted",
                f"team {team.name}",
                detail={"members": members, "collections": collections},
            )
            team.delete()
    except ProtectedError as exc:
        keys = sorted(str(key) for key in exc.protected_objects)
        raise TeamError(
            gettext(
                "API keys are scoped to %(team)s: %(keys)s. Change their scope on the "
                "ingestion page first, or they would serve every collection."
            )
            % {"team": team.name, "keys": ", ".join(keys)}
        ) from None


def member_set(*, team: Team, person: Any, role: str, actor: Any) -> Membership:
    """Add ``person`` to ``team`` with ``role``, or change their role there. Memberships the
    identity provider made are its own: the next sign-in would undo a change made here."""
    if role not in ROLES:
        raise TeamError(gettext("Choose one of the roles."), field="role")
    with transaction.atomic():
        membership = Membership.objects.select_for_update().filter(team=team, person=person).first()
        if membership is None:
            try:
                with transaction.atomic():
                    membership = Membership.objects.create(team=team, person=person, role=role)
            except IntegrityError:  # added by a concurrent request
                raise TeamError(
                    gettext("%(person)s was just added to this team by someone else.")
                    % {"person": person.get_username()}
                ) from None
            audit.record(
                actor,
                "team.member_added",
                f"team {team.name}",
                detail={"person": person.get_username(), "role": role},
            )
            return membership
        _refuse_provider(membership)
        if membership.role != role:
            before = membership.role
            membership.role = role
            membership.save(update_fields=["role"])
            audit.record(
                actor,
                "team.member_changed",
                f"team {team.name}",
                detail={"person": person.get_username(), "before": before, "after": role},
            )
    return membership


def member_remove(*, membership: Membership, actor: Any) -> None:
    _refuse_provider(membership)
    with transaction.atomic():
        audit.record(
            actor,
            "team.member_removed",
            f"team {membership.team.name}",
            detail={"person": membership.person.get_username(), "role": membership.role},
        )
        membership.delete()


def _refuse_provider(membership: Membership) -> None:
    if membership.source == MembershipSource.PROVIDER:
        raise TeamError(
            gettext(
                "%(person)s is in this team through the identity provider's groups: change "
                "it there; sign-in applies it."
            )
            % {"person": membership.person.get_username()}
        )


def collection_give(*, team: Team, collection: str, actor: Any) -> OwnedCollection:
    """Give ``team`` a collection name. A name has at most one owner: one another team owns
    is refused, naming that team."""
    with transaction.atomic():
        owned = OwnedCollection.objects.select_related("team").filter(collection=collection).first()
        if owned is not None:
            if owned.team_id == team.pk:
                return owned
            raise TeamError(
                gettext("%(collection)s is owned by the team %(team)s; take it from them first.")
                % {"collection": collection, "team": owned.team.name},
                field="collection",
            )
        try:
            with transaction.atomic():
                owned = OwnedCollection.objects.create(team=team, collection=collection)
        except IntegrityError:  # given to another team by a concurrent request
            raise TeamError(
                gettext("%(collection)s was just given to another team.")
                % {"collection": collection},
                field="collection",
            ) from None
        audit.record(actor, "team.collection_added", f"team {team.name}", collection=collection)
    return owned


def collection_take(*, owned: OwnedCollection, actor: Any) -> None:
    with transaction.atomic():
        audit.record(
            actor,
            "team.collection_removed",
            f"team {owned.team.name}",
            collection=owned.collection,
        )
        owned.delete()
