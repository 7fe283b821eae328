"""What Quality Lab tells other apps, without importing them."""

from __future__ import annotations

from django.dispatch import Signal

# Sent when a run ends (done, cancelled or failed), after its status is stored: `run`.
run_finished = Signal()
