"""A runtime that reports failures until it is killed (run as a script by test_live_desk).

    python reporting_process.py URL KEY SPOOL_DIR START COUNT

Reports items START..COUNT-1 (ids and bodies derived from the number, so a number reported
again is the same item) and prints each number once its report() has returned.
"""

from __future__ import annotations

import sys
import time

from triage_desk_client import Reporter

REASONS = (
    ("execute", "http_5xx", "getDelivery"),
    ("synthesize", "unsatisfied_field", "getOrderDetail"),
    ("bind_request", "missing_required_field", "createRefund"),
)


def item(number: int) -> dict[str, object]:
    stage, reason, tool = REASONS[number % len(REASONS)]
    return {
        "stage": stage,
        "reason": reason,
        "tool": tool,
        "collection": "kill-test",
        "plan_id": f"plan-{number}",
        "message": f"failure number {number}",
        "evidence": {"number": number},
    }


def main() -> None:
    url, key, spool, start, count = sys.argv[1:6]
    reporter = Reporter(url, key, spool_dir=spool, batch_size=100, flush_interval=0.05)
    print("ready", flush=True)
    for number in range(int(start), int(count)):
        reporter.failure(item(number), id=f"kill-{number}")
        print(number, flush=True)
        if number % 10 == 0:
            time.sleep(0.01)  # a runtime does other work between failures
    reporter.close(timeout=30)
    print("closed", flush=True)


if __name__ == "__main__":
    main()
