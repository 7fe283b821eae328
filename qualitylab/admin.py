"""Quality Lab in Django's admin: collections, to rename one whose name needs mending.

Collections are created on the Quality Lab page, by the command line or by a runtime's
first record, and their settings are edited on the Quality Lab page (which checks them):
here they are read, and renamed with every row that names them.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.db.models import QuerySet
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.utils.translation import gettext, gettext_lazy

from core.collection_names import COLLECTION_NAME_MAX_LENGTH
from core.fields import validate_collection_name
from qualitylab import services
from qualitylab.models import Collection


class CollectionRenameForm(forms.Form):
    new_name = forms.CharField(
        max_length=COLLECTION_NAME_MAX_LENGTH,
        validators=[validate_collection_name],
        label=gettext_lazy("New name"),
        help_text=gettext_lazy(
            "Failure records, receipts, tool policies, cases, runs and learning follow. "
            "Runtimes must send the new name from now on."
        ),
    )


@admin.register(Collection)
class CollectionAdmin(admin.ModelAdmin):
    list_display = ["name", "title", "learning_mode", "mutations_allowed", "created_at"]
    search_fields = ["name", "title"]
    actions = ["rename_collection"]
    readonly_fields = ("name", "title", "base_url", "allowed_hosts", "learning_mode",
                       "learning_allowed", "mutations_allowed", "created_at")  # fmt: skip
    fields = readonly_fields

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.action(
        description=gettext_lazy("Rename the selected collection"), permissions=["change"]
    )
    def rename_collection(
        self, request: HttpRequest, queryset: QuerySet[Collection]
    ) -> TemplateResponse | None:
        collections = list(queryset[:2])
        if len(collections) != 1:
            self.message_user(
                request, gettext("Choose exactly one collection to rename."), messages.WARNING
            )
            return None
        collection = collections[0]
        form = CollectionRenameForm(request.POST if "apply" in request.POST else None)
        if form.is_bound and form.is_valid():
            old_name = collection.name
            try:
                changed = services.collection_rename(
                    collection=collection, new_name=form.cleaned_data["new_name"]
                )
            except services.CollectionError as exc:
                form.add_error("new_name", str(exc))
            else:
                self.message_user(
                    request,
                    gettext(
                        "Renamed %(old)r to %(new)r; %(changed)d records, groups, receipts and "
                        "policies named it."
                    )
                    % {"old": old_name, "new": collection.name, "changed": changed},
                    messages.SUCCESS,
                )
                return None
        context = {
            **self.admin_site.each_context(request),
            "title": gettext("Rename a collection"),
            "opts": self.model._meta,
            "collection": collection,
            "form": form,
            "action_checkbox_name": ACTION_CHECKBOX_NAME,
        }
        status = 400 if form.errors else 200
        return TemplateResponse(
            request, "admin/qualitylab/collection/rename.html", context, status=status
        )
