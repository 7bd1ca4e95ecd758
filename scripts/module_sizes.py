"""Fail when a module of the project (outside tests and benchmarks) grows past the house limit of lines.

Run by `make test` and `make lint`; prints the offenders, one per line, and exits 1 if there is any.
"""

from __future__ import annotations

import sys
from pathlib import Path

LIMIT = 500
PACKAGES = ("reveriemem", "reveriemem_dagster", "assets", "dspy_programs", "eval")


def oversized(root: Path, limit: int = LIMIT) -> list[tuple[Path, int]]:
    """Every .py file under the project's packages with more than `limit` lines, largest first."""
    found = []
    for package in PACKAGES:
        for path in (root / package).rglob("*.py"):
            lines = len(path.read_text(encoding="utf-8").splitlines())
            if lines > limit:
                found.append((path.relative_to(root), lines))
    return sorted(found, key=lambda item: -item[1])


def main() -> int:
    root = Path(__file__).resolve().parents[1]
    found = oversized(root)
    for path, lines in found:
        print(f"{path}: {lines} lines (the limit is {LIMIT}); split it by what it holds")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
