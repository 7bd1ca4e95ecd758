"""The small public API a script uses: open a book, ask a character, register and build through the wiring."""

from __future__ import annotations

import pytest

import reveriemem
from reveriemem.core.demo import DEMO_SLUG


def test_ask_answers_as_the_character_from_its_own_memory(built_demo):
    turn = reveriemem.ask(DEMO_SLUG, "Mara", "Which cask did you fill the Horn Lamp from?", lm="none")
    assert turn.reply
    assert turn.trace.facts, "the reply rests on retrieved facts"
    assert all("mara-quell" in fact.visibility for fact in turn.trace.facts)


def test_a_session_keeps_the_character_and_bounds_it_to_a_point_of_the_story(built_demo):
    session = reveriemem.open_session(DEMO_SLUG, "Tobin", lm="none", as_of_scene=2)
    assert session.character.name == "Tobin Reddick"
    turn = session.agent.respond("What did Osric confess?", as_of=session.as_of)
    assert session.as_of is not None
    assert all(fact.source_start <= session.as_of for fact in turn.trace.facts)


def test_open_book_names_an_unknown_book_in_one_sentence():
    from reveriemem.core.errors import ReverieMemError

    with pytest.raises(ReverieMemError, match="no-such-book"):
        reveriemem.open_book("no-such-book")


def test_the_library_package_imports_no_dagster():
    import subprocess
    import sys

    code = "import reveriemem, sys; reveriemem.open_book; print('dagster' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
