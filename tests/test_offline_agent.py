"""The agent users talk to offline is the one KBF-QA measures: options typed in the question, floors
stored with the build, and the same letter from `reveriemem ask` and `reveriemem eval`."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
from click.testing import CliRunner

from eval.items import gold_items, render_question
from eval.matching import matched_letter
from reveriemem.core.demo import demo_gold
from reveriemem.core.storage import MemoryStore, PartitionRef
from reveriemem.inference.calibration import DEFAULT_CALIBRATION, load_calibration
from reveriemem.inference.offline import quoted
from reveriemem.inference.options import parse_options
from reveriemem_dagster.cli import main


def test_options_are_read_in_the_forms_users_type_them() -> None:
    for text in ("Who lit it? A) Mara B) Tobin C) I cannot answer.",
                 "Who lit it?\nA. Mara\nB. Tobin\nC. I cannot answer.",
                 "Who lit it? (A) Mara (B) Tobin (C) I cannot answer."):
        asked = parse_options(text)
        assert asked.text == "Who lit it?"
        assert asked.options == {"A": "Mara", "B": "Tobin", "C": "I cannot answer."}
        assert asked.refusal == "C" and asked.answers == {"A": "Mara", "B": "Tobin"}
    for text, second in (("Who lit it? a) Mara b) Tobin c) I cannot answer.", "b"),
                         ("Who lit it? (1) Mara (2) Tobin (3) I cannot answer.", "2"),
                         ("Who lit it?\n1. Mara\n2. Tobin\n3. I cannot answer.", "2")):
        asked = parse_options(text)  # small letters and numbers, keyed A, B, C, with the user's marks kept
        assert asked.text == "Who lit it?" and asked.options == {"A": "Mara", "B": "Tobin", "C": "I cannot answer."}
        assert asked.refusal == "C" and asked.label("B") == second
    plain = parse_options("What did Osric confess to Mr. A. Vane?")
    assert plain.options == {} and plain.text == "What did Osric confess to Mr. A. Vane?"
    inside = parse_options("Did Mara pay 1. or 2. crowns for the oil?")  # numbers inside a sentence mark nothing
    assert inside.options == {} and inside.text == "Did Mara pay 1. or 2. crowns for the oil?"
    for text in ("Is it true that Mr. A. Smith and Prof. B. Jones met?",  # initials after a title mark nothing
                 "Mara, two questions. 1. Who lit the lamp? 2. When did she go home?",  # numbered questions
                 "Two questions: 1) who lit the lamp, and 2) when did she go home?"):
        assert parse_options(text).options == {}
    for text in ("Pick one. A. Mara B. Tobin", "Who lit it\nA. Mara\nB. Tobin", 'Who said "Go home!" A. Mara B. Tobin'):
        assert parse_options(text).options == {"A": "Mara", "B": "Tobin"}  # after a sentence, or each on its line
    asked = parse_options("Which did she ask? A) Who lit it? B) When did she go?")  # options may be questions
    assert asked.options == {"A": "Who lit it?", "B": "When did she go?"}
    six = parse_options("Who lit it? a) Mara b) Tobin c) Ansel d) Elspeth e) Osric f) Corwen")
    assert six.options["E"] == "Osric" and six.options["F"] == "Corwen" and six.label("F") == "f"
    assert parse_options("Who lit it A) Mara B) Tobin").options == {"A": "Mara", "B": "Tobin"}  # no "?" needed
    # one mark skipped: the refusal typed "E)" after "C)" is its own option, not the end of "noon"
    skipped = parse_options("At what hour did the Grey Heron sail? A) midnight B) dawn C) noon E) I don't know")
    assert skipped.options == {"A": "midnight", "B": "dawn", "C": "noon", "E": "I don't know"}
    assert skipped.refusal == "E" and skipped.answers == {"A": "midnight", "B": "dawn", "C": "noon"}
    assert parse_options("Who lit it? A) Mara D) Tobin").options == {}  # two marks skipped: no options
    # an option that tells of not knowing is no refusal when one refuses in the first person, before or after it
    told = parse_options("What happened? A) He did not know what to do with what he had heard. B) Mara left. "
                         "C) I don't know")
    assert told.refusal == "C" and set(told.answers) == {"A", "B"}
    first = parse_options("Did Drebber know he was poisoned? A) I cannot answer this from what I saw B) Yes "
                          "C) He did not know")
    assert first.refusal == "A" and set(first.answers) == {"B", "C"}
    # a skip only before a refusal that ends the options: brackets in a sentence are no options
    assert parse_options("I would go with Plan A) and then C) if it fails.").options == {}
    assert parse_options("A) one C) two B) three").options == {"A": "one C) two", "B": "three"}


def test_options_run_past_eight_in_sequence() -> None:
    names = ["Mara", "Tobin", "Ansel", "Elspeth", "Osric", "Corwen", "Wren", "Nobody"]
    nine = parse_options("Who lit the lamp? " + " ".join(f"{c}) {n}" for c, n in zip("ABCDEFGH", names))
                         + " I) I cannot answer this from my own knowledge.")
    assert nine.options["H"] == "Nobody" and nine.options["I"] == "I cannot answer this from my own knowledge."
    assert nine.refusal == "I" and "I" not in nine.answers
    twelve = parse_options("Who lit it?\n" + "\n".join(f"{i}. n{i}" for i in range(1, 13)))
    assert list(twelve.options) == list("ABCDEFGHIJKL") and twelve.options["L"] == "n12" and twelve.label("L") == "12"
    small = parse_options("Who lit it? " + " ".join(f"{c}) n{c}" for c in "abcdefghijklmnopqrstuvwxyz"))
    assert len(small.options) == 26 and small.options["Z"] == "nz" and small.label("I") == "i"
    # "I)" marks an option only after "H)": the pronoun in an earlier option marks nothing
    early = parse_options("Who lit it? A) Mara B) Tobin C) Nobody I) I cannot answer.")
    assert early.options == {"A": "Mara", "B": "Tobin", "C": "Nobody I) I cannot answer."}


def test_a_repeated_mark_reads_no_options() -> None:
    # which "A)" is meant is not to be guessed: the text is a question without options, not an option glued to another
    for text in ("Which cask? A) A cask fresh off Greaves's cart A) The cask nearest the door B) The apple barrel "
                 "C) I cannot answer this from my own knowledge.",
                 "Which cask? A) Greaves's cask B) The cask nearest the door B) The apple barrel C) I cannot answer."):
        asked = parse_options(text)
        assert asked.options == {} and asked.text == text
    # a mark in another form, or one that ends an option, repeats none
    plans = parse_options("Which plan? A) Plan A. B) Plan B. C) I cannot answer.")
    assert plans.options == {"A": "Plan A.", "B": "Plan B.", "C": "I cannot answer."}
    numbered = parse_options("Which plan?\n1. Plan 1.\n2. Plan 2.\n3. I cannot answer.")
    assert numbered.options == {"A": "Plan 1.", "B": "Plan 2.", "C": "I cannot answer."}


def test_a_question_typed_after_its_options_is_the_question() -> None:
    after = parse_options("A) The apple barrel B) The cask nearest the door C) I don't know. Which cask did you fill?")
    assert after.text == "Which cask did you fill?" and after.refusal == "C"
    assert after.options == {"A": "The apple barrel", "B": "The cask nearest the door", "C": "I don't know."}
    lined = parse_options("Jim:\nA) The apple barrel\nB) The cask\nC) I don't know\nwhich cask did you fill?")
    assert lined.text == "Jim: which cask did you fill?" and lined.options["C"] == "I don't know"
    titled = parse_options("A) Mr. Smith B) Mr. Jones. Who was it?")  # a title's stop ends no sentence
    assert titled.options == {"A": "Mr. Smith", "B": "Mr. Jones."} and titled.text == "Who was it?"
    # after a question, or with no stop before it, a last option that asks is the option's own
    assert parse_options("Which? A) x B) I do not know. Who?").options["B"] == "I do not know. Who?"
    assert parse_options("A) Who lit it? B) When did she go?").options == {"A": "Who lit it?", "B": "When did she go?"}


def test_a_line_of_dialogue_is_quoted_once() -> None:
    assert quoted('"And he took pages out of the ledger?"') == '"And he took pages out of the ledger?"'
    assert quoted("He took pages out of the ledger.") == '"He took pages out of the ledger."'
    # a sentence cut from inside a quotation: the stray closing mark goes, the quote is not doubled
    assert quoted("Jefferson Hope, the murderer of Enoch Drebber.”") == '"Jefferson Hope, the murderer of Enoch Drebber."'


def test_the_build_stores_the_floors_and_ask_reads_them(built_demo) -> None:
    calibration = load_calibration(built_demo, "mara-quell")
    assert calibration.calibrated and calibration.n_train > 0 and calibration != DEFAULT_CALIBRATION
    result = CliRunner().invoke(main, ["ask", built_demo, "Mara", "Who keeps the ledger?", "--lm", "none", "--json"])
    assert result.exit_code == 0, result.output
    offline = json.loads(result.output)["trace"]["offline"]
    assert offline["calibration"]["source"] == calibration.source


def test_every_character_of_a_book_answers_with_the_floors_of_all_its_readings(built_demo, demo_book) -> None:
    """The floors are the book's, chosen over every focus character's stored train readings together."""
    store = MemoryStore.for_home()
    stored = sum(store.read("reader_calibration", PartitionRef(built_demo, c.slug)).height for c in demo_book.characters)
    floors = {c.slug: load_calibration(built_demo, c.slug) for c in demo_book.characters}
    mara = floors["mara-quell"]
    assert mara.n_train == stored > store.read("reader_calibration", PartitionRef(built_demo, "mara-quell")).height
    assert all((f.option_floor, f.ratio_floor, f.question_floor, f.n_train) ==
               (mara.option_floor, mara.ratio_floor, mara.question_floor, mara.n_train) for f in floors.values())


def test_ask_and_eval_give_the_same_letter_for_every_gold_item(built_demo, demo_book, tmp_path: Path) -> None:
    items = gold_items(demo_book, demo_gold()["items"])
    path = tmp_path / "items.jsonl"
    path.write_text("".join(json.dumps(i.to_record()) + "\n" for i in items), encoding="utf-8")
    runner = CliRunner()
    result = runner.invoke(main, ["eval", built_demo, "--items", str(path), "--methods", "reveriemem",
                                  "--lm", "none", "--out", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    judged = {r["item_id"]: r["choice"] for r in pl.read_parquet(tmp_path / "run" / "results.parquet").to_dicts()}
    assert len(judged) == len(items)
    for item in items:
        asked = runner.invoke(main, ["ask", built_demo, item.character, render_question(item), "--lm", "none", "--json"])
        assert asked.exit_code == 0, asked.output
        reply = json.loads(asked.output)["reply"]
        assert matched_letter(reply, item) == judged[item.id], (item.id, reply)
