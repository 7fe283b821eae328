"""The execute stage: mutation safety, base URL, allowed hosts and auth preflight before any
request, then the plan through ``PlanRunner`` over :class:`HttpAdapter`, and cleanup."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, cast

from graph_tool_call.execute.http_executor import HttpExecutor
from graph_tool_call.plan import BindingError, Plan, PlanRunner, PlanStep, resolve_bindings

from core import outbound
from qualitylab import assertions as case_assertions
from qualitylab.engine.cases import ExecutionContext
from qualitylab.engine.http_adapter import HostNotAllowedError, HttpAdapter, host_allowed
from qualitylab.engine.outcome import CaseRunState, failure_record, json_safe_outcome
from triage.intake.runner_events import failure_from_runner_event

_MUTATING_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})

# Which rule refused a call (evidence.blocked_by), by core.outbound's refusal code.
_BLOCKED_BY = {
    "scheme_not_allowed": "scheme",
    "host_not_allowed": "allowed_hosts",
    "address_not_allowed": "address",
    "redirect_refused": "redirect",
    "too_many_redirects": "redirect",
    "response_too_large": "response_size",
}

_MISSING: Any = object()


class ExecuteStage(CaseRunState):
    """What an execute case adds after plan synthesis: the checks, the calls, the cleanup."""

    # -- execution -------------------------------------------------------------------

    def execute(self, plan: Plan) -> None:
        case, execution = self.case, self.execution
        self.stage = "execute"
        mutating = [
            step.tool for step in plan.steps if self.method_of(step.tool) in _MUTATING_METHODS
        ]
        section: dict[str, Any] = {
            "plan_id": plan.id,
            "status": "not_run",
            "http_status": None,
            "mutating_tools": mutating,
            "mutation_safety": case.mutation_safety,
            "session": case.auth_session or "default",
            "calls": [],
            "events": [],
            "cleanup": {"status": "not_needed"},
            "json_paths": {},
        }
        self.outcome.execute = section
        # Mutation safety is a rule about the case and the collection's policy: judged
        # before anything that needs somewhere to call.
        self.check_mutation_safety(
            plan, mutating, execution.allow_mutations if execution is not None else None
        )
        if execution is None or not execution.base_url:
            self.fail(self.base_url_not_configured(plan, execution))
        timeout = float(min(case.timeout_sec or execution.timeout_sec, execution.timeout_sec))
        section["timeout_sec"] = timeout
        host = self.check_host(plan, execution)
        section["host"] = host
        headers = self.auth_preflight(plan, execution)
        section["status"] = "running"
        with self.timed("execute"):
            adapter = HttpAdapter(self.collection, execution.base_url, headers, timeout, execution)
            adapter.credential_headers = (
                execution.auth_profile.header_names if execution.auth_profile else ()
            )
            events, failure, trace_steps = self.run_plan(plan, adapter)
        section["calls"] = adapter.calls
        section["events"] = events
        target_tool = plan.steps[-1].tool if plan.steps else None
        target_call = adapter.last_response.get(target_tool or "")
        section["http_status"] = target_call.status if target_call else None
        section["status"] = "failed" if failure else "completed"
        section["json_paths"] = {
            path: _json_path_fact(target_call.body if target_call else _MISSING, path)
            for path in case.assertions.json_paths()
        }
        cleanup_failure = None
        if mutating and any(call.get("tool") in mutating for call in adapter.calls):
            cleanup_failure = self.cleanup(plan, trace_steps, adapter, mutating)
        if failure is not None:
            self.fail(failure)
        if cleanup_failure is not None:
            self.fail(cleanup_failure)

    def method_of(self, tool_name: str) -> str:
        metadata = (self.collection.tools.get(tool_name) or {}).get("metadata") or {}
        return str(metadata.get("method") or "").upper()

    def base_url_not_configured(
        self, plan: Plan, execution: ExecutionContext | None
    ) -> dict[str, Any]:
        """Nothing to call: a configuration gap of the collection, never a server bug."""
        # The spec's servers entry, when it has one: a relative "/v3" is why none was taken.
        spec_server = next(
            (
                url
                for tool in self.collection.tools.values()
                if isinstance(url := (tool.get("metadata") or {}).get("base_url"), str) and url
            ),
            None,
        )
        relative = spec_server is not None and not spec_server.startswith(("http://", "https://"))
        return failure_record(
            "execute",
            "base_url_not_configured",
            "Not called: the collection has no base URL"
            + (f" (the spec's server URL {spec_server!r} is relative)" if relative else "")
            + "; set one in its settings or import it with --base-url",
            tool=plan.steps[0].tool if plan.steps else None,
            plan_id=plan.id,
            evidence={
                "base_url_present": False,
                "spec_server_url": spec_server,
                "request_sent": False,
                "execution_context": execution is not None,
            },
            execution_state="not_started",
        )

    def check_mutation_safety(
        self, plan: Plan, mutating: list[str], allow_mutations: bool | None
    ) -> None:
        """``allow_mutations`` is ``None`` when the run has no execution context at all: the
        case's own rules (declared mutating, cleanup steps) are still judged."""
        if not mutating:
            return
        case = self.case
        unknown = [step.tool for step in case.cleanup if step.tool not in self.collection.tools]
        problem = None
        if case.mutation_safety != "mutating":
            problem = f"the plan calls {mutating[0]} but the case declares read_only"
        elif not case.cleanup:
            problem = f"the plan calls {mutating[0]} and the case has no cleanup steps"
        elif unknown:
            problem = f"cleanup step {unknown[0]} is not an operation of this collection"
        elif allow_mutations is False:
            problem = "this collection does not allow mutating cases"
        if problem is None:
            return
        self.fail(
            failure_record(
                "cleanup",
                "cleanup_not_configured",
                f"Mutating case not run: {problem}",
                tool=mutating[0],
                plan_id=plan.id,
                evidence={
                    "case_id": case.id,
                    "mutation_safety": case.mutation_safety,
                    "mutating_tools": mutating,
                    "cleanup_steps": [step.tool for step in case.cleanup],
                    "mutations_allowed": allow_mutations,
                },
                execution_state="not_started",
            )
        )

    def check_host(self, plan: Plan, execution: ExecutionContext) -> str | None:
        allowed, host = host_allowed(execution.base_url, execution.allowed_hosts)
        if not allowed:
            self.fail(
                failure_record(
                    "execute",
                    "network_error",
                    f"Not called: the base URL host {host or '(none)'} is not in the "
                    "collection's allowed hosts",
                    tool=plan.steps[0].tool if plan.steps else None,
                    plan_id=plan.id,
                    evidence={
                        "host": host,
                        "request_sent": False,
                        "blocked_by": "allowed_hosts",
                        "error_class": "HostNotAllowed",
                    },
                    execution_state="not_started",
                )
            )
        try:  # resolved now and every address checked; each call checks again
            outbound.check_url(
                execution.base_url,
                allowed_hosts=execution.allowed_hosts,
                private_allowed=outbound.PrivateAllowance.parse(execution.private_allowed),
            )
        except outbound.OutboundRefused as exc:
            self.fail(
                failure_record(
                    "execute",
                    "network_error",
                    f"Not called: {exc}",
                    tool=plan.steps[0].tool if plan.steps else None,
                    plan_id=plan.id,
                    evidence={
                        **exc.evidence,
                        "request_sent": False,
                        "blocked_by": "address",
                        "error_class": "AddressNotAllowed",
                    },
                    execution_state="not_started",
                )
            )
        except OSError:
            pass  # resolution failed: the call itself reports it as a network error
        return host

    def auth_preflight(self, plan: Plan, execution: ExecutionContext) -> dict[str, str]:
        case = self.case
        profile = execution.auth_profile
        needs = [
            (step.tool, schemes)
            for step in plan.steps
            if (schemes := self.security_schemes(step.tool)) is not None
        ]
        required = bool(needs) or bool(profile and profile.required)
        headers = execution.session_headers(case.auth_session)
        refused = execution.credential_refusals.get(case.auth_session or "default")
        readiness: dict[str, Any] = {
            "required": required,
            "source": "openapi_security" if needs else ("collection_policy" if required else None),
            "tools_requiring_auth": [tool for tool, _ in needs],
            "security_schemes": sorted({name for _, schemes in needs for name in schemes}),
            "auth_profile_id_present": profile is not None,
            "auth_token_present": bool(headers),
            "session": case.auth_session or "default",
            "session_station_attempted": required,
            "session_station_header_names": sorted(headers) if headers else [],
            "required_header_names": list(profile.header_names) if profile else [],
            "failure_reason": None,
        }
        self.outcome.auth_readiness = readiness
        if not required and refused is None:
            return headers or {}
        reason, message, missing = None, "", []
        if refused is not None:
            # The profile names a variable the desk may not send: never run as someone else.
            reason = "auth_header_resolution_failed"
            message = f"The credential was not read: {refused}"
            readiness["credential_refused"] = True
        elif profile is None:
            reason = "auth_profile_missing"
            message = "Auth is required but the collection has no auth profile"
        elif not headers:
            reason = "auth_context_required"
            message = f"Auth is required but there is no runtime session {readiness['session']!r}"
        else:
            present = {name.lower() for name, value in headers.items() if value}
            missing = [name for name in profile.header_names if name.lower() not in present]
            if not missing:
                missing = self.unsatisfied_schemes(needs, headers)
            if missing:
                reason = "auth_header_resolution_failed"
                message = "The session could not supply the auth headers: " + ", ".join(missing)
        if reason is None:
            return headers or {}
        readiness["failure_reason"] = reason
        if missing:
            readiness["missing_header_names"] = missing
        self.fail(
            failure_record(
                "auth_preflight",
                reason,
                message,
                tool=needs[0][0] if needs else None,
                plan_id=plan.id,
                evidence={
                    "auth_readiness": dict(readiness),
                    "auth_profile_id_present": readiness["auth_profile_id_present"],
                    "auth_token_present": readiness["auth_token_present"],
                    "session_station_header_names": readiness["session_station_header_names"],
                },
                execution_state="not_started",
            )
        )
        return {}

    def security_schemes(self, tool_name: str) -> list[str] | None:
        """Scheme names a tool requires, or None when it can be called anonymously."""
        openapi = ((self.collection.tools.get(tool_name) or {}).get("metadata") or {}).get(
            "openapi"
        ) or {}
        requirements = (openapi.get("security") or {}).get("requirements") or []
        if not requirements or any(req == {} for req in requirements):
            return None
        return sorted({str(name) for req in requirements if isinstance(req, dict) for name in req})

    def unsatisfied_schemes(
        self, needs: list[tuple[str, list[str]]], headers: Mapping[str, str]
    ) -> list[str]:
        # graph-tool-call's own security check, without building or sending a request.
        executor = HttpExecutor("http://preflight.invalid", headers=dict(headers))
        missing: list[str] = []
        for tool_name, _ in needs:
            diagnostics = executor.validate_request(self.collection.tool_schemas[tool_name], {})
            for requirement in diagnostics.get("missing_security") or []:
                for scheme in requirement.get("schemes") or []:
                    name = str(scheme.get("credential_name") or scheme.get("name") or "")
                    if name and name not in missing:
                        missing.append(name)
        return missing

    def run_plan(
        self, plan: Plan, adapter: HttpAdapter
    ) -> tuple[list[dict[str, Any]], dict[str, Any] | None, list[Any]]:
        runner = PlanRunner(adapter, on_error="abort")
        events: list[dict[str, Any]] = []
        failure: dict[str, Any] | None = None
        trace_steps: list[Any] = []
        metadata = {
            "source": "quality_lab",
            "case_id": self.case.id,
            "collection_hash": self.collection.artifact_hash[:16],
            "auth_readiness": _readiness_for_events(self.outcome.auth_readiness),
        }
        for event in runner.run_stream(
            plan, input_context=dict(self.case.provided_entities), trace_metadata=metadata
        ):
            if getattr(event, "type", "") in ("plan.completed", "plan.aborted"):
                trace_steps = list(getattr(event, "trace_steps", []) or [])
            error = getattr(event, "error", None)
            if isinstance(error, dict) and error.get("kind") == "tool":
                adapter.annotate_error(str(getattr(event, "tool", "") or ""), error)
            payload = _compact_event(event)
            events.append(payload)
            if failure is None:
                record = failure_from_runner_event(payload)
                if record is not None:
                    failure = self.execute_failure(record, adapter)
        return events, failure, trace_steps

    def execute_failure(self, record: Mapping[str, Any], adapter: HttpAdapter) -> dict[str, Any]:
        reason = str(record.get("reason") or "uncaught_server_error")
        evidence = dict(record.get("evidence") or {})
        if evidence.get("exception_type") == HostNotAllowedError.__name__:
            reason = "network_error"
            evidence.update({"request_sent": False, "blocked_by": "allowed_hosts"})
            record = {**record, "stage": "execute", "execution_state": "not_started"}
        refused = (adapter.last_call_for(str(record.get("tool") or "")) or {}).get("refused")
        if evidence.get("exception_type") == outbound.OutboundRefused.__name__ and refused:
            # Refused by the outbound policy: before sending (not_started), or after the
            # remote side answered (a redirect not followed, a body over the cap).
            sent = bool(refused.get("request_sent")) or refused["refused"] == "response_too_large"
            reason = "network_error"
            evidence.update(refused)
            evidence.update({"request_sent": sent, "blocked_by": _BLOCKED_BY[refused["refused"]]})
            evidence["error_class"] = outbound.OutboundRefused.__name__
            record = {
                **record,
                "stage": "execute",
                "execution_state": "completed" if sent else "not_started",
            }
        tool = record.get("tool")
        state = record.get("execution_state")
        call = adapter.last_call_for(str(tool or ""))
        if reason == "timeout" and call is not None:
            evidence["timeout_ms"] = int(adapter.timeout * 1000)
            evidence["elapsed_ms"] = call.get("elapsed_ms")
        if reason == "http_5xx" and state is None and tool:
            # DESIGN section 3: a 5xx on a read completed; on a write the outcome is unknown.
            write = self.method_of(str(tool)) in _MUTATING_METHODS
            state = "started_unknown" if write else "completed"
        if reason in ("auth_failed", "auth_context_required"):
            evidence["session_station_header_names"] = (self.outcome.auth_readiness or {}).get(
                "session_station_header_names", []
            )
            evidence["auth_profile_id_present"] = (self.outcome.auth_readiness or {}).get(
                "auth_profile_id_present"
            )
        evidence.pop("auth_readiness", None)  # kept once, in the auth_readiness section
        return failure_record(
            str(record.get("stage") or "execute"),
            reason,
            str(record.get("message") or reason),
            tool=str(tool) if tool else None,
            plan_id=record.get("plan_id"),
            step_id=record.get("step_id"),
            evidence=evidence,
            execution_state=str(state) if state else None,
        )

    # -- cleanup ---------------------------------------------------------------------

    def cleanup(
        self, plan: Plan, trace_steps: list[Any], adapter: HttpAdapter, mutating: list[str]
    ) -> dict[str, Any] | None:
        case = self.case
        section = cast(dict[str, Any], self.outcome.execute)
        completed = {
            str(getattr(step, "tool", "")): getattr(step, "output", None)
            for step in trace_steps
            if getattr(step, "error", None) is None
        }
        if not any(tool in completed for tool in mutating):
            section["cleanup"] = {
                "status": "skipped",
                "reason": "no mutating step completed, so there is nothing to undo",
            }
            return None
        context: dict[str, Any] = {
            "input": dict(case.provided_entities),
            "user_input": dict(case.provided_entities),
        }
        for step in trace_steps:
            output = getattr(step, "output", None)
            if getattr(step, "error", None) is None:
                context[str(getattr(step, "id", ""))] = output
                context[str(getattr(step, "tool", ""))] = output
        with self.timed("cleanup"):
            steps: list[PlanStep] = []
            failure = None
            for index, cleanup_step in enumerate(case.cleanup):
                try:
                    args = resolve_bindings(dict(cleanup_step.args), context)
                except BindingError:
                    failure = self.cleanup_failure(
                        plan,
                        cleanup_step.tool,
                        None,
                        "a cleanup argument binding did not resolve against the main run's outputs",
                        mutating,
                        error_kind="binding",
                    )
                    break
                steps.append(PlanStep(id=f"c{index + 1}", tool=cleanup_step.tool, args=args))
            cleanup_events: list[dict[str, Any]] = []
            calls_before = len(adapter.calls)
            if failure is None:
                cleanup_plan = Plan(id=f"{plan.id}:cleanup", goal="cleanup", steps=steps)
                for event in PlanRunner(adapter, on_error="abort").run_stream(
                    cleanup_plan, trace_metadata={"source": "quality_lab", "case_id": case.id}
                ):
                    error = getattr(event, "error", None)
                    if isinstance(error, dict) and error.get("kind") == "tool":
                        adapter.annotate_error(str(getattr(event, "tool", "") or ""), error)
                    payload = _compact_event(event)
                    cleanup_events.append(payload)
                    record = failure_from_runner_event(payload)
                    if record is not None and failure is None:
                        failure = self.cleanup_failure(
                            plan,
                            str(record.get("tool") or ""),
                            record.get("evidence", {}).get("http_status"),
                            str(record.get("message") or "cleanup step failed"),
                            mutating,
                            error_kind=str(record.get("reason") or ""),
                        )
        section["cleanup"] = {
            "status": "failed" if failure else "passed",
            "steps": [{"id": step.id, "tool": step.tool} for step in steps],
            "calls": adapter.calls[calls_before:],
            "events": cleanup_events,
            "failure": failure,
        }
        section["calls"] = adapter.calls[:calls_before]
        return failure

    def cleanup_failure(
        self,
        plan: Plan,
        tool: str,
        status: Any,
        message: str,
        mutating: list[str],
        *,
        error_kind: str,
    ) -> dict[str, Any]:
        return failure_record(
            "cleanup",
            "cleanup_failed",
            f"Cleanup failed: {message}",
            tool=tool or None,
            plan_id=plan.id,
            evidence={
                "case_id": self.case.id,
                "cleanup_step": tool,
                "http_status": status,
                "affected_targets": mutating,
                "error_kind": error_kind,
            },
        )


def _compact_event(event: Any) -> dict[str, Any]:
    """``dataclasses.asdict(event)`` with raw values replaced (no bodies, no arguments)."""
    data = dataclasses.asdict(event)
    if isinstance(data.get("args_resolved"), dict):
        data["args_resolved"] = dict.fromkeys(data["args_resolved"], "[omitted]")
    for key in ("output_preview", "output", "value_preview"):
        if key in data:
            data[f"{key}_shape"] = _shape(data[key])
            data[key] = None
    if isinstance(data.get("trace_steps"), list):
        data["trace_steps"] = [
            {
                key: step.get(key)
                for key in ("id", "tool", "error", "duration_ms", "retries")
                if isinstance(step, dict)
            }
            for step in data["trace_steps"]
        ]
    return cast(dict[str, Any], json_safe_outcome(data))


def _readiness_for_events(readiness: Mapping[str, Any] | None) -> dict[str, Any]:
    if not readiness:
        return {"required": False, "failure_reason": None}
    keys = (
        "required",
        "auth_profile_id_present",
        "auth_token_present",
        "session_station_header_names",
        "failure_reason",
    )
    return {key: readiness.get(key) for key in keys}


def _shape(value: Any, depth: int = 0) -> Any:
    """Type-level summary of a value: names and counts, never the value itself."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return {"type": "array", "length": len(value)}
    if isinstance(value, dict):
        keys = sorted(str(key) for key in value)[:20]
        return {"type": "object", "keys": keys}
    return type(value).__name__


def _json_path_fact(body: Any, path: str) -> dict[str, Any]:
    if body is _MISSING:
        return {"exists": None, "shape": None}
    values = case_assertions.json_path_values(body, path)
    return {
        "exists": bool(values),
        "count": len(values),
        "shape": _shape(values[0]) if values else None,
    }
