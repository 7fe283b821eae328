"""The scrubber's cost on hostile text, as ratios against ordinary text in the same run.

    .venv/bin/python bench/scrub.py [--kilobytes 100] [--rounds 3] [--strict]

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

Before a shape is timed, both of its bodies are scrubbed once and checked
(``bench/verdict.py``): ordinary text and near-cards (not Luhn-valid) come out unchanged,
the planted card numbers and email addresses do not come out at all. A shape that fails
its check is BROKEN: not timed, its target MISS, and the run exits 2. A shape the budget
refuses at either size is not timed either (its time would be the refusal's, which stops
early, not the scrubber's) and its target is MISS: the scrubber did not scrub it.

Targets: every shape scrubbed (not refused), within 2.5x of linear when its size doubles,
and at most 25x the per-char cost of ordinary text. A missed target exits 1 with
``--strict``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.verdict import Verdicts, add_strict_argument, ratio  # noqa: E402

STRING_CHARS = 1_000
TARGET_GROWTH = 2.5  # time at twice the size over time at the size
TARGET_AGAINST_ORDINARY = 25.0
ORDINARY = "ordinary log text"


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


# The scrubbed text of these must be the text sent (nothing in them is a secret) ...
UNCHANGED = frozenset({ORDINARY, "near-cards"})
# ... and none of these planted values may come out of the scrubber.
PLANTED = {
    "card numbers": "4111 1111 1111 1111",
    "secrets, encoded and escaped": "user@x.io",
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


def scrub_with_work(body: dict[str, Any]) -> tuple[int, bool, Any]:
    """(characters of work the scrubber counted, whether the budget refused the body, the
    scrubbed body or None)."""
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
            out = scrub.scrub_payload(body, hash_key=b"bench-key")
            refused = False
        except scrub.ScrubError:
            out, refused = None, True
    finally:
        scrub._WorkMeter = original  # type: ignore[misc]
    return (meters[0].spent if meters else 0), refused, out


def shape_problems(name: str, body: dict[str, Any], out: Any) -> list[str]:
    """What is wrong with the scrubber's output for a body of this shape (None: refused,
    judged as a miss, not here)."""
    if out is None:
        return []
    size = sum(len(text) for text in body["evidence"]["lines"]) + sum(
        len(text) for text in body["evidence"]["fields"].values()
    )
    if name in UNCHANGED and out != body:
        return [f"{size:,} chars: text with no secret in it came out changed"]
    planted = PLANTED.get(name)
    if planted and planted in repr(out):
        return [f"{size:,} chars: the planted {planted!r} came out of the scrubber"]
    return []


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


@dataclass
class Row:
    name: str
    refused_at: list[str]  # the sizes at which the budget refused the body
    small_time: float = 0.0
    large_time: float = 0.0
    work: int = 0

    @property
    def refused(self) -> bool:
        return bool(self.refused_at)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kilobytes", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    add_strict_argument(parser)
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    small_chars = args.kilobytes * 1_000
    print(f"load average {os.getloadavg()[0]:.2f}; {args.kilobytes} KB and twice that per item")
    verdicts = Verdicts()
    rows: dict[str, Row] = {}
    for name, make in HOSTILE_SHAPES.items():
        small, large = body_of(make, small_chars), body_of(make, 2 * small_chars)
        # Checked before it is timed: the output right, or the body refused by the budget.
        _, small_refused, small_out = scrub_with_work(small)
        work, large_refused, large_out = scrub_with_work(large)
        checked = verdicts.check(
            name, shape_problems(name, small, small_out) + shape_problems(name, large, large_out)
        )
        refused_at = [
            f"{chars // 1000} KB"
            for chars, refused in ((small_chars, small_refused), (2 * small_chars, large_refused))
            if refused
        ]
        row = rows[name] = Row(name, refused_at, work=work)
        if checked and not row.refused:
            row.small_time = _best_time(small, args.rounds)
            row.large_time = _best_time(large, args.rounds)
    print(
        f"{'shape':32s} {'us/char':>8s} {'x ordinary':>10s} {'2x size':>8s} "
        f"{'work/char':>9s} {'refused':>7s}"
    )
    ordinary = rows[ORDINARY].large_time / (2 * small_chars)
    for row in rows.values():
        work_per_char = f"{row.work / (2 * small_chars):9.2f}"
        if not row.large_time:  # broken or refused: not timed
            untimed = f"{'-':>8s} {'-':>10s} {'-':>8s}"
            print(f"{row.name:32s} {untimed} {work_per_char} {_yes(row.refused):>7s}")
            continue
        per_char = row.large_time / (2 * small_chars)
        against = ratio(per_char, ordinary)
        print(
            f"{row.name:32s} {per_char * 1e6:8.3f} {_times(against):>10s} "
            f"{row.large_time / row.small_time:8.2f} {work_per_char} {_yes(row.refused):>7s}"
        )
    for row in rows.values():
        verdicts.target(
            row.name,
            needs=[row.name, ORDINARY],
            judge=partial(judge, row, ordinary, small_chars),
        )
    print(f"load average {os.getloadavg()[0]:.2f}")
    return verdicts.exit_status(strict=args.strict, results_dir=args.results_dir, bench="scrub")


def judge(row: Row, ordinary: float, small_chars: int) -> tuple[bool, str]:
    if row.refused:
        return False, (
            f"{row.name}: refused by the work budget (scrub_failed) at "
            f"{' and '.join(row.refused_at)}, so not scrubbed; its time would be the refusal's"
        )
    growth = row.large_time / row.small_time
    against = ratio(row.large_time / (2 * small_chars), ordinary)
    if against is None:
        return False, f"{row.name}: ordinary text measured nothing to compare with"
    met = growth <= TARGET_GROWTH and against <= TARGET_AGAINST_ORDINARY
    return met, (
        f"{row.name}: {growth:.2f}x the time at twice the size (target <= {TARGET_GROWTH}), "
        f"{against:.1f}x ordinary text per char (target <= {TARGET_AGAINST_ORDINARY:.0f})"
    )


def _yes(value: bool) -> str:
    return "yes" if value else "no"


def _times(value: float | None) -> str:
    return f"{value:.1f}" if value is not None else "-"


if __name__ == "__main__":
    sys.exit(main())
