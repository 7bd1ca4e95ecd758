"""KBF-QA items: the JSONL format, and cloze generation from the demo story's built memory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval.generate import BLANK, CLOZE_METHOD, generate_items
from eval.items import REFUSAL_OPTION, ItemFileError, gold_items, read_items, write_items
from eval.memory import load_book_memory
from reveriemem.core.demo import demo_gold
from reveriemem.core.registry import load_book
from reveriemem.inference.offline_reader import Rarity, read_options, stem, terms

ITEM = {"id": "x1", "character": "Mara", "split": "KRf", "question": "Mara, which cask?",
        "options": {"A": "the red one", "B": "the cask nearest the door", "C": "none", "D": "the last",
                    "E": REFUSAL_OPTION}, "gold": "B"}


def _write(tmp_path: Path, *records: object) -> Path:
    path = tmp_path / "items.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n", encoding="utf-8")
    return path


def test_items_read_by_alias_ignore_extra_fields_and_round_trip(tmp_path: Path, demo_book) -> None:
    path = _write(tmp_path, {**ITEM, "difficulty": "hard", "annotator": "x", "split": "krf "})
    [item] = read_items(path, demo_book)
    assert item.character == "Mara Quell"  # an alias resolves to the canonical name
    assert item.split == "KRf"  # the split as written in any case
    assert item.book == demo_book.slug and item.method == "hand-written"
    again = tmp_path / "again.jsonl"
    write_items(again, [item])
    assert read_items(again, demo_book) == [item]


@pytest.mark.parametrize(("change", "message"), [
    ({"character": "Nobody Atall"}, "not a focus character"),
    ({"split": "KR"}, "KR item's gold is E"),
    ({"gold": "E"}, "KRf item's gold is one of A to D"),
    ({"options": {"A": "x", "B": "x", "C": "y", "D": "z", "E": REFUSAL_OPTION}}, "same thing"),
    ({"options": {"A": "x", "B": "y"}}, "exactly A, B, C, D and E"),
    ({"book": "dracula"}, "not 'the-lamplighters-ledger'"),
])
def test_bad_items_get_one_sentence_naming_the_line(tmp_path: Path, demo_book, change, message) -> None:
    path = _write(tmp_path, ITEM, {**ITEM, "id": "x2", **change})
    with pytest.raises(ItemFileError, match=message) as info:
        read_items(path, demo_book)
    assert "line 2" in str(info.value)


def test_unreadable_item_files(tmp_path: Path, demo_book) -> None:
    with pytest.raises(ItemFileError, match="does not exist"):
        read_items(tmp_path / "missing.jsonl", demo_book)
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"id": "x1", \n', encoding="utf-8")
    with pytest.raises(ItemFileError, match="line 1 is not JSON"):
        read_items(broken, demo_book)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n", encoding="utf-8")
    with pytest.raises(ItemFileError, match="holds no items"):
        read_items(empty, demo_book)
    twice = _write(tmp_path, ITEM, ITEM)
    with pytest.raises(ItemFileError, match="used twice"):
        read_items(twice, demo_book)


def test_the_demo_gold_items_are_valid_items(demo_book) -> None:
    items = gold_items(demo_book, demo_gold()["items"])
    assert len(items) == 30 and {i.split for i in items} == {"KRf", "KR"}


def test_light_stems_meet_inflections() -> None:
    assert stem("lamps") == stem("lamp") and stem("filled") == stem("fill") and stem("stopped") == "stop"
    assert terms("The Lamplighter's lamps were filled") == ["lamplighter", "lamp", "fill"]


def test_stems_meet_irregular_verbs_and_the_silent_e() -> None:
    # a question asks in the present what the book tells in the past
    assert stem("found") == stem("find") and stem("struck") == stem("strike") and stem("written") == stem("write")
    assert stem("wrote") == stem("writing") == stem("write") and stem("came") == stem("coming") == stem("come")
    assert stem("hated") == stem("hate") != stem("hat") and stem("caused") == stem("cause")
    assert stem("tried") == stem("try") and stem("dying") == stem("died") == stem("die")
    assert stem("speed") == "speed" and stem("proceeded") == stem("proceed")  # "-eed" is not cut to "-e"
    assert stem("tries") == stem("try") and stem("going") == stem("went") and stem("spring") == stem("sprang")
    # a form that is mostly another word keeps its own family; a noun told by the verb's form goes with it
    assert stem("wound") == stem("wounds") != stem("wind") and stem("bit") == stem("bits")
    assert stem("thoughts") == stem("thought") == stem("think")
    # the silent e: not dropped where the word without it is another word; spellings first
    assert stem("quite") != stem("quit") and stem("borne") != stem("born")
    assert stem("cheque") == stem("cheques") == stem("check")


def test_an_adverb_meets_its_word_and_a_noun_in_ly_is_left_whole() -> None:
    assert stem("terribly") == stem("terrible") and stem("happily") == stem("happy") and stem("sadly") == stem("sad")
    assert stem("hurriedly") == stem("hurry") and stem("fully") == stem("full") and stem("simply") == stem("simple")
    assert stem("physically") == stem("physical") and stem("gently") == stem("gentle")
    assert stem("family") == stem("families") and stem("reply") == stem("replied") and stem("early") != stem("ear")


def test_an_option_is_read_across_an_irregular_verb() -> None:
    passages = ["Mara found a brass key under the cask.", "Mara finds the ledger torn on the desk."]
    reading = read_options("What did Mara find under the cask?", {"A": "A torn ledger", "B": "A brass key"},
                           passages, Rarity(passages), names=[])
    assert reading.choice == "B"


def test_cloze_items_from_the_built_demo(built_demo) -> None:
    book = load_book(built_demo)
    memory = load_book_memory(book.slug)
    facts = {f["fact_id"]: f for f in memory.facts}
    all_items = []
    for character in book.characters:
        items = generate_items(book, character, memory.facts, memory.entities, per_split=20)
        all_items += items
        for item in items:
            answer = item.provenance["answer"]
            fact = facts[item.fact]
            visible = character.slug in fact["visibility"]
            assert item.method == CLOZE_METHOD and BLANK in item.question
            assert (item.split == "KRf") == visible  # the split follows the fact's visibility
            assert answer.casefold() not in item.question.casefold()  # the question does not give it away
            assert answer in item.options.values()  # the true answer stands among the options, KR included
            assert len({o.casefold() for o in item.options.values()}) == 5
            others = [o for k, o in item.options.items() if k != "E" and o != answer]
            assert not any(o in fact["evidence"] for o in others)  # exactly one option is true
            assert item.provenance["part"] in ("train", "held-out")
            if item.split == "KRf":
                assert item.options[item.gold] == answer
            else:
                assert item.gold == "E" and not fact["common"]
    splits = {i.split for i in all_items}
    assert splits == {"KRf", "KR"}
    assert {i.provenance["part"] for i in all_items} == {"train", "held-out"}
    # generation is deterministic: a second run gives the same items
    again = []
    for character in book.characters:
        again += generate_items(book, character, memory.facts, memory.entities, per_split=20)
    assert again == all_items
