"""Forms of the Quality Lab pages. They check shapes; the services check meaning."""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import urlsplit

from django import forms
from django.conf import settings
from django.core.files.uploadedfile import UploadedFile
from django.utils.text import format_lazy
from django.utils.translation import gettext, gettext_lazy

from core.collection_names import COLLECTION_NAME_MAX_LENGTH
from core.fields import validate_collection_name, validate_outbound_url
from core.json_limits import JSONTooDeep, loads_bounded
from organisation.access import visible_q
from qualitylab import engine, services
from qualitylab.models import CaseMode, Collection, QualityCase, Suite
from triage.forms import MAX_ID, help_with_code

MAX_CASES_FILE_BYTES = 5_000_000
_ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,99}\Z")
_HEADER_NAME_RE = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,100}\Z")
_HOST_RE = re.compile(r"^[A-Za-z0-9.\-\[\]:]{1,255}\Z")


def read_text_upload(upload: UploadedFile, *, limit: int, what: str) -> str:
    """An uploaded file as text, refused when it is too big or not UTF-8."""
    too_large = gettext("The %(what)s is larger than %(limit)s.") % {
        "what": what,
        "limit": engine.format_size(limit),
    }
    if upload.size is not None and upload.size > limit:
        raise forms.ValidationError(too_large)
    data = upload.read(limit + 1)
    if len(data) > limit:
        raise forms.ValidationError(too_large)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise forms.ValidationError(
            gettext("The %(what)s is not UTF-8 text (byte %(byte)d).")
            % {"what": what, "byte": exc.start}
        ) from None


class SpecSourceForm(forms.Form):
    """An OpenAPI spec as a file or pasted text; ``spec_text()`` is what the service gets."""

    spec_file = forms.FileField(
        required=False,
        label=gettext_lazy("Spec file"),
        help_text=gettext_lazy("OpenAPI 3.x or Swagger 2, JSON or YAML."),
        widget=forms.ClearableFileInput(attrs={"accept": ".json,.yaml,.yml,application/json"}),
    )
    spec_paste = forms.CharField(
        required=False,
        label=gettext_lazy("or paste the spec"),
        widget=forms.Textarea(attrs={"rows": 6, "spellcheck": "false", "class": "code"}),
        help_text=gettext_lazy(
            "Pasted text is limited by the request size (5 MiB); upload bigger specs."
        ),
    )

    def __init__(self, *args: Any, upload_refused: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        limit = engine.format_size(services.max_spec_bytes())
        self.fields["spec_file"].help_text = gettext(
            "OpenAPI 3.x or Swagger 2, JSON or YAML, at most %(limit)s."
        ) % {"limit": limit}
        # The upload handler stopped keeping the spec file: it passed the limit.
        self.upload_refused = upload_refused

    def refuse_spec(self, message: str, *, field: str = "spec_file") -> None:
        """Show a refusal that came before the form could read anything (an unbound form)."""
        if not hasattr(self, "cleaned_data"):
            self.cleaned_data = {}
        self.add_error(field, message)

    def refuse_paste(self) -> None:
        """The pasted text (the form's fields) passed the request size Django reads."""
        self.refuse_spec(
            f"The pasted text is larger than "
            f"{engine.format_size(int(settings.DATA_UPLOAD_MAX_MEMORY_SIZE or 0))}, the most a "
            f"form field takes; nothing was kept. Upload the spec as a file instead (up to "
            f"{engine.format_size(services.max_spec_bytes())}).",
            field="spec_paste",
        )

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        upload = data.get("spec_file")
        pasted = (data.get("spec_paste") or "").strip()
        limit = services.max_spec_bytes()
        if self.upload_refused:
            self.add_error("spec_file", services.spec_too_large_message())
        elif upload and pasted:
            self.add_error("spec_file", gettext("Upload a file or paste the spec, not both."))
        elif not upload and not pasted:
            self.add_error("spec_file", gettext("Upload the spec or paste it."))
        elif upload and upload.size is not None and upload.size > limit:
            self.add_error("spec_file", services.spec_too_large_message(size=upload.size))
        elif upload:
            try:
                data["spec"] = read_text_upload(upload, limit=limit, what=gettext("spec"))
            except forms.ValidationError as exc:
                self.add_error("spec_file", exc)
        else:
            data["spec"] = pasted
        return data

    def add_spec_error(self, error: engine.SpecError) -> None:
        """The parse error, shown on the field the spec came from."""
        field = "spec_file" if self.cleaned_data.get("spec_file") else "spec_paste"
        self.add_error(
            field, gettext("This is not a usable OpenAPI spec: %(error)s") % {"error": error}
        )


class CallURLField(forms.URLField):
    """A URL execute cases may call: any valid host name, one label (a compose service such
    as ``http://sandbox:8090``) as well as several, where Django's URLValidator wants a dot.
    The address the name resolves to is checked by the services and at each call."""

    default_validators = [validate_outbound_url]


class CollectionSettingsForm(forms.Form):
    """Where and as whom execute cases call; never a secret, only where it comes from."""

    title = forms.CharField(label=gettext_lazy("Title"), max_length=200, required=False)
    base_url = CallURLField(
        required=False,
        max_length=Collection._meta.get_field("base_url").max_length,
        assume_scheme="https",
        label=gettext_lazy("Base URL"),
        help_text=gettext_lazy("Where execute cases call. Empty: the spec's first server URL."),
    )
    allowed_hosts = forms.CharField(
        label=gettext_lazy("Allowed hosts"),
        required=False,
        max_length=1000,
        help_text=gettext_lazy(
            "Comma separated (host or host:port). Empty: the base URL's host. Execute "
            "cases never call any other host."
        ),
    )
    auth_header = forms.CharField(
        required=False,
        max_length=100,
        initial="Authorization",
        label=gettext_lazy("Auth header name"),
    )
    auth_scheme = forms.CharField(
        required=False, max_length=40, initial="Bearer", label=gettext_lazy("Scheme"),
        help_text=help_with_code(
            gettext_lazy(
                "Put before the secret ({bearer}, {token}…); empty sends the secret as is."
            ),
            bearer="Bearer",
            token="Token",
        ),
    )  # fmt: skip
    auth_secret_env = forms.CharField(
        required=False,
        max_length=100,
        label=gettext_lazy("Secret from environment variable"),
        help_text=gettext_lazy(
            "The NAME of an environment variable of the worker declared for this "
            "collection: QUALITYLAB_SECRET_<COLLECTION> (e.g. QUALITYLAB_SECRET_SHOP for shop), or "
            "one an administrator listed in QUALITYLAB_CREDENTIAL_ENVS. The worker reads it when "
            "a run starts; the secret itself is never stored here."
        ),
    )
    mutations_allowed = forms.BooleanField(
        required=False,
        label=gettext_lazy("Allow mutating cases (POST/PUT/PATCH/DELETE with cleanup steps)"),
    )

    @classmethod
    def initial_for(cls, collection: Any) -> dict[str, Any]:
        profile = collection.auth_profile or {}
        return {
            "title": collection.title,
            "base_url": collection.base_url,
            "allowed_hosts": ", ".join(collection.allowed_hosts or []),
            "auth_header": (profile.get("header_names") or ["Authorization"])[0],
            "auth_scheme": profile.get("scheme", "Bearer"),
            "auth_secret_env": profile.get("secret_env", ""),
            "mutations_allowed": collection.mutations_allowed,
        }

    def clean_allowed_hosts(self) -> list[str] | None:
        raw = self.cleaned_data.get("allowed_hosts") or ""
        hosts = [host.strip().lower() for host in raw.split(",") if host.strip()]
        bad = [host for host in hosts if not _HOST_RE.match(host) or "/" in host]
        if bad:
            raise forms.ValidationError(
                gettext(
                    "Not a host name: %(host)r. Give hosts like api.example.com or "
                    "127.0.0.1:8090, not URLs."
                )
                % {"host": bad[0]}
            )
        return hosts or None

    def clean_auth_header(self) -> str:
        value = (self.cleaned_data.get("auth_header") or "").strip()
        if value and not _HEADER_NAME_RE.match(value):
            raise forms.ValidationError(gettext("Not a valid HTTP header name."))
        return value

    def clean_auth_secret_env(self) -> str:
        value = (self.cleaned_data.get("auth_secret_env") or "").strip()
        if value and not _ENV_NAME_RE.match(value):
            raise forms.ValidationError(
                gettext(
                    "Give the name of an environment variable (letters, digits, '_'), "
                    "not the secret itself."
                )
            )
        return value

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        hosts = data.get("allowed_hosts")
        base_url = data.get("base_url") or ""
        if hosts and base_url:
            parts = urlsplit(base_url)
            host = (parts.hostname or "").lower()
            label = f"{host}:{parts.port}" if parts.port else host
            if host not in hosts and label not in hosts:
                self.add_error(
                    "allowed_hosts",
                    gettext(
                        "The base URL's host %(host)s is not in the list: execute cases "
                        "would never run."
                    )
                    % {"host": label},
                )
        if data.get("auth_secret_env") and not data.get("auth_header"):
            self.add_error("auth_header", gettext("Name the header that carries the secret."))
        return data

    def auth_profile(self) -> dict[str, Any]:
        """Header name, scheme and where the secret comes from; empty without a variable."""
        data = self.cleaned_data
        if not data.get("auth_secret_env"):
            return {}
        return {
            "header_names": [data["auth_header"]],
            "scheme": (data.get("auth_scheme") or "").strip(),
            "secret_env": data["auth_secret_env"],
        }


class CollectionCreateForm(CollectionSettingsForm, SpecSourceForm):
    name = forms.CharField(
        label=gettext_lazy("Name"),
        max_length=COLLECTION_NAME_MAX_LENGTH,
        validators=[validate_collection_name],
        help_text=format_lazy(
            gettext_lazy(
                "The id failure records and runtimes use for it, e.g. checkout.v2 or team a: "
                "any text up to {limit} characters, without control characters."
            ),
            limit=COLLECTION_NAME_MAX_LENGTH,
        ),
    )

    field_order = [
        "name", "title", "spec_file", "spec_paste", "base_url", "allowed_hosts",
        "auth_header", "auth_scheme", "auth_secret_env", "mutations_allowed",
    ]  # fmt: skip


class CasesImportForm(forms.Form):
    cases_file = forms.FileField(
        label=gettext_lazy("Cases file (JSON)"),
        help_text=help_with_code(
            gettext_lazy("A JSON list of cases in the documented schema: {example}. At most 5 MB."),
            example='[{"id": ..., "mode": ..., "query": ...}, ...]',
        ),
        widget=forms.ClearableFileInput(attrs={"accept": ".json,application/json"}),
    )

    def clean_cases_file(self) -> list[Any]:
        upload = self.cleaned_data["cases_file"]
        text = read_text_upload(upload, limit=MAX_CASES_FILE_BYTES, what=gettext("file"))
        try:
            documents = loads_bounded(text, max_depth=settings.TRIAGE_JSON_MAX_DEPTH)
        except JSONTooDeep as exc:
            raise forms.ValidationError(
                gettext("The file is nested deeper than %(limit)d levels of arrays and objects.")
                % {"limit": exc.limit}
            ) from None
        except json.JSONDecodeError as exc:
            raise forms.ValidationError(
                gettext("Not JSON: line %(line)d, column %(column)d: %(problem)s.")
                % {"line": exc.lineno, "column": exc.colno, "problem": exc.msg}
            ) from None
        except ValueError:  # an integer of more digits than Python converts
            raise forms.ValidationError(
                gettext("Not JSON: an integer of more than 4300 digits.")
            ) from None
        if isinstance(documents, dict) and isinstance(documents.get("cases"), list):
            documents = documents["cases"]
        if not isinstance(documents, list):
            raise forms.ValidationError(gettext("The file must hold a JSON list of cases."))
        if not documents:
            raise forms.ValidationError(gettext("The file holds no case."))
        return documents


_JSON_FIELD_HELP = {
    "provided_entities": help_with_code(
        gettext_lazy("Values the plan may use, e.g. {example}."),
        example='{"orderNo": "ORD-1001"}',
    ),
    "assertions": help_with_code(
        gettext_lazy("A list like {list} or an object like {object}."),
        list='[{"type": "selected_target", "equals": "getOrderDetail"}]',
        object='{"selected_target": "getOrderDetail", "allowed_failure_reasons": []}',
    ),
    "cleanup": help_with_code(
        gettext_lazy("Execute cases that mutate: {example}."),
        example='[{"tool": "cancelRefund", "args": {"refundId": "${createRefund.refundId}"}}]',
    ),
}
# CaseSpecError.field ("assertions[2].type", "cleanup[0].tool", "id") -> the form's field.
_FORM_FIELD_FOR_CASE_FIELD = {"id": "case_id", "case": "__all__"}


class CaseForm(forms.Form):
    """A case in the documented schema; the engine's own validation names the bad field."""

    case_id = forms.CharField(
        label=gettext_lazy("id"),
        max_length=120,
        help_text=gettext_lazy("Letters, digits and '_.:-'; unique per collection."),
    )
    mode = forms.ChoiceField(label=gettext_lazy("Mode"), choices=CaseMode.choices)
    query = forms.CharField(
        label=gettext_lazy("Query"),
        # A user's words, in whatever language they typed them: never translated.
        widget=forms.Textarea(attrs={"rows": 2, "translate": "no"}),
        max_length=2000,
    )
    expected_target = forms.CharField(
        label=gettext_lazy("Expected target"),
        required=False,
        max_length=200,
        help_text=gettext_lazy("The operationId the case should end at."),
    )
    expected_top_k = forms.IntegerField(
        min_value=1, max_value=50, initial=5, label=gettext_lazy("Top-K")
    )
    llm_target = forms.CharField(
        required=False,
        max_length=200,
        label=gettext_lazy("LLM target"),
        help_text=gettext_lazy(
            "What an LLM proposed (plan and execute): checks that the selector overrides "
            "a wrong one."
        ),
    )
    mutation_safety = forms.ChoiceField(
        label=gettext_lazy("Mutation safety"),
        choices=[("read_only", "read_only"), ("mutating", "mutating")],
        initial="read_only",
    )
    timeout_sec = forms.FloatField(
        required=False, min_value=0.1, max_value=300, initial=10.0,
        label=gettext_lazy("Timeout (s)"),
        help_text=gettext_lazy("Execute mode: per HTTP call."),
    )  # fmt: skip
    auth_session = forms.CharField(
        required=False,
        max_length=60,
        label=gettext_lazy("Auth session"),
        help_text=gettext_lazy(
            "Execute mode: which session of the collection's auth profile to call as. "
            "Empty: the default one."
        ),
    )
    description = forms.CharField(
        label=gettext_lazy("Description"),
        required=False,
        max_length=500,
        help_text=gettext_lazy("Why the case exists, for whoever reads it."),
    )
    provided_entities = forms.CharField(
        label=gettext_lazy("Provided entities"),
        required=False,
        widget=forms.Textarea(attrs={"rows": 2, "spellcheck": "false", "class": "code"}),
        help_text=_JSON_FIELD_HELP["provided_entities"],
    )
    assertions = forms.CharField(
        label=gettext_lazy("Assertions"),
        required=False,
        widget=forms.Textarea(attrs={"rows": 4, "spellcheck": "false", "class": "code"}),
        help_text=_JSON_FIELD_HELP["assertions"],
    )
    cleanup = forms.CharField(
        label=gettext_lazy("Cleanup"),
        required=False,
        widget=forms.Textarea(attrs={"rows": 2, "spellcheck": "false", "class": "code"}),
        help_text=_JSON_FIELD_HELP["cleanup"],
    )
    active = forms.BooleanField(label=gettext_lazy("Active"), required=False, initial=True)

    def __init__(
        self,
        *args: Any,
        collection: Collection | None = None,
        editing: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.target_collection = collection
        self.editing = editing
        if editing:
            # Saving goes by id: a changed id would make a second case, not rename this one.
            self.fields["case_id"].disabled = True

    def check_new_id(self, collection: Collection | None) -> None:
        case_id = self.cleaned_data.get("case_id")
        if self.editing or collection is None or not case_id:
            return
        if collection.cases.filter(case_id=case_id).exists():
            self.add_error(
                "case_id",
                gettext("%(collection)s already has a case %(case)s; edit that one.")
                % {"collection": collection.name, "case": case_id},
            )

    @classmethod
    def initial_for(cls, case: QualityCase) -> dict[str, Any]:
        def dump(value: Any) -> str:
            return json.dumps(value, ensure_ascii=False, indent=1) if value else ""

        return {
            "case_id": case.case_id,
            "mode": case.mode,
            "query": case.query,
            "expected_target": case.expected_target,
            "expected_top_k": case.expected_top_k,
            "llm_target": case.llm_target,
            "mutation_safety": case.mutation_safety or "read_only",
            "timeout_sec": case.timeout_sec,
            "provided_entities": dump(case.provided_entities),
            "assertions": dump(case.assertions),
            "cleanup": dump(case.cleanup),
            "auth_session": case.auth_session,
            "description": case.description,
            "active": case.active,
        }

    def _json(self, name: str) -> Any:
        raw = (self.cleaned_data.get(name) or "").strip()
        if not raw:
            return None
        try:
            return loads_bounded(raw, max_depth=settings.TRIAGE_JSON_MAX_DEPTH)
        except JSONTooDeep as exc:
            raise forms.ValidationError(
                gettext("This value is nested deeper than %(limit)d levels of arrays and objects.")
                % {"limit": exc.limit}
            ) from None
        except json.JSONDecodeError as exc:
            raise forms.ValidationError(
                gettext("Not JSON: line %(line)d, column %(column)d: %(problem)s.")
                % {"line": exc.lineno, "column": exc.colno, "problem": exc.msg}
            ) from None
        except ValueError:  # an integer of more digits than Python converts
            raise forms.ValidationError(
                gettext("Not JSON: an integer of more than 4300 digits.")
            ) from None

    def clean_provided_entities(self) -> Any:
        return self._json("provided_entities")

    def clean_assertions(self) -> Any:
        return self._json("assertions")

    def clean_cleanup(self) -> Any:
        return self._json("cleanup")

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        self.check_new_id(data.get("collection") or self.target_collection)
        if self.errors:
            return data
        try:
            engine.CaseSpec.from_json(self.document())
        except engine.CaseSpecError as exc:
            self.add_case_error(exc)
        return data

    def add_case_error(self, error: engine.CaseSpecError) -> None:
        base = re.split(r"[.\[]", error.field, maxsplit=1)[0]
        name = _FORM_FIELD_FOR_CASE_FIELD.get(base, base)
        if name != "__all__" and name not in self.fields:
            name = "__all__"
        message = f"{error.field}: {error.translated(gettext)}"
        self.add_error(None if name == "__all__" else name, message)

    def document(self) -> dict[str, Any]:
        """The case in the documented schema (what services.case_save takes)."""
        data = self.cleaned_data
        document: dict[str, Any] = {
            "id": data["case_id"],
            "mode": data["mode"],
            "query": data["query"],
            "expected_top_k": data["expected_top_k"],
            "mutation_safety": data["mutation_safety"],
        }
        for name in ("expected_target", "llm_target", "auth_session", "description"):
            if data.get(name) and data[name].strip():
                document[name] = data[name].strip()
        if data.get("timeout_sec") is not None:
            document["timeout_sec"] = data["timeout_sec"]
        for name in ("provided_entities", "assertions", "cleanup"):
            if data.get(name) is not None:
                document[name] = data[name]
        return document


def _refuse_nul(values: Any, error: Any) -> None:
    """No database column holds NUL, and PostgreSQL refuses a query that sends one: such a
    choice is no choice, answered as a form error rather than a database error."""
    texts = values if isinstance(values, (list, tuple)) else [values]
    if any(isinstance(text, str) and "\x00" in text for text in texts):
        raise forms.ValidationError(error, code="invalid_choice")


class ChoiceByTextField(forms.ModelChoiceField):
    """A row chosen by a text column (a name, a case id)."""

    def to_python(self, value: Any) -> Any:
        _refuse_nul(value, self.error_messages["invalid_choice"])
        return super().to_python(value)


class ChoicesByTextField(forms.ModelMultipleChoiceField):
    """Rows chosen by a text column (case ids)."""

    def clean(self, value: Any) -> Any:
        _refuse_nul(value, self.error_messages["invalid_choice"] % {"value": "\\x00"})
        return super().clean(value)


class CaseFromGroupForm(CaseForm):
    """A new case from a failure group: the person also picks the collection, among those
    they see (another team's is no choice)."""

    collection = ChoiceByTextField(
        label=gettext_lazy("Collection"),
        queryset=Collection.objects.none(),
        to_field_name="name",
        empty_label=None,
    )

    field_order = ["collection", "case_id"]

    def __init__(self, *args: Any, user: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["collection"].queryset = Collection.objects.filter(  # type: ignore[attr-defined]
            visible_q(user, "name")
        ).only("pk", "name")


def _suite_case_label(case: QualityCase) -> str:
    query = case.query if len(case.query) <= 70 else case.query[:69] + "…"
    inactive = " " + gettext("(inactive)") if not case.active else ""
    return f"{case.case_id} · {case.mode}{inactive} · {query}"


class SuiteForm(forms.Form):
    name = forms.SlugField(label=gettext_lazy("Name"), max_length=100)
    description = forms.CharField(label=gettext_lazy("Description"), max_length=300, required=False)
    cases = ChoicesByTextField(
        label=gettext_lazy("Cases"),
        queryset=QualityCase.objects.none(),
        to_field_name="case_id",
        required=False,
        widget=forms.CheckboxSelectMultiple,
    )

    def __init__(self, *args: Any, collection: Collection, editing: bool = False, **kw: Any):
        super().__init__(*args, **kw)
        field = self.fields["cases"]
        field.queryset = collection.cases.only("pk", "case_id", "mode", "query", "active")  # type: ignore[attr-defined]
        field.label_from_instance = _suite_case_label  # type: ignore[attr-defined]
        if editing:
            self.fields["name"].disabled = True  # saving goes by name


class RunCompareForm(forms.Form):
    """Which run the run page compares with (`?compare=ID`); blank: the default."""

    compare = forms.IntegerField(
        label=gettext_lazy("Compare with run"), required=False, min_value=1, max_value=MAX_ID
    )


class RunStartForm(forms.Form):
    suite = ChoiceByTextField(
        label=gettext_lazy("Suite"),
        queryset=Suite.objects.none(),
        to_field_name="name",
        required=False,
        empty_label=gettext_lazy("all active cases"),
    )
    mode = forms.ChoiceField(
        label=gettext_lazy("Mode"),
        choices=[("", gettext_lazy("every mode")), *CaseMode.choices],
        required=False,
    )
    repeat = forms.IntegerField(
        label=gettext_lazy("Repeat"),
        min_value=1,
        max_value=50,
        initial=1,
        help_text=gettext_lazy("Run each case this many times (1-50) to expose flaky cases."),
    )

    def __init__(self, *args: Any, collection: Collection, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["suite"].queryset = collection.suites.only("pk", "name")  # type: ignore[attr-defined]
