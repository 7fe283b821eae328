"""The person's own settings: the time zone every page shows times in."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required, permission_required
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods

from triage.forms import TimeZonePreferenceForm
from triage.models import PersonPreference
from triage.services import person_time_zone_set
from triage.timezones import COOKIE, SESSION_KEY, zone_named

# Every role reads the pages; a person without one sees nothing, their settings included.
ANY_ROLE = "triage.view_failuregroup"


@require_http_methods(["GET", "HEAD", "POST"])
@login_required
@permission_required(ANY_ROLE, raise_exception=True)
def preferences_page(request: HttpRequest) -> HttpResponse:
    preference = PersonPreference.for_user(request.user)
    if request.method == "POST":
        form = TimeZonePreferenceForm(request.POST)
        if form.is_valid():
            chosen = form.cleaned_data["time_zone"]
            person_time_zone_set(user=request.user, time_zone=chosen)
            request.session[SESSION_KEY] = chosen
            if chosen:
                messages.success(request, _("Times are now shown in %(zone)s.") % {"zone": chosen})
            else:
                messages.success(request, _("Times now follow your browser's time zone."))
            return HttpResponseRedirect(reverse("triage:preferences"))
    else:
        form = TimeZonePreferenceForm(
            initial={"time_zone": preference.time_zone if preference else ""}
        )
    browser = request.COOKIES.get(COOKIE, "")
    context = {
        "form": form,
        "browser_zone": browser if zone_named(browser) else "",
        "now": timezone.now(),
    }
    return render(request, "triage/preferences.html", context, status=400 if form.errors else 200)


urlpatterns: list[URLPattern] = [
    path("preferences/", preferences_page, name="preferences"),
]
