"""What a new user meets first (issue 17): defaults, input checks, errors in a sentence, status, cost, the demo."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from reveriemem.core.characters import load_character_file
from reveriemem.core.errors import FAILED_STEP_NOTE, CharacterFileError, ModelUnavailableError
from reveriemem.core.text import LARGE_BOOK_BYTES, book_shape_warnings, decode_book_bytes
from reveriemem_dagster.cli import main
from reveriemem_dagster.cli_runtime import failure_message, model_notice
from reveriemem_dagster.conversation import chat_loop

ROOT = Path(__file__).resolve().parents[1]


# -- defaults -------------------------------------------------------------------------------------------------


def test_no_model_configured_means_the_offline_rules(monkeypatch: pytest.MonkeyPatch):
    from reveriemem.models.backends import resolve_spec

    monkeypatch.delenv("REVERIEMEM_LM", raising=False)
    assert resolve_spec(None).kind == "none"
    assert "offline rules" in (model_notice("") or "")
    assert "tiny and slow" in (model_notice("bundled") or "")
    assert model_notice("openai/gpt-4o-mini") is None
    monkeypatch.setenv("REVERIEMEM_LM", "openai/gpt-4o-mini")
    assert model_notice("") is None


def test_demo_ends_with_a_reply_and_its_facts(built_demo: str):
    """`reveriemem demo` (what `make demo` runs) built offline, then asked Mara one question: run it again."""
    result = CliRunner().invoke(main, ["demo"], env={"REVERIEMEM_LM": None})
    assert result.exit_code == 0, result.output
    assert "No model configured: using the offline rules" in result.output
    assert result.output.count("No model configured") == 1
    assert "Mara Quell: " in result.output and "Facts used:" in result.output
    assert "cask nearest the door" in result.output


# -- input checks ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("key", "suggestion"), [("alises", "aliases"), ("narator_spans", "narrator_spans"),
                                                 ("gendre", "gender")])
def test_a_misspelt_character_key_is_an_error_naming_the_known_one(tmp_path: Path, key: str, suggestion: str):
    path = tmp_path / "c.yaml"
    path.write_text(f"characters:\n  - name: Mara\n    {key}: [Mara Quell]\n", encoding="utf-8")
    with pytest.raises(CharacterFileError, match=f"Unknown key `{key}`.*did you mean `{suggestion}`"):
        load_character_file(path)


def test_misspelt_keys_at_the_top_and_in_a_span_are_errors_too(tmp_path: Path):
    path = tmp_path / "c.yaml"
    path.write_text("titel: X\ncharacters:\n  - name: Mara\n", encoding="utf-8")
    with pytest.raises(CharacterFileError, match="did you mean `title`"):
        load_character_file(path)
    path.write_text("characters:\n  - name: Mara\n    narrator_spans: [{start: A, edn: B}]\n", encoding="utf-8")
    with pytest.raises(CharacterFileError, match="did you mean `end`"):
        load_character_file(path)


def test_utf8_with_a_stray_byte_stays_utf8_with_a_warning_naming_the_offset():
    good = "Caf\u00e9 na\u00efve \u2014 \u201cquoted\u201d. " * 40
    raw = good.encode("utf-8")
    offset = len(raw) // 2
    raw = raw[:offset] + b"\x93" + raw[offset:]
    decoded = decode_book_bytes(raw, "book.txt")
    assert decoded.encoding == "utf-8"
    assert decoded.text.startswith("Caf\u00e9 na\u00efve \u2014 \u201cquoted\u201d.")  # not mojibake
    assert decoded.text.count("\ufffd") == 1
    assert len(decoded.warnings) == 1 and f"byte offset {offset}" in decoded.warnings[0]


def test_a_legacy_encoding_is_read_with_a_warning():
    decoded = decode_book_bytes("caf\u00e9 \u2014 na\u00efve".encode("cp1252"), "x")
    assert decoded.text == "caf\u00e9 \u2014 na\u00efve"
    assert decoded.warnings and "read as Windows-1252" in decoded.warnings[0] and "offset 3" in decoded.warnings[0]
    assert decode_book_bytes(b"plain", "x").warnings == ()


def test_utf16_with_its_byte_order_mark_is_read_as_text():
    story = "Zo\u00eb said, \u201cThe key is under the stone.\u201d\r\nChapter One\r\n"
    for encoding in ("utf-16", "utf-16-be"):
        raw = story.encode(encoding) if encoding == "utf-16" else b"\xfe\xff" + story.encode(encoding)
        assert decode_book_bytes(raw, "book.txt").text == story  # offsets count characters after the mark


def test_several_gutenberg_books_or_a_huge_file_warn():
    one = "*** START OF THE PROJECT GUTENBERG EBOOK A ***\r\nText.\r\n*** END OF THE PROJECT GUTENBERG EBOOK A ***\r\n"
    assert book_shape_warnings(one, 100, "f") == []
    twice = book_shape_warnings(one + one.replace(" A ", " B "), 200, "f")
    assert len(twice) == 1 and "2 Project Gutenberg books" in twice[0]
    big = book_shape_warnings(one, LARGE_BOOK_BYTES + 1, "f")
    assert len(big) == 1 and "MiB" in big[0]


def test_add_book_says_a_missing_file_does_not_exist_before_asking_for_characters(tmp_path: Path):
    result = CliRunner().invoke(main, ["add-book", str(tmp_path / "my-novel.txt")])
    assert result.exit_code == 1
    assert result.output.strip() == f"Error: The book file {tmp_path / 'my-novel.txt'} does not exist."


def test_an_empty_question_is_one_sentence(built_demo: str):
    result = CliRunner().invoke(main, ["ask", built_demo, "Mara", "   "])
    assert result.exit_code == 1
    assert len(result.output.strip().splitlines()) == 1 and "The question is empty" in result.output


# -- failures, interrupts, chat --------------------------------------------------------------------------------


def test_failure_messages_say_what_where_and_how_to_resume():
    exc = KeyboardInterrupt()
    exc.add_note(f"{FAILED_STEP_NOTE}scenes of demo")
    message = failure_message(exc, "build", "reveriemem build demo")
    assert message == "Interrupted in step scenes of demo. Work already done is kept: rerun `reveriemem build demo` to resume."
    error = ModelUnavailableError("Could not load the embedding model x.")
    error.add_note(f"{FAILED_STEP_NOTE}scenes of demo")
    assert failure_message(error, "build", "reveriemem build demo").startswith(
        "Failed in step scenes of demo: Could not load the embedding model x. Work already done is kept")
    plain = failure_message(RuntimeError("boom\nsecond line"), "ask", "reveriemem ask demo mara hi")
    assert plain == "`reveriemem ask` failed: RuntimeError: boom. (--verbose shows the traceback)"


@pytest.mark.slow
def test_a_failed_build_is_two_sentences_its_run_failed_and_named(built_demo: str):
    """A missing embedder: no Dagster traceback, the step named, rerun hinted; the run is `book_memory`, failed."""
    from reveriemem_dagster.instance import get_instance

    result = CliRunner().invoke(main, ["build", built_demo, "--embedder", "/nonexistent/model", "-q"])
    assert result.exit_code == 1
    lines = [line for line in result.output.splitlines() if line.strip() and not line.startswith("note:")]
    assert len(lines) == 1, result.output
    assert "Traceback" not in result.output and "/nonexistent/model" in lines[0]
    assert " in step " in lines[0] and f"rerun `reveriemem build {built_demo}" in lines[0]
    runs = get_instance().get_runs(limit=1)
    assert runs[0].job_name == "book_memory" and runs[0].status.value == "FAILURE"
    verbose = CliRunner().invoke(main, ["build", built_demo, "--embedder", "/nonexistent/model", "-q", "--verbose"])
    assert verbose.exit_code == 1 and "Traceback" in verbose.output


_BLOCKING_BUILD = """
import sys, time
from reveriemem.models import FakeModel, register_fake
from reveriemem.source_to_memory.estimate import plausible_answer
from reveriemem_dagster.cli import main

def handler(signature, inputs):
    print("BLOCKED", flush=True)
    time.sleep(600)
    return plausible_answer(signature, inputs)

register_fake("blocking", FakeModel(handler, name="blocking"))
main(["build", sys.argv[1], "--lm", "fake:blocking", "--force", "-q"])
"""


@pytest.mark.slow
def test_sigterm_ends_a_build_in_a_sentence_and_marks_its_run_failed(built_demo: str, tmp_path: Path):
    from reveriemem_dagster.instance import get_instance

    script = tmp_path / "blocking_build.py"
    script.write_text(_BLOCKING_BUILD, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen([sys.executable, str(script), built_demo], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    assert child.stdout is not None
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and "BLOCKED" not in child.stdout.readline():
        pass
    child.send_signal(signal.SIGTERM)
    _, err = child.communicate(timeout=60)
    assert child.returncode == 130, err
    assert "Traceback" not in err
    assert "Interrupted in step scenes of " in err and f"rerun `reveriemem build {built_demo}" in err
    run = get_instance().get_runs(limit=1)[0]
    assert run.job_name == "book_memory" and run.status.value == "FAILURE"


def test_ctrl_c_leaves_chat_cleanly_at_the_prompt_and_mid_turn():
    said: list[str] = []

    def interrupted(_prompt: str) -> str:
        raise KeyboardInterrupt

    class Agent:
        def respond(self, *args: object, **kwargs: object) -> object:
            raise KeyboardInterrupt

    session = SimpleNamespace(character=SimpleNamespace(name="Mara"), book=SimpleNamespace(title="Ledger"),
                              handle=SimpleNamespace(name="none"), agent=Agent(), as_of=None)
    assert chat_loop(session, interrupted, said.append) == 0  # type: ignore[arg-type]
    lines = iter(["hello"])
    assert chat_loop(session, lambda _p: next(lines), said.append) == 0  # type: ignore[arg-type]


def test_chat_commands_are_read_in_any_case():
    said: list[str] = []

    class Agent:
        def respond(self, *args: object, **kwargs: object) -> object:
            raise AssertionError("a command is no question")

    session = SimpleNamespace(character=SimpleNamespace(name="Mara"), book=SimpleNamespace(title="Ledger"),
                              handle=SimpleNamespace(name="none"), agent=Agent(), as_of=None)
    lines = iter(["/Trace", "/JSON", "/QUIT", "never read"])
    assert chat_loop(session, lambda _p: next(lines), said.append) == 0  # type: ignore[arg-type]
    assert said[1:] == ["No turn yet.", "No turn yet."] and next(lines) == "never read"


@pytest.mark.slow
def test_sigint_at_the_chat_prompt_ends_the_process(built_demo: str):
    child = subprocess.Popen([sys.executable, "-m", "reveriemem_dagster.cli", "chat", built_demo, "Mara"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT)
    assert child.stdout is not None and child.stdin is not None
    child.stdin.write("Which cask did you fill the Horn Lamp from?\n")
    child.stdin.flush()
    deadline = time.monotonic() + 120
    seen = ""
    while time.monotonic() < deadline and "Mara Quell:" not in seen:
        seen += child.stdout.readline()
    time.sleep(0.5)
    child.send_signal(signal.SIGINT)
    _, err = child.communicate(timeout=30)
    assert child.returncode == 0, err
    assert "Traceback" not in err and "Warning" not in err


# -- status and cost ------------------------------------------------------------------------------------------


def test_books_shows_what_is_built_with_row_counts_and_what_built_it(built_demo: str):
    from reveriemem.core.storage import MemoryStore, PartitionRef

    result = CliRunner().invoke(main, ["books"])
    assert result.exit_code == 0, result.output
    facts = MemoryStore.for_home().stored_rows("facts", PartitionRef(built_demo))
    assert f"facts {facts}," in result.output
    assert "with model none, embedder hash-384 (384-d)" in result.output
    assert "characters: character_scenes " in result.output and "episodes " in result.output


def test_books_says_a_book_whose_build_recorded_nothing_yet_is_not_built(built_demo: str):
    from reveriemem.core.storage import MemoryStore

    Path(MemoryStore.for_home().manifest_path(built_demo)).unlink()  # rows stored, nothing recorded what built them
    result = CliRunner().invoke(main, ["books", built_demo])
    assert result.exit_code == 0, result.output
    assert f"not built yet (run: reveriemem build {built_demo}); an unfinished build stored:" in result.output
    assert "?" not in result.output and "facts " in result.output


def test_a_book_registered_again_with_another_text_is_not_asked_until_rebuilt(built_demo: str, tmp_path: Path):
    from reveriemem.core.demo import demo_book_path, demo_characters_path
    from reveriemem.core.errors import RegistryError
    from reveriemem.core.storage import MemoryStore
    from reveriemem.serving.sessions import resolve_model, served_models

    invoke = CliRunner().invoke
    assert MemoryStore.for_home().manifest(built_demo).book_version  # the build recorded what it read
    assert invoke(main, ["ask", built_demo, "Mara", "Who took the ledger?", "--lm", "none"]).exit_code == 0
    other = tmp_path / "other.txt"  # the same story, shortened: every offset of the old build may point past it
    text = demo_book_path().read_text(encoding="utf-8")
    other.write_text(text[: len(text) * 2 // 3], encoding="utf-8")
    assert invoke(main, ["remove-book", built_demo]).exit_code == 0
    added = invoke(main, ["add-book", str(other), "--name", built_demo, "--characters", str(demo_characters_path())])
    assert added.exit_code == 0, added.output
    sentence = f"{built_demo} was registered again since it was built; run: reveriemem build {built_demo}."
    for command in (["ask", built_demo, "Mara", "Who took the ledger?", "--lm", "none"], ["chat", built_demo, "Mara"]):
        result = invoke(main, command, input="/quit\n")
        assert result.exit_code == 1 and sentence in result.output, result.output
    assert f"needs a rebuild: {sentence[:-1]}" in invoke(main, ["books", built_demo]).output
    assert served_models() == []
    with pytest.raises(RegistryError, match="registered again since it was built"):
        resolve_model(f"{built_demo}/Mara")
    served = invoke(main, ["serve", "--port", "8017"])
    assert served.exit_code == 1 and sentence in served.output and "Serving" not in served.output


def test_cost_uses_litellm_prices_and_the_configured_concurrency(monkeypatch: pytest.MonkeyPatch):
    from reveriemem.source_to_memory.cost import build_cost
    from reveriemem.source_to_memory.estimate import Estimate, StepCost

    figures = Estimate(book="b", book_tokens=1000, steps={"x": StepCost(100, 1_000_000, 200_000)}, seconds=10)
    monkeypatch.setenv("REVERIEMEM_MAX_CONCURRENCY", "4")
    cost = build_cost(figures, "gpt-4o-mini", "litellm", latency=2.0)
    assert cost.dollars == pytest.approx(1_000_000 * 0.15e-6 + 200_000 * 0.6e-6)  # $0.15/M in, $0.60/M out
    assert cost.seconds == pytest.approx(10 + 100 * 2.0 / 4)
    assert "$0.27" in cost.lines(figures)[0] and "4 at a time" in cost.lines(figures)[1]
    unknown = build_cost(figures, "openai/no-such-model-here", "litellm")
    assert unknown.dollars is None and "no price" in unknown.lines(figures)[0]
    assert build_cost(figures, "bundled", "bundled").dollars == 0.0


# -- fast answers ---------------------------------------------------------------------------------------------


def test_what_ask_imports_leaves_out_dagster_and_torch():
    code = ("import sys\nimport reveriemem_dagster.cli, reveriemem_dagster.conversation, reveriemem.inference.session\n"
            "from reveriemem.core.embeddings import open_embedder\n"
            "e = open_embedder('all-MiniLM-L6-v2')\nassert e is open_embedder('all-MiniLM-L6-v2')\n"
            "v = e.embed(['Which cask did you fill the Horn Lamp from?'])\n"
            "print(v.shape, sorted(m for m in ('dagster', 'torch', 'sentence_transformers') if m in sys.modules))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "(1, 384) []"


@pytest.mark.slow
def test_numpy_minilm_gives_sentence_transformers_vectors():
    import numpy as np
    from sentence_transformers import SentenceTransformer

    from reveriemem.core.embeddings import bundled_minilm_path
    from reveriemem.core.minilm import MiniLMNumpy

    texts = ["Which cask did you fill the Horn Lamp from on the fourteenth?", "Mara!",
             "Each of them was keeping a lamp the other could not see. " * 30]  # long: truncated at 256 tokens
    ours = MiniLMNumpy(bundled_minilm_path()).encode(texts)
    theirs = SentenceTransformer(str(bundled_minilm_path()), device="cpu").encode(texts, normalize_embeddings=True)
    assert np.abs(ours - theirs).max() < 1e-5



def test_output_piped_to_a_reader_that_stops_early_ends_quietly(isolated_home):
    # `reveriemem books | head -1`, the reader gone before the first line is written: no error, no traceback
    import subprocess
    import sys

    command = [sys.executable, "-c", "from reveriemem_dagster.cli import main; main()", "books"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()  # as `head` does once it has what it wants
    error = process.stderr.read().decode()
    process.wait(timeout=120)
    assert error == "", error
