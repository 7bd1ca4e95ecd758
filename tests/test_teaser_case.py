"""The paper's teaser case on A Study in Scarlet built offline: Lestrade, asked whether the
commissionaire who brought Holmes the letter was a retired sergeant of Marines, refuses in
character, because he was never at the Baker Street breakfast (Part I ch. II-III) where Holmes
explained it to Watson; and no Memory-Fusion prompt built for him holds that breakfast."""

from __future__ import annotations

import os
import shutil

import pytest

from reveriemem.core.registry import load_book
from reveriemem.inference.module import ReverieInference
from reveriemem.inference.offline import REFUSALS
from reveriemem.inference.session import open_session
from tests.conftest import SHARED_BOOKS
from tests.fusion_prompts import fusion_calls, fusion_prompt, probing_model, shingles

BOOK = "a-study-in-scarlet"
QUESTION = "Was the commissionaire who brought Mr. Holmes the letter a retired sergeant of Marines?"
BREAKFAST = ("It was upon the 4th of March", "driving furiously for the Brixton Road.")  # first and last words
PROBES = ["commissionaire retired sergeant of Marines", "the letter Holmes received at breakfast",
          "The Book of Life magazine article", "Gregson's letter about Lauriston Gardens",
          "how did Holmes know he was a sergeant"]

pytestmark = pytest.mark.slow  # builds a whole novel offline

@pytest.fixture(scope="module")
def scarlet_home(tmp_path_factory):
    """A Study in Scarlet registered and built offline (hash embedder) once for this module."""
    from click.testing import CliRunner

    from reveriemem.core.settings import environment
    from reveriemem_dagster.cli import main

    path = SHARED_BOOKS / f"{BOOK}.txt"
    if not path.exists():
        pytest.skip("the shared books folder is not beside the checkout")
    home = tmp_path_factory.mktemp("scarlet") / "home"
    with environment(REVERIEMEM_HOME=str(home), REVERIEMEM_LM="none", REVERIEMEM_EMBEDDER="hash", DAGSTER_HOME=None):
        runner = CliRunner()
        for args in (["add-book", str(path)], ["build", BOOK, "--lm", "none", "--quiet"]):
            result = runner.invoke(main, args)
            if result.exit_code != 0:  # a failed build is an error of the fixture, not of the boundary
                raise RuntimeError(f"reveriemem {args[0]} failed: {result.output} {result.exception!r}")
    return home


@pytest.fixture
def scarlet(scarlet_home, isolated_home):
    shutil.copytree(scarlet_home, isolated_home, dirs_exist_ok=True)
    os.environ.pop("DAGSTER_HOME", None)
    return load_book(BOOK)


def _breakfast(book) -> tuple[int, int]:
    start = book.text.index(BREAKFAST[0])
    return start, book.text.index(BREAKFAST[1], start) + len(BREAKFAST[1])


def test_lestrade_refuses_the_commissionaire_question_offline(scarlet):
    session = open_session(BOOK, "Lestrade", lm="none")
    turn = session.agent.respond(QUESTION)
    start, end = _breakfast(scarlet)
    breakfast_facts = [f.fact_id for f in turn.trace.facts if f.source_start is not None and start <= f.source_start < end]
    assert breakfast_facts == []
    assert turn.reply in REFUSALS and not turn.trace.used_facts, turn.reply


def test_no_memory_fusion_prompt_for_lestrade_holds_the_baker_street_breakfast(scarlet):
    session = open_session(BOOK, "Lestrade", lm="none")
    text = scarlet.text
    start, end = _breakfast(scarlet)
    only_there = shingles(text[start:end]) - shingles(text[:start]) - shingles(text[end:])
    assert len(only_there) > 1000  # the breakfast is long and its words are its own
    for question in (QUESTION, *PROBES):
        model = probing_model(PROBES)
        agent = ReverieInference(session.agent.reader, model.handle(), session.character, backoff=0.0)
        turn = agent.respond(question)
        [call] = fusion_calls(model)
        held = shingles(fusion_prompt(call, question)) & only_there
        assert not held, f"{question!r}: the prompt holds {' '.join(sorted(held)[0])!r}"
        assert not [f.fact_id for f in turn.trace.facts if f.source_start is not None
                    and start <= f.source_start < end]
