"""Session-wide fixtures for Quality Lab: the demo collection (built once), the sandbox API
on 127.0.0.1, and every demo case run once against both."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from qualitylab import demo, engine
from qualitylab.sandbox import SandboxServer, serve


@pytest.fixture(scope="session")
def demo_built() -> engine.BuiltArtifact:
    return engine.build_artifact(demo.load_spec())


@pytest.fixture(scope="session")
def demo_collection(demo_built: engine.BuiltArtifact) -> engine.LoadedCollection:
    return engine.engine_for(demo_built.artifact, demo_built.artifact_hash)


@pytest.fixture(scope="session")
def sandbox() -> Iterator[SandboxServer]:
    server, thread = serve(slow_seconds=3.0)
    yield server
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


@pytest.fixture(scope="session")
def demo_context(sandbox: SandboxServer) -> engine.ExecutionContext:
    return demo.demo_execution_context(sandbox.base_url)


@pytest.fixture(scope="session")
def demo_cases() -> dict[str, engine.CaseSpec]:
    return {case.id: case for case in demo.load_cases()}


@pytest.fixture(scope="session")
def demo_outcomes(
    demo_collection: engine.LoadedCollection,
    demo_context: engine.ExecutionContext,
    demo_cases: dict[str, engine.CaseSpec],
) -> dict[str, engine.CaseOutcome]:
    return {
        case_id: engine.run_case(demo_collection, case, execution=demo_context)
        for case_id, case in demo_cases.items()
    }
