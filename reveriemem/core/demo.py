"""The embedded demo story, its character file and gold annotation, and the
character files shipped for the six benchmark novels."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

DEMO_SLUG = "the-lamplighters-ledger"


def _data() -> Path:
    return Path(str(resources.files("reveriemem") / "data"))


def demo_book_path() -> Path:
    return _data() / "demo" / f"{DEMO_SLUG}.txt"


def demo_characters_path() -> Path:
    return _data() / "demo" / f"{DEMO_SLUG}.characters.yaml"


def demo_gold() -> dict[str, Any]:
    return json.loads((_data() / "demo" / f"{DEMO_SLUG}.gold.json").read_text(encoding="utf-8"))


def shipped_character_file(slug: str) -> Path | None:
    """The character file shipped for a benchmark novel, by the book's slug."""
    path = _data() / "characters" / f"{slug}.yaml"
    return path if path.exists() else None
