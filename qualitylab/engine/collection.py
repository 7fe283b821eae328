"""A built collection loaded into graph-tool-call (:class:`LoadedCollection`), cached per
process by its artifact hash (:func:`engine_for`, an LRU of :data:`ENGINE_CACHE_SIZE`)."""

from __future__ import annotations

import json
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from graph_tool_call import ToolGraph
from graph_tool_call.core.tool import ToolSchema
from graph_tool_call.graphify import retrieve_graphify
from graph_tool_call.plan import PathSynthesizer, Plan

from qualitylab.engine.cases import CaseSpec, check_case_tools
from qualitylab.engine.spec import GRAPH_TOOL_CALL_VERSION

ENGINE_CACHE_SIZE = 8


@dataclass(eq=False)
class LoadedCollection:
    """A collection artifact loaded into graph-tool-call, shared by the cases of a worker."""

    artifact_hash: str
    graph: ToolGraph = field(repr=False)
    tools: dict[str, dict[str, Any]] = field(repr=False)
    tool_schemas: dict[str, ToolSchema] = field(repr=False)
    synthesizer: PathSynthesizer = field(repr=False)
    graph_tool_call_version: str
    _synthesis_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def tool_names(self) -> list[str]:
        return sorted(self.tools)

    def check_case(self, case: CaseSpec) -> None:
        """Raise CaseSpecError when the case names a tool this collection does not have."""
        check_case_tools(case, self.tools)

    def synthesize(self, *, target: str, entities: Mapping[str, Any], goal: str) -> Plan:
        # PathSynthesizer keeps per-call diagnostics on the instance: one call at a time.
        with self._synthesis_lock:
            return self.synthesizer.synthesize(target=target, entities=dict(entities), goal=goal)


_engine_cache: OrderedDict[str, LoadedCollection] = OrderedDict()
_engine_cache_lock = threading.Lock()


def engine_for(artifact: Mapping[str, Any], artifact_hash: str) -> LoadedCollection:
    """The loaded collection for ``artifact_hash``, loading ``artifact`` on a cache miss."""
    with _engine_cache_lock:
        cached = _engine_cache.get(artifact_hash)
        if cached is not None:
            _engine_cache.move_to_end(artifact_hash)
            return cached
        loaded = _load_collection(artifact, artifact_hash)
        _engine_cache[artifact_hash] = loaded
        while len(_engine_cache) > ENGINE_CACHE_SIZE:
            _engine_cache.popitem(last=False)
        return loaded


def clear_engine_cache() -> None:
    """Forget every loaded collection (tests; a worker never needs it)."""
    with _engine_cache_lock:
        _engine_cache.clear()


def _load_collection(artifact: Mapping[str, Any], artifact_hash: str) -> LoadedCollection:
    # ToolGraph.load is the documented way back from an artifact and takes a path.
    with tempfile.TemporaryDirectory(prefix="qualitylab-") as directory:
        path = Path(directory) / "collection.json"
        path.write_text(json.dumps(artifact, ensure_ascii=False, default=str), encoding="utf-8")
        graph = ToolGraph.load(path)
    tools = {
        str(name): cast(dict[str, Any], tool)
        for name, tool in (artifact.get("tools") or {}).items()
        if isinstance(tool, dict)
    }
    synthesizer = PathSynthesizer({"graph": artifact.get("graph") or {}, "tools": tools})
    retrieve_graphify(graph, "warm up", top_k=1)  # builds the BM25 index once, up front
    return LoadedCollection(
        artifact_hash=artifact_hash,
        graph=graph,
        tools=tools,
        tool_schemas=graph.tools,
        synthesizer=synthesizer,
        graph_tool_call_version=GRAPH_TOOL_CALL_VERSION,
    )
