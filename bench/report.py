"""`make bench-report`: regenerates docs/benchmarks.md, docs/benchmarks.png and the table in
README.md from a bench result file (default bench/results/latest.json), overwriting them.

    python bench/report.py [RESULT_JSON]
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.suite import page, report  # noqa: E402


def publish(source: pathlib.Path, root: pathlib.Path = ROOT) -> list[pathlib.Path]:
    """Writes the page, the chart and the README table from `source`; returns what it wrote."""
    data = json.loads(source.read_text())
    docs = root / "docs"
    docs.mkdir(exist_ok=True)
    chart = docs / "benchmarks.png"
    written = []
    try:
        report.chart(data["results"], chart, data)
        written.append(chart)
    except ImportError as error:  # a machine without matplotlib still gets the page
        print(f"no chart: {error}")
    markdown = docs / "benchmarks.md"
    markdown.write_text(page.benchmarks_page(data, source, chart.name))
    written.append(markdown)
    readme = root / "README.md"
    readme.write_text(page.replace_readme_block(readme.read_text(), page.readme_block(data)))
    written.append(readme)
    return written


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("result", nargs="?", default=str(ROOT / "bench" / "results" / "latest.json"))
    args = parser.parse_args(argv)
    source = pathlib.Path(args.result)
    if not source.exists():
        parser.error(f"{source} does not exist: run `make bench` first, or name a result file")
    for path in publish(source):
        print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
