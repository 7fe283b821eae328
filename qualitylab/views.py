"""Quality Lab pages: collections and their builds, cases and suites, runs and results.

Every page finds its collection, run or result through the collections its reader sees
(organisation.access): another team's is not found (404, so names and ids do not leak). An
action also needs the permission on that collection (403 when the person's role in the owning
team lacks it), and the buttons a page shows follow the same rule. A new collection takes a
name the person's team owns (or any name while no team exists)."""

from __future__ import annotations

import json
import re
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required, permission_required
from django.core.exceptions import PermissionDenied
from django.db.models import Prefetch
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseRedirect,
)
from django.shortcuts import get_object_or_404, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.http import content_disposition_header
from django.utils.translation import gettext, ngettext
from django.views.decorators.csrf import csrf_exempt, csrf_protect
from django.views.decorators.http import require_http_methods, require_POST, require_safe
from django_htmx.http import HttpResponseStopPolling

from core.http import is_partial
from organisation.access import can_see, has_collection_perm, visible_q
from qualitylab import engine, selectors, services, uploads
from qualitylab.forms import (
    CaseForm,
    CaseFromGroupForm,
    CasesImportForm,
    CollectionCreateForm,
    CollectionSettingsForm,
    RunCompareForm,
    RunStartForm,
    SpecSourceForm,
    SuiteForm,
)
from qualitylab.models import CaseResult, CaseRun, Collection, QualityCase, Suite
from triage.models import FailureGroup

VIEW_COLLECTION = "qualitylab.view_collection"
VIEW_RUN = "qualitylab.view_caserun"
VIEW_RESULT = "qualitylab.view_caseresult"
ADD_COLLECTION = "qualitylab.add_collection"
CHANGE_COLLECTION = "qualitylab.change_collection"
ADD_CASE = "qualitylab.add_qualitycase"
CHANGE_CASE = "qualitylab.change_qualitycase"
ADD_SUITE = "qualitylab.add_suite"
CHANGE_SUITE = "qualitylab.change_suite"
RUN = "qualitylab.run_quality_lab"

_HEAVY_VERSION_FIELDS = ("current_version__spec_source", "current_version__artifact_compressed")


def _can(request: HttpRequest, perm: str, collection_name: str) -> bool:
    """The person's role allows ``perm`` on this collection's things (no query when no role
    of theirs has it at all)."""
    user = request.user
    return user.has_perm(perm) and has_collection_perm(user, perm, collection_name)


def _collection(request: HttpRequest, name: str, perm: str = "") -> Collection:
    """The collection if the person sees it (else 404) and, for an action, may do ``perm``
    on it (else 403)."""
    collection = get_object_or_404(
        selectors.visible_collections(user=request.user)
        .select_related("current_version")
        .defer(*_HEAVY_VERSION_FIELDS),
        name=name,
    )
    if perm and not has_collection_perm(request.user, perm, collection.name):
        raise PermissionDenied
    return collection


def _run(request: HttpRequest, run_id: int, perm: str) -> CaseRun:
    run = get_object_or_404(
        selectors.visible_runs(user=request.user).select_related("collection"), pk=run_id
    )
    if not has_collection_perm(request.user, perm, run.collection.name):
        raise PermissionDenied
    return run


def _back_to(collection: Collection, anchor: str = "") -> HttpResponseRedirect:
    url = reverse("qualitylab:collection", args=[collection.name])
    return HttpResponseRedirect(f"{url}#{anchor}" if anchor else url)


# --- collections ------------------------------------------------------------------------


def _render_home(
    request: HttpRequest, form: CollectionCreateForm | None = None, status: int = 200
) -> HttpResponse:
    can_add = request.user.has_perm(ADD_COLLECTION)
    context = {
        "rows": selectors.collections_overview(user=request.user),
        "can_add": can_add,
        "form": (form or CollectionCreateForm()) if can_add else None,
    }
    return render(request, "qualitylab/home.html", context, status=status)


@require_safe
@login_required
@permission_required(VIEW_COLLECTION, raise_exception=True)
def home(request: HttpRequest) -> HttpResponse:
    return _render_home(request)


def _spec_refused_unread(request: HttpRequest) -> str | None:
    """The refusal of a spec upload whose declared length cannot fit, before reading it."""
    size = uploads.body_cannot_fit(request, limit=services.max_spec_bytes())
    return None if size is None else services.spec_too_large_message(size=size)


# The size limit is judged before anything reads the body, and Django's CSRF check reads
# it: these views are exempt from the middleware and protect their inner view themselves.
@csrf_exempt
@require_POST
@login_required
@permission_required(ADD_COLLECTION, raise_exception=True)
def collection_create(request: HttpRequest) -> HttpResponse:
    refusal = _spec_refused_unread(request)
    if refusal is not None:
        form = CollectionCreateForm()
        form.refuse_spec(refusal)
        return _render_home(request, form, status=413)
    limit = uploads.limit_spec_upload(request, limit=services.max_spec_bytes())
    if uploads.form_fields_too_big(request):
        form = CollectionCreateForm()
        form.refuse_paste()
        return _render_home(request, form, status=413)
    return _collection_create(request, limit)


@csrf_protect
def _collection_create(request: HttpRequest, limit: uploads.SpecUploadLimit) -> HttpResponse:
    form = CollectionCreateForm(request.POST, request.FILES, upload_refused=limit.refused)
    if form.is_valid() and not _may_create(request, form.cleaned_data["name"]):
        form.add_error(
            "name",
            gettext(
                "No team of yours owns this name: choose one of your team's collections, or "
                "ask an admin to give this name to your team."
            ),
        )
    if not form.is_valid():
        return _render_home(request, form, status=400)
    data = form.cleaned_data
    try:
        collection, _ = services.collection_create(
            name=data["name"],
            title=data["title"],
            spec_text=data["spec"],
            base_url=data["base_url"],
            allowed_hosts=data["allowed_hosts"],
            auth_profile=form.auth_profile(),
            mutations_allowed=data["mutations_allowed"],
            user=request.user,
        )
    except engine.SpecError as exc:
        form.add_spec_error(exc)
        return _render_home(request, form, status=400)
    except services.CollectionError as exc:
        form.add_error(exc.field or "name", str(exc))
        return _render_home(request, form, status=400)
    except services.QueueUnavailable as exc:
        # The collection and its queued version were saved before the queue refused.
        messages.error(request, str(exc))
        return _back_to(Collection.objects.get(name=data["name"]))
    messages.success(
        request,
        gettext("Collection %(name)s added; its spec is being built.") % {"name": collection.name},
    )
    return _back_to(collection)


def _may_create(request: HttpRequest, name: str) -> bool:
    """A new collection is the team's that owns its name: the person must see that name and
    may add collections there (so nobody makes a collection they could not see)."""
    return can_see(request.user, name) and has_collection_perm(request.user, ADD_COLLECTION, name)


@require_safe
@login_required
@permission_required(VIEW_COLLECTION, raise_exception=True)
def collection_page(request: HttpRequest, name: str) -> HttpResponse:
    collection = _collection(request, name)
    versions = selectors.collection_versions(collection=collection)
    building = selectors.versions_in_progress(versions)
    gaps = selectors.configuration_gaps(collection=collection)
    context: dict[str, Any] = {
        "collection": collection,
        "version": collection.current_version,
        "versions": versions,
        "building": building,
        "severities": selectors.severity_counts(
            selectors.with_gaps(
                collection.current_version.readiness_summary
                if collection.current_version
                else None,
                gaps,
            )
        ),
        "issues": gaps + selectors.readiness_issues(version=collection.current_version),
        "gaps": gaps,
        "can_change_collection": _can(request, CHANGE_COLLECTION, collection.name),
    }
    if is_partial(request):
        content = render_to_string("qualitylab/collection.html#build", context, request=request)
        if building:
            return HttpResponse(content)
        response = HttpResponseStopPolling(content)
        if request.GET.get("first_build") and collection.current_version_id:
            response["HX-Refresh"] = "true"  # the run form and the cases need a built version
        return response
    name = collection.name
    context.update(
        {
            "series": selectors.metric_history(collection=collection),
            "runs": selectors.collection_runs(collection=collection),
            "cases": selectors.cases_with_last_result(collection=collection),
            "suites": selectors.suites_with_counts(collection=collection),
            "run_form": RunStartForm(collection=collection),
            "can_run": _can(request, RUN, name),
            "can_add_case": _can(request, ADD_CASE, name),
            "can_change_case": _can(request, CHANGE_CASE, name),
            "can_add_suite": _can(request, ADD_SUITE, name),
            "can_change_suite": _can(request, CHANGE_SUITE, name),
        }
    )
    return render(request, "qualitylab/collection.html", context)


@require_POST
@login_required
@permission_required(CHANGE_COLLECTION, raise_exception=True)
def collection_rebuild(request: HttpRequest, name: str) -> HttpResponse:
    collection = _collection(request, name, CHANGE_COLLECTION)
    try:
        version = services.collection_rebuild(collection=collection, user=request.user)
    except (services.CollectionError, engine.SpecError, services.QueueUnavailable) as exc:
        messages.error(request, str(exc))
    else:
        messages.success(
            request,
            gettext("Version %(number)d is queued for building.") % {"number": version.number},
        )
    return _back_to(collection, "build")


@csrf_exempt  # see collection_create
@require_http_methods(["GET", "POST"])
@login_required
@permission_required(CHANGE_COLLECTION, raise_exception=True)
def collection_spec(request: HttpRequest, name: str) -> HttpResponse:
    """Upload a new spec: a new version; cases, runs and results stay with the collection."""
    collection = _collection(request, name, CHANGE_COLLECTION)
    refusal = _spec_refused_unread(request) if request.method == "POST" else None
    if refusal is not None:
        form = SpecSourceForm()
        form.refuse_spec(refusal)
        context = {"collection": collection, "form": form}
        return render(request, "qualitylab/spec_form.html", context, status=413)
    limit = uploads.limit_spec_upload(request, limit=services.max_spec_bytes())
    if request.method == "POST" and uploads.form_fields_too_big(request):
        form = SpecSourceForm()
        form.refuse_paste()
        context = {"collection": collection, "form": form}
        return render(request, "qualitylab/spec_form.html", context, status=413)
    return _collection_spec(request, collection, limit)


@csrf_protect
def _collection_spec(
    request: HttpRequest, collection: Collection, limit: uploads.SpecUploadLimit
) -> HttpResponse:
    posted = request.method == "POST"
    form = SpecSourceForm(
        request.POST if posted else None,
        request.FILES if posted else None,
        upload_refused=limit.refused,
    )
    if request.method == "POST" and form.is_valid():
        try:
            version = services.collection_rebuild(
                collection=collection, spec_text=form.cleaned_data["spec"], user=request.user
            )
        except engine.SpecError as exc:
            form.add_spec_error(exc)
        except services.QueueUnavailable as exc:
            messages.error(request, str(exc))
            return _back_to(collection, "build")
        else:
            messages.success(
                request,
                gettext("Version %(number)d is queued for building.") % {"number": version.number},
            )
            return _back_to(collection, "build")
    status = 400 if form.errors else 200
    context = {"collection": collection, "form": form}
    return render(request, "qualitylab/spec_form.html", context, status=status)


@require_http_methods(["GET", "POST"])
@login_required
@permission_required(CHANGE_COLLECTION, raise_exception=True)
def collection_settings(request: HttpRequest, name: str) -> HttpResponse:
    """Base URL, allowed hosts, auth profile and whether mutating cases may run."""
    collection = _collection(request, name, CHANGE_COLLECTION)
    form = CollectionSettingsForm(
        request.POST or None, initial=CollectionSettingsForm.initial_for(collection)
    )
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            services.collection_update(
                collection=collection,
                title=data["title"],
                base_url=data["base_url"],
                # Empty: the base URL's host, as the field's help says.
                allowed_hosts=data["allowed_hosts"]
                or services.default_allowed_hosts(data["base_url"]),
                auth_profile=form.auth_profile(),
                mutations_allowed=data["mutations_allowed"],
            )
        except services.CollectionError as exc:
            form.add_error(exc.field, str(exc))
        else:
            messages.success(
                request, gettext("Settings of %(name)s saved.") % {"name": collection.name}
            )
            return _back_to(collection)
    status = 400 if form.errors else 200
    context = {"collection": collection, "form": form}
    return render(request, "qualitylab/settings_form.html", context, status=status)


# --- cases --------------------------------------------------------------------------------


def _case_saved(request: HttpRequest, case: QualityCase, *, created: bool) -> HttpResponse:
    text = gettext("Case %(case)s added.") if created else gettext("Case %(case)s saved.")
    messages.success(request, text % {"case": case.case_id})
    return _back_to(case.collection, "cases")


@require_http_methods(["GET", "POST"])
@login_required
@permission_required(ADD_CASE, raise_exception=True)
def case_create(request: HttpRequest, name: str) -> HttpResponse:
    collection = _collection(request, name, ADD_CASE)
    form = CaseForm(request.POST or None, collection=collection)
    if request.method == "POST" and form.is_valid():
        case = _save_case(form, collection=collection)
        if case is not None:
            return _case_saved(request, case, created=True)
    return _render_case_form(request, form, collection=collection)


@require_http_methods(["GET", "POST"])
@login_required
@permission_required(CHANGE_CASE, raise_exception=True)
def case_edit(request: HttpRequest, name: str, case_id: str) -> HttpResponse:
    collection = _collection(request, name, CHANGE_CASE)
    case = get_object_or_404(collection.cases, case_id=case_id)
    form = CaseForm(
        request.POST or None,
        collection=collection,
        initial=CaseForm.initial_for(case),
        editing=True,
    )
    if request.method == "POST" and form.is_valid():
        saved = _save_case(form, collection=collection)
        if saved is not None:
            return _case_saved(request, saved, created=False)
    return _render_case_form(request, form, collection=collection, case=case)


def _save_case(
    form: CaseForm, *, collection: Collection, group: FailureGroup | None = None
) -> QualityCase | None:
    try:
        return services.case_save(
            collection=collection,
            document=form.document(),
            active=form.cleaned_data["active"],
            failure_group=group,
        )
    except engine.CaseSpecError as exc:  # the form checked already; the service has the word
        form.add_case_error(exc)
        return None


def _render_case_form(
    request: HttpRequest,
    form: CaseForm,
    *,
    collection: Collection | None,
    case: QualityCase | None = None,
    group: FailureGroup | None = None,
    query_hint: str = "",
) -> HttpResponse:
    context = {
        "form": form,
        "collection": collection,
        "case": case,
        "group": group,
        "query_hint": query_hint,
    }
    status = 400 if form.is_bound and form.errors else 200
    return render(request, "qualitylab/case_form.html", context, status=status)


@require_POST
@login_required
@permission_required(CHANGE_CASE, raise_exception=True)
def case_toggle_active(request: HttpRequest, name: str, case_id: str) -> HttpResponse:
    collection = _collection(request, name, CHANGE_CASE)
    case = get_object_or_404(collection.cases, case_id=case_id)
    try:
        saved = services.case_save(
            collection=collection,
            document=services.case_to_json(case),
            active=not case.active,
            # Switching a case off never needs its tools; switching it on does.
            check_tools=not case.active,
        )
    except engine.CaseSpecError as exc:
        messages.error(
            request,
            gettext("Case %(case)s is invalid, edit it first: %(error)s")
            % {"case": case.case_id, "error": f"{exc.field}: {exc.translated(gettext)}"},
        )
    else:
        text = (
            gettext("Case %(case)s is active again.")
            if saved.active
            else gettext("Case %(case)s is deactivated: runs skip it.")
        )
        messages.success(request, text % {"case": saved.case_id})
    return _back_to(collection, "cases")


@require_http_methods(["GET", "POST"])
@login_required
@permission_required(ADD_CASE, raise_exception=True)
@permission_required(CHANGE_CASE, raise_exception=True)
def cases_import(request: HttpRequest, name: str) -> HttpResponse:
    """Import cases; when any is wrong, nothing is written and every error is listed."""
    collection = _collection(request, name, ADD_CASE)
    if not has_collection_perm(request.user, CHANGE_CASE, collection.name):
        raise PermissionDenied
    form = CasesImportForm(request.POST or None, request.FILES or None)
    report = None
    if request.method == "POST" and form.is_valid():
        report = services.cases_import(
            collection=collection, documents=form.cleaned_data["cases_file"]
        )
        if not report.errors:
            messages.success(
                request,
                gettext("Imported: %(created)d cases added, %(updated)d updated.")
                % {"created": report.created, "updated": report.updated},
            )
            return _back_to(collection, "cases")
    status = 400 if form.errors or (report and report.errors) else 200
    context = {"collection": collection, "form": form, "report": report}
    return render(request, "qualitylab/cases_import.html", context, status=status)


@require_safe
@login_required
@permission_required(VIEW_COLLECTION, raise_exception=True)
def cases_export(request: HttpRequest, name: str) -> HttpResponse:
    """Every case of the collection in the documented schema, as a JSON file."""
    collection = _collection(request, name)
    cases = [services.case_to_json(case) for case in collection.cases.order_by("case_id")]
    response = HttpResponse(
        json.dumps(cases, ensure_ascii=False, indent=2) + "\n",
        content_type="application/json; charset=utf-8",
    )
    response["Content-Disposition"] = str(
        content_disposition_header(as_attachment=True, filename=f"{collection.name}-cases.json")
    )
    return response


@require_http_methods(["GET", "POST"])
@login_required
@permission_required(ADD_CASE, raise_exception=True)
def case_from_group(request: HttpRequest) -> HttpResponse:
    """A case that protects a failure group: prefilled from the group, linked when saved."""
    group = _group_or_404(request, request.GET.get("group") or request.POST.get("group"))
    form = CaseFromGroupForm(request.POST or None, initial=_prefill(group), user=request.user)
    if (
        request.method == "POST"
        and form.is_valid()
        and not has_collection_perm(request.user, ADD_CASE, form.cleaned_data["collection"].name)
    ):
        form.add_error("collection", gettext("Your role may not add cases to this collection."))
    if request.method == "POST" and form.is_valid():
        collection = form.cleaned_data["collection"]
        case = _save_case(form, collection=collection, group=group)
        if case is not None:
            messages.success(
                request,
                gettext("Case %(case)s added; it protects this failure group.")
                % {"case": case.case_id},
            )
            return _back_to(collection, "cases")
    return _render_case_form(
        request,
        form,
        collection=None,
        group=group,
        query_hint=""
        if form["query"].value()
        else gettext(
            "No record of this group carried the user's query: write one a user would type."
        ),
    )


def _group_or_404(request: HttpRequest, raw: str | None) -> FailureGroup:
    if not raw or not raw.isascii() or not raw.isdigit() or len(raw) > 18:
        raise Http404("Choose a failure group")
    groups = FailureGroup.objects.filter(visible_q(request.user, "collection"))
    return get_object_or_404(groups, pk=int(raw))


def _prefill(group: FailureGroup) -> dict[str, Any]:
    tool = group.tool or ""
    collection = Collection.objects.filter(name=group.collection).only("pk", "name").first()
    suggested_id = re.sub(r"[^A-Za-z0-9_.:\-]+", "-", f"{group.reason}-{tool}".strip("-"))[:120]
    initial: dict[str, Any] = {
        "collection": collection,
        "case_id": suggested_id.strip("-").lower(),
        "mode": selectors.mode_for_stage(group.stage),
        "query": selectors.group_query(group=group),
        "expected_target": tool,
        "expected_top_k": 5,
        "mutation_safety": "read_only",
        "assertions": json.dumps({"allowed_failure_reasons": [], "selected_target": tool}),
        "active": True,
    }
    if initial["mode"] == "search":
        # selected_target is a plan-stage assertion: a search case cannot evaluate it.
        initial["assertions"] = json.dumps(
            [{"type": "top_k_contains", "tool": tool, "k": 5}] if tool else []
        )
    return initial


# --- suites -------------------------------------------------------------------------------


@require_http_methods(["GET", "POST"])
@login_required
@permission_required(ADD_SUITE, raise_exception=True)
def suite_create(request: HttpRequest, name: str) -> HttpResponse:
    collection = _collection(request, name, ADD_SUITE)
    form = SuiteForm(request.POST or None, collection=collection)
    return _suite_form(request, form, collection=collection, suite=None)


@require_http_methods(["GET", "POST"])
@login_required
@permission_required(CHANGE_SUITE, raise_exception=True)
def suite_edit(request: HttpRequest, name: str, suite_name: str) -> HttpResponse:
    collection = _collection(request, name, CHANGE_SUITE)
    suite = get_object_or_404(
        collection.suites.prefetch_related(
            Prefetch("cases", queryset=QualityCase.objects.only("pk", "case_id"))
        ),
        name=suite_name,
    )
    initial = {
        "name": suite.name,
        "description": suite.description,
        "cases": [case.case_id for case in suite.cases.all()],
    }
    form = SuiteForm(request.POST or None, collection=collection, initial=initial, editing=True)
    return _suite_form(request, form, collection=collection, suite=suite)


def _suite_form(
    request: HttpRequest, form: SuiteForm, *, collection: Collection, suite: Suite | None
) -> HttpResponse:
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        saved = services.suite_save(
            collection=collection,
            name=data["name"],
            description=data["description"],
            case_ids=[case.case_id for case in data["cases"]],
        )
        messages.success(
            request,
            ngettext(
                "Suite %(name)s saved with %(count)d case.",
                "Suite %(name)s saved with %(count)d cases.",
                len(data["cases"]),
            )
            % {"name": saved.name, "count": len(data["cases"])},
        )
        return _back_to(collection, "suites")
    status = 400 if form.errors else 200
    context = {"form": form, "collection": collection, "suite": suite}
    return render(request, "qualitylab/suite_form.html", context, status=status)


# --- runs ---------------------------------------------------------------------------------


@require_POST
@login_required
@permission_required(RUN, raise_exception=True)
def run_start(request: HttpRequest, name: str) -> HttpResponse:
    collection = _collection(request, name, RUN)
    form = RunStartForm(request.POST, collection=collection)
    if not form.is_valid():
        errors = "; ".join(
            f"{field}: {' '.join(str(error) for error in field_errors)}"
            for field, field_errors in form.errors.items()
        )
        messages.error(request, gettext("The run was not started: %(errors)s") % {"errors": errors})
        return _back_to(collection, "run")
    data = form.cleaned_data
    try:
        run = services.run_start(
            collection=collection,
            user=request.user,
            suite=data["suite"],
            mode=data["mode"],
            repeat=data["repeat"],
        )
    except (services.CollectionError, services.QueueUnavailable) as exc:
        messages.error(request, str(exc))
        return _back_to(collection, "run")
    return HttpResponseRedirect(reverse("qualitylab:run", args=[run.pk]))


@require_safe
@login_required
@permission_required(VIEW_RUN, raise_exception=True)
def run_page(request: HttpRequest, run_id: int) -> HttpResponse:
    try:
        run = selectors.run_for_page(run_id=run_id, user=request.user)
    except CaseRun.DoesNotExist:
        raise Http404("No such run") from None
    context: dict[str, Any] = {
        "run": run,
        "elapsed": selectors.run_elapsed_seconds(run),
        "can_run": _can(request, RUN, run.collection.name),
    }
    if is_partial(request):
        content = render_to_string("qualitylab/run.html#progress", context, request=request)
        if not run.is_finished:
            return HttpResponse(content)
        # Finished: stop polling and load the page again, now with results and comparison.
        response = HttpResponseStopPolling(content)
        response["HX-Refresh"] = "true"
        return response
    form = RunCompareForm(request.GET)
    baseline = None
    if form.is_valid() and form.cleaned_data["compare"]:
        baseline = selectors.comparable_run(run=run, run_id=form.cleaned_data["compare"])
        if baseline is None:
            form.add_error(
                "compare",
                gettext("Run #%(run)s is not another finished run of %(collection)s.")
                % {"run": form.cleaned_data["compare"], "collection": run.collection.name},
            )
    view = selectors.run_results(run=run, baseline=baseline)
    context["view"] = view
    context["compare_form"] = form
    context["comparable"] = selectors.comparable_runs(run=run, chosen=view.comparison.previous)
    return render(request, "qualitylab/run.html", context, status=400 if form.errors else 200)


@require_POST
@login_required
@permission_required(RUN, raise_exception=True)
def run_cancel(request: HttpRequest, run_id: int) -> HttpResponse:
    run = _run(request, run_id, RUN)
    if run.is_finished:
        messages.error(
            request,
            gettext("Run %(run)d is already %(status)s.")
            % {"run": run.pk, "status": run.get_status_display()},
        )
    else:
        services.run_cancel(run=run)
        messages.success(
            request, gettext("Cancel requested: the run stops after the case in progress.")
        )
    return HttpResponseRedirect(reverse("qualitylab:run", args=[run.pk]))


@require_POST
@login_required
@permission_required(RUN, raise_exception=True)
def run_rerun_failed(request: HttpRequest, run_id: int) -> HttpResponse:
    run = _run(request, run_id, RUN)
    try:
        rerun = services.run_rerun_failed(run=run, user=request.user)
    except (services.CollectionError, services.QueueUnavailable) as exc:
        messages.error(request, str(exc))
        return HttpResponseRedirect(reverse("qualitylab:run", args=[run.pk]))
    return HttpResponseRedirect(reverse("qualitylab:run", args=[rerun.pk]))


@require_safe
@login_required
@permission_required(VIEW_RESULT, raise_exception=True)
def result_page(request: HttpRequest, result_id: int) -> HttpResponse:
    try:
        result = selectors.result_for_page(result_id=result_id, user=request.user)
    except CaseResult.DoesNotExist:
        raise Http404("No such result") from None
    partial = is_partial(request)
    context = {"result": result, "sections": result.sections or {}, "inline": partial}
    template = "qualitylab/result.html#result-detail" if partial else "qualitylab/result.html"
    return render(request, template, context)
