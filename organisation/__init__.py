"""The organisation: teams, who belongs to them with which role, which collections each team
owns, and the audit of people's actions.

It sits beside the shared core, below every app: triage, learning, Quality Lab, alerts,
contracts and fixes all ask it who may see and do what (`organisation.access`), and record
people's actions through it (`organisation.audit`). It imports Django, the standard library
and the shared core only (tests/test_architecture.py).
"""
