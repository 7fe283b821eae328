"""Which environment variables a collection's auth profile may name as its credential.

A collection's auth profile names the worker's environment variable whose value execute
cases send (``secret_env``), never the value. Only variables an administrator declared as
Quality Lab credentials may be named, and each belongs to one collection:

- ``<PREFIX><SEGMENT>`` and ``<PREFIX><SEGMENT>__<SESSION>`` (``QUALITYLAB_CREDENTIAL_ENV_PREFIX``,
  default ``QUALITYLAB_SECRET_``), where ``SEGMENT`` is the collection's name in upper case
  with every run of other characters as one ``_`` (``shop`` -> ``SHOP``, ``checkout.v2``
  -> ``CHECKOUT_V2``). When several collections' names give the same segment, the oldest
  of them owns it: a new collection can never take over another's credential.
- ``COLLECTION:VARIABLE`` pairs listed in ``QUALITYLAB_CREDENTIAL_ENVS``, for names that give
  no segment or variables that must keep their name.

The desk's own settings (``DJANGO_SECRET_KEY``, ``DATABASE_URL``, ``REDIS_URL``,
``TRIAGE_HASH_KEY`` and every ``DJANGO_*``, ``TRIAGE_*``, ``CELERY_*``...) are refused
however they are declared. Pure Python: settings validate the declarations with it at
start-up, the services when a collection is saved, the worker when it reads a variable.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,99}\Z")
SESSION_SEPARATOR = "__"

# What config/settings.py reads (and the database and broker clients may read).
DESK_VARIABLES = frozenset(
    {
        "DATABASE_URL",
        "REDIS_URL",
        "DJANGO_SECRET_KEY",
        "DJANGO_SETTINGS_MODULE",
        "TRIAGE_HASH_KEY",
        "PGPASSWORD",
        "PGPASSFILE",
        "PGSERVICEFILE",
        "QUALITYLAB_EXECUTE_TIMEOUT_SECONDS",
        "QUALITYLAB_STALE_RUN_SECONDS",
        "QUALITYLAB_CREDENTIAL_ENV_PREFIX",
        "QUALITYLAB_CREDENTIAL_ENVS",
        "QUALITYLAB_ALLOWED_PRIVATE_HOSTS",
        "QUALITYLAB_MAX_RESPONSE_BYTES",
    }
)
DESK_PREFIXES = (
    "DJANGO_",
    "TRIAGE_",
    "CELERY_",
    "LEARNING_",
    "ALERTS_",
    "DATABASE_",
    "REDIS_",
)


def is_desk_variable(name: str) -> bool:
    """One of the desk's own settings: never a collection's credential."""
    upper = name.upper()
    return upper in DESK_VARIABLES or upper.startswith(DESK_PREFIXES)


def collection_segment(collection: str) -> str:
    """The part of a prefixed variable's name that names ``collection`` ("" when none)."""
    return re.sub(r"[^A-Z0-9]+", "_", collection.upper()).strip("_")


@dataclass(frozen=True)
class CredentialRules:
    """The administrator's declarations: a prefix and explicit (collection, variable) pairs."""

    prefix: str = "QUALITYLAB_SECRET_"
    declared: Mapping[str, frozenset[str]] = field(default_factory=dict)  # variable -> names

    @classmethod
    def parse(cls, *, prefix: str, declared: Iterable[str]) -> CredentialRules:
        """Checked declarations; ``ValueError`` says which one is wrong and why."""
        prefix = prefix.strip()
        if prefix:
            if not re.fullmatch(r"[A-Z][A-Z0-9_]{2,}_", prefix):
                raise ValueError(
                    f"the prefix {prefix!r} must be upper-case letters, digits and '_', at "
                    "least 4 characters, ending with '_'"
                )
            if prefix.startswith(DESK_PREFIXES) or any(
                name.startswith(prefix) for name in DESK_VARIABLES
            ):
                raise ValueError(f"the prefix {prefix!r} would cover the desk's own settings")
        pairs: dict[str, set[str]] = {}
        for entry in declared:
            collection, separator, variable = entry.strip().rpartition(":")
            collection, variable = collection.strip(), variable.strip()
            if not separator or not collection or not ENV_NAME_RE.match(variable):
                raise ValueError(f"{entry!r} is not COLLECTION:VARIABLE (e.g. shop:SHOP_API_TOKEN)")
            if is_desk_variable(variable):
                raise ValueError(f"{variable} is one of the desk's own settings")
            pairs.setdefault(variable, set()).add(collection)
        return cls(
            prefix=prefix,
            declared={variable: frozenset(names) for variable, names in pairs.items()},
        )

    def suggested_names(self, collection: str) -> str:
        segment = collection_segment(collection)
        if self.prefix and segment:
            return f"{self.prefix}{segment} (or {self.prefix}{segment}{SESSION_SEPARATOR}<SESSION>)"
        return (
            f"a variable an administrator lists in QUALITYLAB_CREDENTIAL_ENVS as {collection}:NAME"
        )

    def refusal(self, *, variable: str, collection: str, segment_owner: str) -> str | None:
        """Why ``collection`` may not name ``variable``, or ``None`` when it may.

        ``segment_owner`` is the oldest collection whose name gives the same segment as
        ``collection`` (``collection`` itself when there is none older).
        """
        if not ENV_NAME_RE.match(variable):
            return (
                "Give the name of an environment variable (letters, digits, '_'), "
                "not the secret itself."
            )
        if is_desk_variable(variable):
            return (
                f"{variable} is one of the desk's own settings: it can never be sent as a "
                "collection's credential."
            )
        owners = self.declared.get(variable)
        if owners is not None:
            if collection in owners:
                return None
            return (
                f"{variable} is declared in QUALITYLAB_CREDENTIAL_ENVS for "
                f"{', '.join(sorted(owners))}, not for {collection}."
            )
        segment = collection_segment(collection)
        if self.prefix and variable.startswith(self.prefix):
            named = variable[len(self.prefix) :].split(SESSION_SEPARATOR, 1)[0]
            if segment and named == segment:
                if segment_owner == collection:
                    return None
                return (
                    f"{variable} belongs to collection {segment_owner}, whose name gives the "
                    f"same {segment}: name {collection}'s credential in QUALITYLAB_CREDENTIAL_ENVS."
                )
            return (
                f"{variable} belongs to another collection: {collection} may name "
                f"{self.suggested_names(collection)}."
            )
        return (
            f"{variable} is not declared as a Quality Lab credential: name it "
            f"{self.suggested_names(collection)}."
        )


def profile_variables(auth_profile: Mapping[str, object] | None) -> dict[str, str]:
    """Every variable an auth profile names, by session ("default" for the profile's own)."""
    profile = auth_profile or {}
    variables: dict[str, str] = {}
    if profile.get("secret_env"):
        variables["default"] = str(profile["secret_env"])
    sessions = profile.get("sessions")
    if isinstance(sessions, Mapping):
        for name, source in sessions.items():
            if isinstance(source, Mapping) and source.get("secret_env"):
                variables[str(name)] = str(source["secret_env"])
    return variables
