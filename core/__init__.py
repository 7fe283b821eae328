"""The shared core: the cross-cutting pieces every app uses, and which import no app.

The outbound address rule (`core.outbound`), the JSON depth limits (`core.json_limits`),
the collection-name rule and its form fields (`core.collection_names`, `core.fields`), the
htmx helpers (`core.http`), form-error wording (`core.drafts`) and the storable-text rules
(`core.storable`). Every app may import them; they import Django and the standard library
only (tests/test_architecture.py).
"""
