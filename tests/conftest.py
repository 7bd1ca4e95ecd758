"""Every test gets its own data home, the deterministic model path and the hashing embedder."""

from __future__ import annotations

from pathlib import Path

import pytest

from reveriemem.core.demo import DEMO_SLUG, demo_book_path, demo_characters_path

SHARED_BOOKS = Path(__file__).resolve().parents[2] / "shared" / "books"


@pytest.fixture(autouse=True)
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    monkeypatch.setenv("REVERIEMEM_HOME", str(home))
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    monkeypatch.delenv("REVERIEMEM_LANCEDB_URI", raising=False)
    monkeypatch.delenv("REVERIEMEM_STORE", raising=False)
    monkeypatch.setenv("REVERIEMEM_LM", "none")
    monkeypatch.setenv("REVERIEMEM_EMBEDDER", "hash")
    return home


@pytest.fixture
def demo_book():
    from reveriemem.core.registry import prepare_book

    book, _ = prepare_book(demo_book_path(), demo_characters_path(), slug=DEMO_SLUG)
    return book


def write_book(tmp_path: Path, body: str, name: str = "tale.txt", gutenberg: bool = False) -> Path:
    text = body
    if gutenberg:
        text = ("The Project Gutenberg EBook of Tale\r\n\r\n*** START OF THIS PROJECT GUTENBERG EBOOK TALE ***\r\n\r\n"
                + body + "\r\n\r\n*** END OF THIS PROJECT GUTENBERG EBOOK TALE ***\r\n\r\nLicence text.\r\n")
    path = tmp_path / name
    path.write_text(text, encoding="utf-8", newline="")
    return path


@pytest.fixture(scope="session")
def demo_home(tmp_path_factory):
    """The demo story built offline once per test session (hash embedder); `built_demo` copies it in."""
    from click.testing import CliRunner

    from reveriemem.core.settings import environment
    from reveriemem_dagster.cli import main

    home = tmp_path_factory.mktemp("built") / "home"
    with environment(REVERIEMEM_HOME=str(home), REVERIEMEM_LM="none", REVERIEMEM_EMBEDDER="hash", DAGSTER_HOME=None):
        result = CliRunner().invoke(main, ["demo", "--lm", "none"])
        assert result.exit_code == 0, result.output
    return home


@pytest.fixture
def built_demo(demo_home, isolated_home):
    """The demo story's memory, built offline, in this test's own data home."""
    import os
    import shutil

    shutil.copytree(demo_home, isolated_home, dirs_exist_ok=True)
    os.environ.pop("DAGSTER_HOME", None)
    return DEMO_SLUG
