"""The teams page's forms and the audit page's filters."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib.auth import get_user_model
from django.utils.translation import gettext, gettext_lazy

from core.collection_names import COLLECTION_NAME_MAX_LENGTH
from core.fields import validate_collection_name
from organisation.audit import ACTIONS
from organisation.models import ROLE_CHOICES


class TeamForm(forms.Form):
    name = forms.CharField(label=gettext_lazy("Name"), max_length=100, strip=True)


class MemberForm(forms.Form):
    """A person who exists (the page never makes accounts) and their role in the team."""

    username = forms.CharField(label=gettext_lazy("Person"), max_length=150, strip=True)
    role = forms.ChoiceField(label=gettext_lazy("Role"), choices=ROLE_CHOICES)

    def clean_username(self) -> Any:
        username = self.cleaned_data["username"]
        person = get_user_model()._default_manager.filter(username=username).first()
        if person is None:
            raise forms.ValidationError(
                gettext(
                    "Nobody is called %(name)s here: an account exists once its person has "
                    "signed in, or an admin made it."
                )
                % {"name": username},
                code="unknown_person",
            )
        return person


class CollectionForm(forms.Form):
    collection = forms.CharField(
        label=gettext_lazy("Collection"),
        max_length=COLLECTION_NAME_MAX_LENGTH,
        strip=False,  # the one rule refuses spaces at either end rather than hiding them
        validators=[validate_collection_name],
    )


class AuditQueryForm(forms.Form):
    """The audit page's filters, all in its URL so a filtered view can be shared."""

    person = forms.CharField(label=gettext_lazy("Person"), max_length=150, required=False)
    action = forms.ChoiceField(
        label=gettext_lazy("Action"),
        required=False,
        choices=[("", gettext_lazy("any action")), *ACTIONS.items()],
    )
    since = forms.DateField(label=gettext_lazy("From"), required=False)
    until = forms.DateField(label=gettext_lazy("Until"), required=False)
    page = forms.IntegerField(required=False, min_value=1, max_value=1_000_000)

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        since, until = data.get("since"), data.get("until")
        if since and until and until < since:
            self.add_error("until", gettext("The end comes before the start."))
        return data
