"""The project-level demo (`manage.py demo`): it drives every app at once (triage's traffic,
the MCP runtime, the contracts demo, Quality Lab's suites, the alert sinks), so it lives above
them; each app keeps its own demo data (triage/demo_data.py, qualitylab/demo/, alerts/demo.py,
contracts/demo.py)."""
