"""The demo collection: an OpenAPI spec, its Quality Lab cases, and how to run them.

``shop_openapi.yaml`` is a small shop back office (21 operations); ``cases.json`` holds
33 cases across the three modes. Each case carries a ``demo_expectation`` (an extra key the
engine keeps in ``CaseSpec.extra`` and never reads) saying which outcome it is meant to
show; ``tests/qualitylab`` checks every case against it. The sandbox API
(``qualitylab.sandbox``) implements the spec on 127.0.0.1.

:func:`demo_execution_context` builds the run-time settings the demo cases assume: the
default session logs in with the sandbox's token, an ``expired`` session sends a token the
sandbox rejects (401), and no ``anonymous`` session exists (``auth_context_required``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from core import outbound
from qualitylab.engine import AuthProfile, CaseSpec, ExecutionContext, parse_spec
from qualitylab.sandbox import DEMO_TOKEN

DEMO_DIR = Path(__file__).resolve().parent
SPEC_PATH = DEMO_DIR / "shop_openapi.yaml"
CASES_PATH = DEMO_DIR / "cases.json"
EXPIRED_TOKEN = "expired-demo-token"


def load_spec() -> dict[str, Any]:
    return parse_spec(SPEC_PATH.read_text(encoding="utf-8"))


def load_case_data() -> list[dict[str, Any]]:
    data = json.loads(CASES_PATH.read_text(encoding="utf-8"))
    if not isinstance(data, list):
        raise ValueError("cases.json must hold a list of cases")
    return data


def load_cases() -> list[CaseSpec]:
    return [CaseSpec.from_json(item) for item in load_case_data()]


def demo_execution_context(base_url: str, *, timeout_sec: float = 10.0) -> ExecutionContext:
    """Settings for running the demo cases against a sandbox at ``base_url``."""
    _scheme, host, port = outbound.parse_url(base_url)
    return ExecutionContext(
        base_url=base_url,
        allowed_hosts=(host,),
        auth_headers={"Authorization": f"Bearer {DEMO_TOKEN}"},
        sessions={"expired": {"Authorization": f"Bearer {EXPIRED_TOKEN}"}},
        auth_profile=AuthProfile(header_names=("Authorization",)),
        timeout_sec=timeout_sec,
        allow_mutations=True,
        # The sandbox listens on loopback, which execute cases may call only when allowed:
        # its port, not the machine's other loopback services.
        private_allowed=(outbound.host_port(host, port),),
    )
