"""bench/verdict.py: no figure is judged from a path that failed its check, a missed target
fails the exit status with --strict, a broken path fails it always."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bench.verdict import (
    EXIT_BROKEN,
    EXIT_MET,
    EXIT_MISSED,
    Verdicts,
    add_strict_argument,
    below,
    ratio,
)


def verdicts() -> tuple[Verdicts, list[str]]:
    said: list[str] = []
    return Verdicts(say=said.append), said


def test_a_target_of_checked_paths_is_judged_and_printed() -> None:
    found, said = verdicts()
    assert found.check("fast", []) and found.check("naive", [])
    assert found.target("ratio", needs=["fast", "naive"], judge=lambda: (True, "ratio 4.00x"))
    assert not found.target("rate", needs=["fast"], judge=lambda: (False, "rate 10/s"))
    assert said == ["PASS  ratio 4.00x", "MISS  rate 10/s"]
    assert found.missed == ["rate"]
    assert found.exit_status(strict=False) == EXIT_MET
    assert found.exit_status(strict=True) == EXIT_MISSED


def test_a_broken_path_is_never_judged_and_fails_the_run_without_strict() -> None:
    found, said = verdicts()
    judged = []

    def judge() -> tuple[bool, str]:
        judged.append(True)
        return True, "ratio (fast / naive) = 30.00x"

    assert not found.check("naive", ["batch 0: HTTP 500"])
    found.check("fast", [])
    met = found.target("ratio (fast / naive)", needs=["fast", "naive"], judge=judge)
    assert not met and not judged  # the ratio is never even computed
    assert said[0] == "BROKEN  naive: batch 0: HTTP 500"
    assert said[1] == "MISS  ratio (fast / naive): not judged, the naive path failed its check"
    assert not any("30.00x" in line for line in said)
    assert found.exit_status(strict=False) == EXIT_BROKEN
    assert found.exit_status(strict=True) == EXIT_BROKEN


def test_a_path_never_checked_is_not_judged() -> None:
    found, said = verdicts()
    found.check("fast", [])
    assert not found.target("ratio", needs=["fast", "naive"], judge=lambda: (True, "ok"))
    assert said == ["MISS  ratio: not judged, naive never checked"]
    assert not found.target("nothing", needs=[], judge=lambda: (True, "ok"))


def test_a_path_broken_in_one_run_of_several_stays_broken() -> None:
    found, said = verdicts()
    found.check("worker", [])
    found.check("worker", [f"case {n}: differs" for n in range(8)])
    found.check("worker", [])
    assert not found.passed("worker") and found.broken == ["worker"]
    assert said[-1] == "BROKEN  worker: ... and 3 more problems"


@pytest.mark.parametrize(
    ("numerator", "denominator", "expected"),
    [(6.0, 2.0, 3.0), (0.0, 2.0, 0.0), (5.0, 0.0, None), (5.0, None, None), (None, 2.0, None)],
)
def test_a_ratio_never_turns_a_missing_baseline_into_one(
    numerator: float | None, denominator: float | None, expected: float | None
) -> None:
    assert ratio(numerator, denominator) == expected


def test_the_strict_argument() -> None:
    parser = argparse.ArgumentParser()
    add_strict_argument(parser)
    assert parser.parse_args(["--strict"]).strict and not parser.parse_args([]).strict


ROOT = Path(__file__).resolve().parents[2]
# Every benchmark script under bench/ (the rest are the modules they share).
BENCHES = sorted(
    path.name
    for path in (ROOT / "bench").glob("*.py")
    if path.name not in {"__init__.py", "verdict.py", "naive_app.py", "large_spec.py", "report.py"}
)


@pytest.mark.parametrize("bench", BENCHES)
def test_every_benchmark_takes_strict(bench: str) -> None:
    done = subprocess.run(
        [sys.executable, f"bench/{bench}", "--help"],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "--strict" in done.stdout


def test_make_bench_passes_strict_to_every_benchmark_it_runs() -> None:
    planned = subprocess.run(
        ["make", "-n", "--no-print-directory", "bench", "bench-scale", "bench-incident"],
        cwd=ROOT, capture_output=True, text=True, check=True, timeout=60,
    ).stdout  # fmt: skip
    runs = re.findall(r"bench/\w+\.py[^;|\n]*", planned)
    assert len(runs) >= 9
    assert all(run.rstrip(" \\").endswith(" --strict") for run in runs), runs


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (99.97, "99.97"),  # met, not "100.0"
        (99.9999, "99.9999"),
        (100.0, "100.0"),
        (100.04, "100.0"),  # missed, and "100.0" is not under 100 either
        (87.25, "87.2"),
        (12.0, "12.0"),
    ],
)
def test_a_figure_never_reads_as_its_limit_on_the_wrong_side(value: float, shown: str) -> None:
    assert below(value, 100.0) == shown
    assert (float(below(value, 100.0)) < 100.0) == (value < 100.0)
