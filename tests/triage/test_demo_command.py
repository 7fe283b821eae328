"""The demo launcher stops what it started, even when the stop signal comes twice."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

from triage.management.commands.demo import _interrupt, stop_processes

STUBBORN = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"


def test_a_second_stop_signal_does_not_leave_a_child_running() -> None:
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    child = subprocess.Popen([sys.executable, "-c", STUBBORN])
    polite = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        time.sleep(0.3)  # the stubborn child has installed its SIG_IGN
        signal.signal(signal.SIGTERM, _interrupt)
        # make forwards SIGTERM to its child while the process group gets it too.
        threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGTERM)).start()
        started = time.monotonic()
        stop_processes([child, polite], grace_seconds=1.0)
        assert time.monotonic() - started < 10
        assert child.poll() == -signal.SIGKILL
        assert polite.poll() == -signal.SIGTERM
    finally:
        for process in (child, polite):
            if process.poll() is None:
                process.kill()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
