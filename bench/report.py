"""The benchmarks' current table: the newest result of each benchmark, from bench/results.

    .venv/bin/python bench/report.py [--results-dir bench/results] [--page docs/benchmarks.md]

Each benchmark writes ``bench/results/<bench>.json`` when it ends (``bench/verdict.py``):
every target with its verdict and text, the paths' checks, the date, the commit and the
machine. This writes one table from them between the page's two markers (`make
bench-report`); the rest of the page is left as it is. A benchmark whose path failed its
check shows BROKEN and no figure.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
START = "<!-- bench-report:start -->"
END = "<!-- bench-report:end -->"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def table(results: list[dict[str, Any]]) -> str:
    lines = [
        "| benchmark | target | verdict | figure | measured |",
        "|---|---|---|---|---|",
    ]
    for result in sorted(results, key=lambda item: item["bench"]):
        machine = result.get("machine", {})
        load = "/".join(str(value) for value in machine.get("load_average", [])[:1])
        probe = machine.get("speed_probe_ms")
        measured = (
            f"{result['date'][:10]}, {machine.get('cores', '?')} cores, load {load or '?'}, "
            + (f"probe {probe} ms, " if probe is not None else "")
            + f"`{result.get('commit') or '?'}`"
        )
        if result.get("broken"):
            paths = ", ".join(result["broken"])
            lines.append(
                f"| `{result['bench']}` | every target | BROKEN | {_cell(paths)} failed its "
                f"check: no figure | {measured} |"
            )
            continue
        for target in result.get("targets", []):
            verdict = "met" if target["met"] else "**missed**"
            lines.append(
                f"| `{result['bench']}` | {_cell(target['label'])} | {verdict} | "
                f"{_cell(target['text'])} | {measured} |"
            )
    return "\n".join(lines)


def load(directory: Path) -> list[dict[str, Any]]:
    results = []
    for path in sorted(directory.glob("*.json")):
        data = json.loads(path.read_text())
        if isinstance(data, dict) and data.get("bench"):
            results.append(data)
    return results


def write(page: Path, results: list[dict[str, Any]]) -> None:
    text = page.read_text()
    if START not in text or END not in text:
        raise SystemExit(f"{page} has no {START} ... {END} markers to write between")
    before, rest = text.split(START, 1)
    _, after = rest.split(END, 1)
    body = table(results) if results else "No benchmark has written a result yet."
    page.write_text(f"{before}{START}\n{body}\n{END}{after}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results-dir", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument("--page", type=Path, default=ROOT / "docs" / "benchmarks.md")
    args = parser.parse_args(argv)
    results = load(args.results_dir)
    write(args.page, results)
    print(f"{args.page}: {len(results)} benchmarks")
    return 0


if __name__ == "__main__":
    sys.exit(main())
