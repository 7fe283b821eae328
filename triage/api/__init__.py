"""The triage app's read and act API (`/api/v1/`): failures, groups, the taxonomy, tool
policies and releases (`views.py`), with their input and output shapes (`serializers.py`).
The ingest doors are `triage/intake/`. Only `triage/urls.py` imports it.
"""
