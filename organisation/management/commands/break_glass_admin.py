"""The break-glass admin: the one account that may sign in with a password while local
passwords are off (TRIAGE_LOCAL_LOGIN=0), for the day the identity provider is down.

Running it creates the account (a superuser) or resets its password, and prints a random
password that opens once while passwords are off: each use of the break-glass account takes
a shell on the server. Naming another username moves the role: the previous account loses
its password and its superuser status. docs/sign-in.md tells the whole procedure.
"""

from __future__ import annotations

import secrets
from argparse import ArgumentParser
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.validators import UnicodeUsernameValidator
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from organisation import audit
from organisation.models import BreakGlassAccount, ProviderIdentity

ROLE = "break-glass admin"
BY_COMMAND = "manage.py break_glass_admin"


def break_glass_move(*, username: str) -> tuple[Any, str]:
    """Make ``username`` the break-glass admin with a new random password; returns the
    account and the password (shown once, stored nowhere but as its hash)."""
    try:
        UnicodeUsernameValidator()(username)
    except ValidationError as exc:
        raise CommandError(f"{username!r} is not a username: {' '.join(exc.messages)}") from None
    users = get_user_model()._default_manager
    password = secrets.token_urlsafe(24)
    with transaction.atomic():
        person = users.filter(username=username).first()
        if person is not None and ProviderIdentity.objects.filter(person=person).exists():
            raise CommandError(
                f"{username} signs in with the identity provider: the break-glass admin must be "
                "an account of its own. Name another username."
            )
        if person is None:
            person = users.create_user(username=username)
        person.is_active = person.is_staff = person.is_superuser = True
        person.set_password(password)
        person.save()
        previous = BreakGlassAccount.objects.select_for_update().select_related("person").first()
        if previous is not None and previous.person_id != person.pk:
            former = previous.person
            previous.delete()
            former.is_staff = former.is_superuser = False
            former.set_unusable_password()
            former.save()
            _record("role.removed", former)
        if previous is None or previous.person_id != person.pk:
            BreakGlassAccount.objects.create(person=person)
            _record("role.granted", person)
    # A lockout left from the last emergency would keep the new password out.
    from axes.utils import reset

    reset(username=username)
    return person, password


def _record(action: str, person: Any) -> None:
    name = person.get_username()
    audit.record(None, action, name, detail={"person": name, "role": ROLE, "by": BY_COMMAND})


class Command(BaseCommand):
    help = (
        "Create or reset the break-glass admin (the one password sign-in kept while "
        "TRIAGE_LOCAL_LOGIN=0) and print its one-time password."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("username")

    def handle(self, *args: Any, **options: Any) -> None:
        person, password = break_glass_move(username=options["username"])
        self.stdout.write(f"Break-glass admin: {person.get_username()}")
        self.stdout.write(f"Password: {password}")
        self.stdout.write(
            "While TRIAGE_LOCAL_LOGIN=0 it opens once, at /accounts/login/?break_glass=1 (or "
            "/admin/login/); run this command again for the next time. Store it nowhere."
        )
