"""The alerts page: rules with their last delivery, channels, the delivery log; forms to
edit rules (operators, admins) and channels (webhook and Slack-compatible ones: operators and
admins; email ones: admins), and "send a test" per channel.

Teams (alerts.selectors says whose a rule is): a person sees and edits the rules of their
collections; another team's rule is not found (404), one they may not change refused (403).
Channels are shared by every team's rules, so only a role held outside teams manages them (a
role in a team grants no channel permission: organisation.roles.NOT_FROM_TEAMS)."""

from __future__ import annotations

import functools
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required, permission_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.utils.cache import add_never_cache_headers
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods, require_POST, require_safe

from alerts import selectors, services
from alerts.forms import ChannelEditForm, ChannelForm, LogQueryForm, RuleForm
from alerts.models import Channel, Rule
from core.http import is_partial
from organisation import roles
from organisation.access import has_collection_perm

PAGE = "alerts/alerts.html"
RULE_PAGE = "alerts/rule_form.html"
CHANNEL_PAGE = "alerts/channel_form.html"


def _page(
    request: HttpRequest,
    *,
    rule_form: RuleForm | None = None,
    channel_form: ChannelForm | None = None,
    new_secret: str = "",
    new_channel: Channel | None = None,
    status: int = 200,
) -> HttpResponse:
    query = LogQueryForm(request.GET)
    found = query.cleaned_data if query.is_valid() else {}
    if query.errors:
        status = 400
    user = request.user
    overview = selectors.alerts_overview(
        user=user, rule_id=found.get("rule"), before=found.get("before"), after=found.get("after")
    )
    can_edit_rules = user.has_perm(roles.CHANGE_ALERT_RULES)
    may_edit = functools.cache(
        functools.partial(has_collection_perm, user, roles.CHANGE_ALERT_RULES)
    )
    for rule in overview.rules:
        rule.editable = can_edit_rules and may_edit(rule.collection)  # type: ignore[attr-defined]
    context: dict[str, Any] = {
        "overview": overview,
        "query_form": query,
        "log_rule_id": found.get("rule"),
        "can_edit_rules": can_edit_rules,
        "can_edit_channels": user.has_perm(roles.CHANGE_ALERT_CHANNELS),
        "can_edit_webhooks": user.has_perm(roles.MANAGE_WEBHOOK_CHANNELS),
        "rule_form": rule_form or RuleForm(user=user),
        "channel_form": channel_form or _channel_form(request, data=None),
        "new_secret": new_secret,
        "new_channel": new_channel,
    }
    template = f"{PAGE}#delivery-log" if is_partial(request) else PAGE
    return render(request, template, context, status=status)


def _channel_form(request: HttpRequest, *, data: Any) -> ChannelForm:
    return ChannelForm(data, email_allowed=request.user.has_perm(roles.CHANGE_ALERT_CHANNELS))


def _may_manage(user: Any, channel: Channel) -> bool:
    """Admins manage every channel; operators webhook and Slack-compatible ones only."""
    if user.has_perm(roles.CHANGE_ALERT_CHANNELS):
        return True
    return channel.is_webhook and user.has_perm(roles.MANAGE_WEBHOOK_CHANNELS)


def _rule(request: HttpRequest, rule_id: int) -> Rule:
    """A rule the person sees (else 404) and may change (else 403)."""
    rule = get_object_or_404(selectors.visible_rules(user=request.user), pk=rule_id)
    if not has_collection_perm(request.user, roles.CHANGE_ALERT_RULES, rule.collection):
        raise PermissionDenied
    return rule


def _managed_channel(request: HttpRequest, channel_id: int) -> Channel:
    channel = get_object_or_404(Channel, pk=channel_id)
    if not _may_manage(request.user, channel):
        raise PermissionDenied
    return channel


@require_safe
@login_required
@permission_required(roles.VIEW_ALERTS, raise_exception=True)
def alerts_page(request: HttpRequest) -> HttpResponse:
    return _page(request)


def _home() -> HttpResponseRedirect:
    return HttpResponseRedirect(reverse("alerts:home"))


def _rule_fields(form: RuleForm) -> dict[str, Any]:
    data = dict(form.cleaned_data)
    data.pop("name", None)
    data.pop("channels", None)
    return {name: data[name] for name in services.RULE_FIELDS if name in data}


def _form_errors(form: Any, exc: ValidationError) -> None:
    for field, errors in exc.message_dict.items():
        form.add_error(field if field in form.fields else None, errors)


@require_POST
@login_required
@permission_required(roles.CHANGE_ALERT_RULES, raise_exception=True)
def rule_create_view(request: HttpRequest) -> HttpResponse:
    form = RuleForm(request.POST, user=request.user)
    if form.is_valid():
        try:
            rule = services.rule_create(
                name=form.cleaned_data["name"],
                channels=list(form.cleaned_data["channels"]),
                user=request.user,
                **_rule_fields(form),
            )
        except ValidationError as exc:
            _form_errors(form, exc)
        else:
            messages.success(request, _("Rule %(name)s created.") % {"name": rule.name})
            return _home()
    return _page(request, rule_form=form, status=400)


@require_http_methods(["GET", "POST"])
@login_required
@permission_required(roles.CHANGE_ALERT_RULES, raise_exception=True)
def rule_edit_view(request: HttpRequest, rule_id: int) -> HttpResponse:
    rule = _rule(request, rule_id)
    if request.method == "GET":
        form = RuleForm(instance=rule, user=request.user)
        return render(request, RULE_PAGE, {"rule": rule, "form": form})
    form = RuleForm(request.POST, instance=Rule.objects.get(pk=rule.pk), user=request.user)
    if form.is_valid():
        try:
            rule.name = form.cleaned_data["name"]
            services.rule_update(
                rule=rule, channels=list(form.cleaned_data["channels"]), **_rule_fields(form)
            )
        except ValidationError as exc:
            _form_errors(form, exc)
        else:
            messages.success(request, _("Rule %(name)s saved.") % {"name": rule.name})
            return _home()
    return render(request, RULE_PAGE, {"rule": rule, "form": form}, status=400)


@require_POST
@login_required
@permission_required(roles.CHANGE_ALERT_RULES, raise_exception=True)
def rule_delete_view(request: HttpRequest, rule_id: int) -> HttpResponse:
    rule = _rule(request, rule_id)
    services.rule_delete(rule=rule)
    messages.success(request, _("Rule %(name)s deleted.") % {"name": rule.name})
    return _home()


@require_POST
@login_required
@permission_required(roles.MANAGE_WEBHOOK_CHANNELS, raise_exception=True)
def channel_create_view(request: HttpRequest) -> HttpResponse:
    form = _channel_form(request, data=request.POST)
    if form.is_valid():
        try:
            channel, secret = services.channel_create(user=request.user, **form.cleaned_data)
        except services.ChannelError as exc:
            form.add_error(exc.field if exc.field in form.fields else None, str(exc))
        else:
            # The secret is shown on this answer only (no redirect: it is in no message),
            # and no cache keeps a copy, as for a new API key.
            response = _page(request, new_secret=secret, new_channel=channel)
            add_never_cache_headers(response)
            return response
    return _page(request, channel_form=form, status=400)


@require_http_methods(["GET", "POST"])
@login_required
@permission_required(roles.MANAGE_WEBHOOK_CHANNELS, raise_exception=True)
def channel_edit_view(request: HttpRequest, channel_id: int) -> HttpResponse:
    channel = _managed_channel(request, channel_id)
    form = ChannelEditForm(request.POST if request.method == "POST" else None)
    if request.method == "POST" and form.is_valid():
        try:
            services.channel_update(channel=channel, target=form.cleaned_data["target"])
        except services.ChannelError as exc:
            form.add_error("target", str(exc))
        else:
            messages.success(request, _("Channel %(name)s saved.") % {"name": channel.name})
            return _home()
    status = 400 if request.method == "POST" else 200
    return render(request, CHANNEL_PAGE, {"channel": channel, "form": form}, status=status)


@require_POST
@login_required
@permission_required(roles.MANAGE_WEBHOOK_CHANNELS, raise_exception=True)
def channel_test_view(request: HttpRequest, channel_id: int) -> HttpResponse:
    channel = _managed_channel(request, channel_id)
    delivery = services.channel_test(channel=channel)
    if delivery.status == "sent":
        messages.success(
            request,
            _("Test sent to %(name)s (answer %(code)s).")
            % {"name": channel.name, "code": delivery.answer_code},
        )
    else:
        messages.error(
            request,
            _("Test to %(name)s failed: %(error)s")
            % {"name": channel.name, "error": delivery.error or delivery.answer_code},
        )
    return _home()


@require_POST
@login_required
@permission_required(roles.MANAGE_WEBHOOK_CHANNELS, raise_exception=True)
def channel_delete_view(request: HttpRequest, channel_id: int) -> HttpResponse:
    channel = _managed_channel(request, channel_id)
    services.channel_delete(channel=channel)
    messages.success(request, _("Channel %(name)s deleted.") % {"name": channel.name})
    return _home()
