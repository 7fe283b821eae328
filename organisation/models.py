"""Teams, their members (a role per team), the collections they own, and the audit of
people's actions."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy

from core.collection_names import COLLECTION_NAME_MAX_LENGTH
from core.fields import validate_collection_name
from organisation.roles import ROLE_LABELS, ROLES

ROLE_CHOICES = [(role, ROLE_LABELS[role]) for role in ROLES]


class Team(models.Model):
    """A team (checkout, search, payments): it owns collections and has members."""

    name = models.CharField(gettext_lazy("name"), max_length=100, unique=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class MembershipSource(models.TextChoices):
    # Made by an admin on the teams page or by a command; sign-in never touches it.
    LOCAL = "local", gettext_lazy("local")
    # Made from the identity provider's groups at sign-in, and removed at the next sign-in
    # when the provider no longer names it (organisation.access is not involved: config.oidc).
    PROVIDER = "provider", gettext_lazy("identity provider")


class Membership(models.Model):
    """One person in one team, with the role they hold in that team's collections."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memberships")
    person = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="team_memberships"
    )
    role = models.CharField(gettext_lazy("role"), max_length=16, choices=ROLE_CHOICES)
    source = models.CharField(
        max_length=16, choices=MembershipSource.choices, default=MembershipSource.LOCAL
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["team__name", "person__username"]
        constraints = [models.UniqueConstraint(fields=["team", "person"], name="membership_unique")]

    def __str__(self) -> str:
        return f"{self.person_id} in {self.team_id} as {self.role}"


class OwnedCollection(models.Model):
    """A collection name a team owns. A name belongs to at most one team; records, groups,
    receipts, Quality Lab collections and learning attempts of that name are the team's."""

    collection = models.CharField(
        gettext_lazy("collection"),
        max_length=COLLECTION_NAME_MAX_LENGTH,
        unique=True,
        validators=[validate_collection_name],
    )
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="collections")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["collection"]

    def __str__(self) -> str:
        return f"{self.collection} ({self.team_id})"


class ActivityEntry(models.Model):
    """One thing a person did that an admin may need to account for later: a role, team or
    key changed, a group muted or resolved, a suggestion reviewed, an alert rule edited.

    Retention never prunes it. The actor's name is copied, so an entry outlives its account.
    """

    at = models.DateTimeField(default=timezone.now, db_index=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    actor_name = models.CharField(max_length=150, blank=True)
    # A dotted code from organisation.audit.ACTIONS ("team.member_added", "group.muted").
    action = models.CharField(max_length=64, db_index=True)
    # What it was done to, as a person reads it ("group 42", "key checkout-runtime").
    subject = models.CharField(max_length=300, blank=True)
    collection = models.CharField(max_length=COLLECTION_NAME_MAX_LENGTH, blank=True)
    detail = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["actor", "-at"], name="activity_actor_at")]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M} {self.actor_name} {self.action} {self.subject}"


class ProviderIdentity(models.Model):
    """The identity provider's account a person signs in with (config/oidc.py): its issuer and
    subject, which stay when the provider renames the person or changes their email."""

    person = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="provider_identities"
    )
    issuer = models.CharField(max_length=300)
    subject = models.CharField(max_length=255)
    created_at = models.DateTimeField(default=timezone.now)
    last_sign_in_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["issuer", "subject"], name="provider_identity_unique")
        ]

    def __str__(self) -> str:
        return f"{self.subject} at {self.issuer}"


class BreakGlassAccount(models.Model):
    """The one local account that may still sign in with a password while local passwords are
    turned off (TRIAGE_LOCAL_LOGIN=0); `manage.py break_glass_admin` sets it."""

    # One row at most: the slot is always 1 and unique.
    slot = models.PositiveSmallIntegerField(default=1, unique=True, editable=False)
    person = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="break_glass"
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.CheckConstraint(condition=models.Q(slot=1), name="break_glass_single_slot")
        ]

    def __str__(self) -> str:
        return f"break glass: {self.person_id}"
