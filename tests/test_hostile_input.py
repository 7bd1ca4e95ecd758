"""Input a hostile tester typed: bytes that are not UTF-8, round counts below one (no book is built here)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from click.testing import CliRunner

from reveriemem.core.user_text import well_formed
from reveriemem_dagster.cli import main
from reveriemem_dagster.cli_runtime import failure_message
from reveriemem_dagster.conversation import chat_loop

ESCAPED = "\udcff\udcfe who is Holmes"  # what Python makes of b"\xff\xfe who is Holmes" on a command line


def _shown(value: object) -> str:
    """A value as an assertion shows it, lone surrogates escaped (pytest-xdist cannot send a report holding one)."""
    return ascii(value)


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def test_lone_surrogates_become_replacement_characters():
    assert _shown(well_formed(ESCAPED)) == _shown("\ufffd\ufffd who is Holmes")
    assert _shown(well_formed("a \ud800 b")) == _shown("a \ufffd b")  # a lone surrogate JSON can spell
    assert _shown(well_formed("\ud83d\ude00")) == _shown("\U0001f600")  # a pair as two code points is one character
    assert well_formed("Who is “Holmes”?") == "Who is “Holmes”?"


def test_the_numpy_minilm_embeds_text_holding_lone_surrogates():
    import numpy as np

    from reveriemem.core.embeddings import bundled_minilm_path
    from reveriemem.core.minilm import MiniLMNumpy

    try:
        vectors = MiniLMNumpy(bundled_minilm_path()).encode([ESCAPED, "who is Holmes"])
    except TypeError as exc:  # tokenizers refuses the text; its message holds no surrogate, but be safe
        pytest.fail(_shown(str(exc)))
    assert vectors.shape == (2, 384) and np.isfinite(vectors).all()


class _Stop(Exception):
    pass


def _fake_session(seen: dict[str, Any]) -> Any:
    def open_session(book: str, character: str, **_kwargs: Any) -> Any:
        seen["book"], seen["character"] = book, character

        class Agent:
            def respond(self, question: str, **_kwargs: Any) -> Any:
                seen.setdefault("questions", []).append(question)
                if seen.get("stop"):
                    raise _Stop
                return SimpleNamespace(reply="I cannot say.")

        return SimpleNamespace(character=SimpleNamespace(name="John Watson"), book=SimpleNamespace(title="Tale"),
                               handle=SimpleNamespace(name="none"), agent=Agent(), as_of=None)

    return open_session


def test_ask_takes_undecodable_bytes_in_the_question_and_the_name_as_replacement_characters(
        monkeypatch: pytest.MonkeyPatch):
    import reveriemem.inference.session as session_module

    seen: dict[str, Any] = {"stop": True}
    monkeypatch.setattr(session_module, "open_session", _fake_session(seen))
    result = CliRunner().invoke(main, ["ask", "tale", "Wat\udcffson", ESCAPED, "--lm", "none"])
    assert isinstance(result.exception, _Stop) or "_Stop" in result.output, _shown(result.output)
    assert _shown([seen["character"], seen["questions"]]) == _shown(["Wat\ufffdson", ["\ufffd\ufffd who is Holmes"]])


def test_a_chat_line_of_undecodable_bytes_is_a_turn_not_the_end_of_the_chat(monkeypatch: pytest.MonkeyPatch):
    import reveriemem.inference.session as session_module

    seen: dict[str, Any] = {}
    monkeypatch.setattr(session_module, "open_session", _fake_session(seen))
    result = CliRunner().invoke(main, ["chat", "tale", "Watson", "--lm", "none"],
                                input=b"\xff\xfe who is Holmes\nwho is Holmes?\n")
    assert result.exit_code == 0, _shown(result.output)
    assert _shown(seen.get("questions")) == _shown(["\ufffd\ufffd who is Holmes", "who is Holmes?"])
    assert all(_encodes(q) for q in seen["questions"])


def test_chat_loop_hands_the_agent_well_formed_text():
    questions: list[str] = []

    class Agent:
        def respond(self, question: str, **_kwargs: Any) -> Any:
            questions.append(question)
            return SimpleNamespace(reply="Holmes? A friend.")

    session = SimpleNamespace(character=SimpleNamespace(name="John Watson"), book=SimpleNamespace(title="Tale"),
                              handle=SimpleNamespace(name="none"), agent=Agent(), as_of=None)
    lines = iter([ESCAPED])

    def read(_prompt: str) -> str:
        line = next(lines, None)
        if line is None:
            raise EOFError
        return line

    said: list[str] = []
    assert chat_loop(session, read, said.append) == 1  # type: ignore[arg-type]
    assert _shown(questions) == _shown(["\ufffd\ufffd who is Holmes"])


def test_a_served_message_with_lone_surrogates_is_read_as_replacement_characters():
    from reveriemem.serving.openai_api import _text

    assert _shown(_text(ESCAPED, 0)) == _shown("\ufffd\ufffd who is Holmes")
    assert _shown(_text([{"type": "text", "text": "who \ud800"}], 0)) == _shown("who \ufffd")


@pytest.mark.parametrize("rounds", ["0", "-5"])
@pytest.mark.parametrize("command", [["ask", "tale", "Watson", "hello"], ["chat", "tale", "Watson"], ["serve"]])
def test_rounds_below_one_is_a_usage_error(command: list[str], rounds: str):
    result = CliRunner().invoke(main, [*command, "--rounds", rounds])
    assert result.exit_code == 2, result.output
    assert "Invalid value for '--rounds'" in result.output and "x>=1" in result.output


def test_a_failure_message_ending_in_a_full_stop_gets_no_second_one():
    message = failure_message(ValueError("max_rounds must be at least 1."), "ask", "reveriemem ask x y z")
    assert message == "`reveriemem ask` failed: ValueError: max_rounds must be at least 1. (--verbose shows the traceback)"
    assert ".." not in message
    assert failure_message(RuntimeError("boom"), "ask", "reveriemem ask x y z").startswith(
        "`reveriemem ask` failed: RuntimeError: boom. ")


def test_a_served_model_names_its_book_by_its_title_as_written(built_demo: str):
    from reveriemem.serving.sessions import resolve_model

    served = resolve_model("The Lamplighter's Ledger/Mara")
    assert (served.book, served.character) == (built_demo, "mara-quell")
