"""The verdict every benchmark gives: no figure from a path that did the wrong thing.

A benchmark measures paths (the fast ingest, the naive one, the worker, the plain engine
loop, a run of the incident bench...). Before a path's figures count, the benchmark checks
that the path did its work right: every answer what it should be, every row stored, the
same verdicts as its reference. Then each target is judged from checked paths only:

    verdicts = Verdicts()
    verdicts.check("fast", fast_problems)    # [] when the path did its work right
    verdicts.check("naive", naive_problems)
    verdicts.target(
        "fast / naive >= 3x",
        needs=("fast", "naive"),
        judge=lambda: (fast / naive >= 3, f"fast / naive {fast / naive:.2f}x >= 3x"),
    )
    return verdicts.exit_status(strict=args.strict)

- ``check`` prints ``BROKEN`` and the problems of a path that failed its check.
- ``target`` calls ``judge`` (which computes the figure) only when every path it needs was
  checked and passed; it prints ``PASS`` or ``MISS`` and the text. A target whose path
  failed, or was never checked, prints ``MISS ... not judged`` and its figure is never
  computed, so no ratio is ever printed from a broken path.
- ``exit_status``: 2 when a check failed, whatever ``--strict`` says (the run measured
  nothing); 1 when a target was missed and ``strict``; else 0.

``ratio`` divides without ever turning a missing baseline into 1: a zero or negative
denominator gives ``None``, which a judge reports as a miss.

A benchmark that names itself (``Verdicts(bench="ingest")``) writes its result when it
gives its exit status: ``bench/results/<bench>.json`` (``--results-dir`` elsewhere), with
each target's verdict and text, each path's check, the date, the commit and the machine
(cores, CPU model, load average, and a fixed piece of Python timed as the run ends:
``speed_probe_ms``). ``make bench-report`` (``bench/report.py``) turns the
newest result of each benchmark into the table of ``docs/benchmarks.md``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import NoReturn

EXIT_MET = 0
EXIT_MISSED = 1
EXIT_BROKEN = 2
# Problems printed per broken path (the rest are counted).
SHOWN_PROBLEMS = 5
RESULTS_DIR = Path(__file__).resolve().parent / "results"


def add_strict_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--strict",
        action="store_true",
        help="exit 1 when a target is missed (a path that fails its check exits 2 anyway)",
    )
    parser.add_argument(
        "--results-dir",
        type=Path,
        default=RESULTS_DIR,
        help="where the run's verdicts are written as <bench>.json (bench/results)",
    )


def below(value: float, limit: float) -> str:
    """``value`` with one decimal, or as many more as it takes not to read as ``limit`` when
    it is on the other side of it (99.97 against a target under 100 reads 99.97, not
    100.0)."""
    for decimals in range(1, 6):
        shown = f"{value:.{decimals}f}"
        if (float(shown) < limit) == (value < limit):
            return shown
    return f"{value:.6f}"


def machine() -> dict[str, object]:
    """What ran the benchmark: its cores, CPU model and load when the run ended."""
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = os.getloadavg() if hasattr(os, "getloadavg") else (0.0, 0.0, 0.0)
    return {
        "cores": os.cpu_count(),
        "cpu": model,
        "load_average": [round(x, 2) for x in load],
        "speed_probe_ms": speed_probe_ms(),
    }


def speed_probe_ms(rounds: int = 5) -> float:
    """How fast the machine was when the run ended: one fixed piece of pure Python (20,000
    rows made, sorted and written as table cells, as a page's rows are), its best time of
    ``rounds``. These machines' speed varies severalfold from day to day: a page's absolute
    figure reads against this one, measured by the same code on the same day (a smaller
    figure is a faster machine)."""
    best = math.inf
    for _ in range(rounds):
        started = time.perf_counter()
        rows = [(index * 7919 % 1000, f"row-{index}") for index in range(20_000)]
        rows.sort()
        "".join(f"<td>{count:,}</td><td>{name}</td>" for count, name in rows)
        best = min(best, time.perf_counter() - started)
    return round(best * 1000, 1)


def _git(*args: str) -> str:
    try:
        done = subprocess.run(
            ["git", *args],
            cwd=Path(__file__).resolve().parent,
            capture_output=True,
            text=True,
            check=False,
            timeout=5,
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout.strip()


def commit() -> str:
    """The commit measured, with "+changes" when the working tree differed from it."""
    head = _git("rev-parse", "--short", "HEAD")
    # The results benchmarks write are not the code they measured.
    dirty = _git(
        "status", "--porcelain", "--untracked-files=no", "--",
        ":(top)", ":(top,exclude)bench/results",
    )  # fmt: skip
    return head + ("+changes" if dirty else "")


def stop_broken(problem: str) -> NoReturn:
    """Stop a run whose path failed a check it cannot go on without (its warm-up, its load):
    BROKEN, exit 2, as a failed check at the end would."""
    print(f"BROKEN  {problem}", flush=True)
    raise SystemExit(EXIT_BROKEN)


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    """numerator / denominator, or None when either is missing or the denominator is not
    positive (a baseline that measured nothing is no baseline)."""
    if numerator is None or denominator is None or denominator <= 0:
        return None
    return numerator / denominator


@dataclass
class Verdicts:
    """The checks of a run's paths and the targets judged from them."""

    say: Callable[[str], None] = print
    problems: dict[str, list[str]] = field(default_factory=dict)
    judged: list[tuple[str, bool]] = field(default_factory=list)  # (label, met)
    bench: str = ""  # names the result file; "" writes none
    texts: list[str] = field(default_factory=list)  # each judged target's line

    def check(self, path: str, problems: Iterable[str]) -> bool:
        """Record the path's check (several calls add up: a path run N times is broken when
        any run was); True when this call found nothing wrong."""
        found = [problem for problem in problems if problem]
        self.problems.setdefault(path, []).extend(found)
        for problem in found[:SHOWN_PROBLEMS]:
            self.say(f"BROKEN  {path}: {problem}")
        if len(found) > SHOWN_PROBLEMS:
            self.say(f"BROKEN  {path}: ... and {len(found) - SHOWN_PROBLEMS} more problems")
        return not found

    def passed(self, *paths: str) -> bool:
        """Every one of these paths was checked and found right."""
        return all(path in self.problems and not self.problems[path] for path in paths)

    @property
    def broken(self) -> list[str]:
        return [path for path, problems in self.problems.items() if problems]

    @property
    def missed(self) -> list[str]:
        return [label for label, met in self.judged if not met]

    def target(
        self, label: str, *, needs: Iterable[str], judge: Callable[[], tuple[bool, str]]
    ) -> bool:
        """PASS or MISS for one target; `judge` (met, text) runs only on checked paths."""
        needs = list(needs)
        unchecked = [path for path in needs if path not in self.problems]
        failed = [path for path in needs if self.problems.get(path)]
        if failed or unchecked or not needs:
            why = (
                f"the {', '.join(failed)} path{'s' if len(failed) > 1 else ''} failed "
                f"{'their' if len(failed) > 1 else 'its'} check"
                if failed
                else f"{', '.join(unchecked) or 'no path'} never checked"
            )
            self.judged.append((label, False))
            self.texts.append(f"not judged, {why}")
            self.say(f"MISS  {label}: not judged, {why}")
            return False
        met, text = judge()
        self.judged.append((label, met))
        self.texts.append(text)
        self.say(f"{'PASS' if met else 'MISS'}  {text}")
        return met

    def result(self) -> dict[str, object]:
        return {
            "bench": self.bench,
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "commit": commit(),
            "machine": machine(),
            "broken": self.broken,
            "checks": {path: problems[:SHOWN_PROBLEMS] for path, problems in self.problems.items()},
            "targets": [
                {"label": label, "met": met, "text": text}
                for (label, met), text in zip(self.judged, self.texts, strict=True)
            ],
        }

    def write(self, directory: Path = RESULTS_DIR) -> Path | None:
        """The run's result as <bench>.json (nothing when the benchmark has no name)."""
        if not self.bench:
            return None
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"{self.bench}.json"
        path.write_text(json.dumps(self.result(), indent=2, ensure_ascii=False) + "\n")
        return path

    def exit_status(self, *, strict: bool, results_dir: Path | None = None, bench: str = "") -> int:
        """The run's exit status; with `bench` (and where `results_dir` says) its result
        file is written first."""
        self.bench = bench or self.bench
        if results_dir is not None:
            self.write(results_dir)
        if self.broken:
            their = "their checks" if len(self.broken) > 1 else "its check"
            self.say(f"BROKEN: {', '.join(self.broken)} failed {their}; no figure of it judged")
            return EXIT_BROKEN
        if strict and self.missed:
            return EXIT_MISSED
        return EXIT_MET
