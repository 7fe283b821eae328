"""Running test work in threads that start together, each on its own connection."""

from __future__ import annotations

import threading
from collections.abc import Callable

from django.db import connection


def run_together(*work: Callable[[], object]) -> None:
    """Run each callable in a thread of its own, released at the same moment; re-raise the
    first error any of them met (after all have finished). Each closes its connection."""
    barrier = threading.Barrier(len(work))
    errors: list[BaseException] = []

    def run(one: Callable[[], object]) -> None:
        try:
            barrier.wait()
            one()
        except BaseException as exc:  # re-raised in the test's thread
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(one,)) for one in work]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
