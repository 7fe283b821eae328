from __future__ import annotations

import pytest
from django.contrib.auth.models import Group

from triage.roles import ROLE_PERMISSIONS, ROLES

pytestmark = pytest.mark.django_db


def test_the_migration_made_every_role_with_exactly_its_permissions() -> None:
    assert set(Group.objects.values_list("name", flat=True)) >= set(ROLES)
    for role, codenames in ROLE_PERMISSIONS.items():
        granted = set(Group.objects.get(name=role).permissions.values_list("codename", flat=True))
        assert granted == set(codenames), role
