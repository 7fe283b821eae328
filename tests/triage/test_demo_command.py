"""The demo launcher stops what it started, even when the stop signal comes twice."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

from triage.management.commands.demo import _interrupt, stop_processes

STUBBORN = (
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "print('ready', flush=True); time.sleep(60)"
)


def test_a_second_stop_signal_does_not_leave_a_child_running() -> None:
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    child = subprocess.Popen([sys.executable, "-c", STUBBORN], stdout=subprocess.PIPE)
    polite = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    # make forwards SIGTERM to its child while the process group gets it too.
    second_signal = threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGTERM))
    try:
        assert child.stdout is not None and child.stdout.readline() == b"ready\n"
        signal.signal(signal.SIGTERM, _interrupt)
        second_signal.start()
        started = time.monotonic()
        stop_processes([child, polite], grace_seconds=2.0)
        second_signal.join()  # delivered while stopping, so ignored
        assert time.monotonic() - started < 20
        assert child.poll() == -signal.SIGKILL
        assert polite.poll() == -signal.SIGTERM
    finally:
        second_signal.cancel()
        if second_signal.is_alive():
            second_signal.join()
        for process in (child, polite):
            if process.poll() is None:
                process.kill()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
