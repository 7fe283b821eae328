from __future__ import annotations

import pytest
from django.contrib.auth.models import Group

from organisation.roles import ROLE_PERMISSIONS, ROLES

pytestmark = pytest.mark.django_db


def test_the_migration_made_every_role_with_exactly_its_permissions() -> None:
    assert set(Group.objects.values_list("name", flat=True)) >= set(ROLES)
    for role, codenames in ROLE_PERMISSIONS.items():
        granted = {
            f"{app}.{codename}"
            for app, codename in Group.objects.get(name=role).permissions.values_list(
                "content_type__app_label", "codename"
            )
        }
        assert granted == set(codenames), role
