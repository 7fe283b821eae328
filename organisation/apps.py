from __future__ import annotations

from django.apps import AppConfig


class OrganisationConfig(AppConfig):
    name = "organisation"
    verbose_name = "Organisation"

    def ready(self) -> None:
        from django.contrib.auth import get_user_model
        from django.db.models.signals import m2m_changed

        from organisation.signals import groups_changed

        m2m_changed.connect(
            groups_changed,
            sender=get_user_model().groups.through,
            dispatch_uid="organisation.audit_roles",
        )
