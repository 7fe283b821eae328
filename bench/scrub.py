"""The scrubber's cost on hostile text, as ratios against ordinary text in the same run.

    .venv/bin/python bench/scrub.py [--kilobytes 100] [--rounds 3]

For every shape in :data:`HOSTILE_SHAPES` (digit runs with the separators the card and
phone patterns try, token prefixes, encodings, escapes, key/value pairs, ...) one item
body is built holding ``--kilobytes`` of that text in strings of 1,000 chars, and one
holding twice as much. Each is scrubbed with ``scrub_payload`` (best of ``--rounds``),
and the table shows per shape:

* ``us/char``: microseconds per input character at the larger size;
* ``x ordinary``: that cost against ordinary log text of the same size, measured in the
  same rounds (so a busy machine slows both);
* ``2x size``: time at twice the size over time at the size (2.0 is linear);
* ``work/char``: the scrubber's deterministic work counter (characters scanned, see
  ``triage.scrub._WorkMeter``) per input character; the budget refuses an item above
  ``WORK_PER_INPUT_CHAR`` (plus a flat allowance) with ``scrub_failed``;
* ``refused``: whether the item was refused by that budget.

Targets (reported, not raised): every shape within 2.5x of linear when its size doubles,
and at most 25x the per-char cost of ordinary text.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

STRING_CHARS = 1_000


def _repeat(unit: str) -> Callable[[int], str]:
    return lambda size: (unit * (size // len(unit) + 1))[:size]


# Each makes a string of exactly `size` chars.
HOSTILE_SHAPES: dict[str, Callable[[int], str]] = {
    "ordinary log text": _repeat(
        "Payment failed for order ORD-2026-000123 at 2026-11-29T20:16:13Z: upstream said no. "
    ),
    '"1 1 1 ..."': _repeat("1 "),
    '"4 4 4 ..."': _repeat("4 "),
    '"0 0 0 ..."': _repeat("0 "),
    '"2 3 2 3 ..."': _repeat("2 3 "),
    '"1-1-1-..."': _repeat("1-"),
    '"+1+1+1..."': _repeat("+1"),
    '"+1 +1 ..."': _repeat("+1 "),
    '"1.1.1..."': _repeat("1."),
    '"(1) (1) ..."': _repeat("(1) "),
    '"010 010 ..."': _repeat("010 "),
    "digits only": _repeat("4"),
    "card numbers": _repeat("4111 1111 1111 1111 "),
    "near-cards": _repeat("4111111111111112 "),
    '"a.a.a...@"': lambda size: _repeat("a.")(size - 1) + "@",
    '"sk-sk-sk-..."': _repeat("sk-"),
    '"token token ..."': _repeat("token "),
    '"Basic a..."': _repeat("Basic a"),
    '"bearer ..."': _repeat("bearer "),
    '"eyJ..."': _repeat("eyJaaaaa."),
    '"password=..."': _repeat("password="),
    '"password": "...': _repeat('"password": "'),
    '"%41%41..."': _repeat("%41"),
    '"\\n\\n..."': _repeat("\\n"),
    '"\\u0031 ..."': _repeat("\\u0031 "),
    '"a+a+a..."': _repeat("a+"),
    "IBAN-like": _repeat("GB82 WEST "),
    "upper-case key-like": _repeat("AAAAAAAAAA"),
    "secrets, encoded and escaped": _repeat("4111 1111 %2B1 \\n password=x user@x.io Bearer abc "),
}


def body_of(make: Callable[[int], str], total_chars: int) -> dict[str, Any]:
    """One item body holding `total_chars` of the shape in strings of STRING_CHARS."""
    strings = [make(STRING_CHARS) for _ in range(total_chars // STRING_CHARS)]
    return {
        "message": "hostile text",
        "evidence": {
            "lines": strings[:150],
            "fields": {f"field_{index}": text for index, text in enumerate(strings[150:])},
        },
    }


def scrub_with_work(body: dict[str, Any]) -> tuple[int, bool]:
    """(characters of work the scrubber counted, whether the budget refused the body)."""
    from triage import scrub

    meters: list[Any] = []

    class RecordingMeter(scrub._WorkMeter):
        def __init__(self) -> None:
            super().__init__()
            meters.append(self)

    original = scrub._WorkMeter
    scrub._WorkMeter = RecordingMeter  # type: ignore[misc]
    try:
        scrub._CLEAN_STRINGS.clear()
        try:
            scrub.scrub_payload(body, hash_key=b"bench-key")
            refused = False
        except scrub.ScrubError:
            refused = True
    finally:
        scrub._WorkMeter = original  # type: ignore[misc]
    return meters[0].spent, refused


def _best_time(body: dict[str, Any], rounds: int) -> float:
    from triage import scrub

    best = float("inf")
    for _ in range(rounds):
        scrub._CLEAN_STRINGS.clear()
        started = time.perf_counter()
        with contextlib.suppress(scrub.ScrubError):
            scrub.scrub_payload(body, hash_key=b"bench-key")
        best = min(best, time.perf_counter() - started)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kilobytes", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    small_chars = args.kilobytes * 1_000
    print(f"load average {os.getloadavg()[0]:.2f}; {args.kilobytes} KB and twice that per item")
    rows = []
    for name, make in HOSTILE_SHAPES.items():
        small, large = body_of(make, small_chars), body_of(make, 2 * small_chars)
        small_time, large_time = _best_time(small, args.rounds), _best_time(large, args.rounds)
        work, refused = scrub_with_work(large)
        rows.append((name, small_time, large_time, work, refused))
    ordinary = rows[0][2] / (2 * small_chars)
    print(
        f"{'shape':32s} {'us/char':>8s} {'x ordinary':>10s} {'2x size':>8s} "
        f"{'work/char':>9s} {'refused':>7s}  target"
    )
    for name, small_time, large_time, work, refused in rows:
        per_char = large_time / (2 * small_chars)
        growth = large_time / small_time
        against = per_char / ordinary
        verdict = "PASS" if growth <= 2.5 and against <= 25 else "MISS"
        print(
            f"{name:32s} {per_char * 1e6:8.3f} {against:10.1f} {growth:8.2f} "
            f"{work / (2 * small_chars):9.2f} {'yes' if refused else 'no':>7s}  {verdict}"
        )
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
