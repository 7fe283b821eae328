"""Each benchmark writes its verdicts; the report makes one table of the newest of each."""

from __future__ import annotations

import json
from pathlib import Path

from bench import report
from bench.verdict import Verdicts


def _run(directory: Path, bench: str, *, met: bool, broken: bool = False) -> int:
    verdicts = Verdicts(say=lambda line: None)
    verdicts.check("fast", ["the database held 9 of 10 records"] if broken else [])
    verdicts.target("fast >= 3x", needs=("fast",), judge=lambda: (met, "fast 2.5x naive"))
    return verdicts.exit_status(strict=True, results_dir=directory, bench=bench)


def test_a_run_writes_its_targets_machine_and_commit(tmp_path: Path) -> None:
    assert _run(tmp_path, "ingest", met=False) == 1
    result = json.loads((tmp_path / "ingest.json").read_text())
    assert result["targets"] == [{"label": "fast >= 3x", "met": False, "text": "fast 2.5x naive"}]
    assert result["machine"]["cores"] >= 1
    assert result["machine"]["speed_probe_ms"] > 0
    assert result["date"] and "commit" in result


def test_the_page_shows_missed_targets_and_broken_paths_without_figures(tmp_path: Path) -> None:
    _run(tmp_path, "ingest", met=False)
    _run(tmp_path, "scrub", met=True)
    assert _run(tmp_path, "crowded", met=True, broken=True) == 2
    page = tmp_path / "benchmarks.md"
    page.write_text(f"# B\n\nbefore\n{report.START}\nold\n{report.END}\nafter\n")
    assert report.main(["--results-dir", str(tmp_path), "--page", str(page)]) == 0
    text = page.read_text()
    assert "before" in text and "after" in text and "old" not in text
    assert "| `ingest` | fast >= 3x | **missed** | fast 2.5x naive |" in text
    assert "| `scrub` | fast >= 3x | met |" in text
    assert "| `crowded` | every target | BROKEN | fast failed its check: no figure |" in text
    assert text.count(" ms, `") == 3  # each row's machine: its speed probe, then its commit


def test_a_result_from_before_the_speed_probe_shows_none() -> None:
    result = {
        "bench": "ingest",
        "date": "2026-12-05T10:00:00+00:00",
        "commit": "4b1b399",
        "machine": {"cores": 2, "load_average": [1.5]},
        "targets": [{"label": "fast", "met": True, "text": "fast 5600 records/s"}],
    }
    assert "| 2026-12-05, 2 cores, load 1.5, `4b1b399` |" in report.table([result])


def test_a_page_without_markers_is_refused(tmp_path: Path) -> None:
    page = tmp_path / "benchmarks.md"
    page.write_text("# B\n")
    try:
        report.write(page, [])
    except SystemExit as refused:
        assert "markers" in str(refused)
    else:
        raise AssertionError("a page without markers was written")


def test_an_unnamed_run_writes_nothing(tmp_path: Path) -> None:
    verdicts = Verdicts(say=lambda line: None)
    verdicts.exit_status(strict=False, results_dir=tmp_path)
    assert list(tmp_path.iterdir()) == []
