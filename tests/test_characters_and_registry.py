from pathlib import Path

import pytest
from click.testing import CliRunner

from reveriemem.core.characters import load_character_file, resolve_narrator_spans
from reveriemem.core.errors import CharacterFileError
from reveriemem.core.registry import list_books, load_book
from reveriemem_dagster.cli import main
from tests.conftest import write_book

STORY = ("CHAPTER I. THE MEETING\r\n\r\nI met Holmes at the laboratory. Holmes rose and shook my hand.\r\n\r\n"
         "\"You have been in Afghanistan, Watson,\" said Holmes.\r\n\r\nCHAPTER II. ALONE\r\n\r\n"
         "Mrs. Hudson cleared the table while we were out, and thought about Lestrade.\r\n")
CHARACTERS = """characters:
  - name: Sherlock Holmes
    aliases: [Holmes]
    gender: male
  - name: John Watson
    aliases: [Watson]
    gender: male
    narrator_spans: all
  - name: Mrs. Hudson
    aliases: [Mrs. Hudson]
    gender: female
"""


def _files(tmp_path: Path, story: str = STORY, characters: str = CHARACTERS) -> tuple[Path, Path]:
    book = write_book(tmp_path, story, name="tale.txt", gutenberg=True)
    chars = tmp_path / "tale.yaml"
    chars.write_text(characters, encoding="utf-8")
    return book, chars


def test_add_book_registers_with_slug_from_file_name(tmp_path: Path):
    book, chars = _files(tmp_path)
    result = CliRunner().invoke(main, ["add-book", str(book), "--characters", str(chars)])
    assert result.exit_code == 0, result.output
    assert list_books() == ["tale"]
    registered = load_book("tale")
    assert registered.text[registered.body_start :].startswith("CHAPTER I.")
    assert registered.character("watson").narrator_spans == [(registered.body_start, registered.body_end)]
    assert "never occurs" in result.output  # John Watson's canonical name is not in the text


def test_a_canonical_name_that_never_occurs_is_not_warned_of_as_an_alias(tmp_path: Path):
    characters = CHARACTERS.replace("aliases: [Watson]", "aliases: [Watson, John  Watson]")
    book, chars = _files(tmp_path, characters=characters)
    result = CliRunner().invoke(main, ["add-book", str(book), "--characters", str(chars)])
    assert result.exit_code == 0, result.output
    assert "The alias 'John Watson'" not in result.output and "The alias 'John  Watson'" not in result.output
    assert "The name 'John Watson' itself never occurs" in result.output
    assert load_book("tale").character("Watson").aliases == ["Watson"]


def test_a_character_is_found_by_the_name_a_reader_writes(tmp_path: Path):
    from reveriemem.core.errors import RegistryError
    from reveriemem.core.registry import prepare_book

    story = STORY + "\r\nHarker and Mina Harker came in.\r\n"
    book, _ = prepare_book(*_files(tmp_path, story=story, characters=CHARACTERS + "  - name: Jonathan Harker\n    aliases: [Harker]\n"
                                   "    gender: male\n  - name: Mina Harker\n    aliases: [Mina, Miss Murray]\n"
                                   "    gender: female\n"))
    for written, name in [("Dr. Watson", "John Watson"), ("Mr Holmes", "Sherlock Holmes"),
                          ("Inspector Sherlock Holmes", "Sherlock Holmes"), ("Mrs. Mina Harker", "Mina Harker"),
                          ("Harker", "Jonathan Harker"), ("Miss Murray", "Mina Harker"),
                          ("John", "John Watson")]:  # one word of one character's name only
        assert book.character(written).name == name, written
    # no one, or not one of them: another person of the same name, a title that does not fit, more words
    for other in ("Mycroft Holmes", "Mrs. Holmes", "Mrs. Murray", "Mr. Mina", "Dr. John H. Watson", "Holmes's brother",
                  "Mary", "Mr"):
        with pytest.raises(RegistryError, match="not a focus character"):
            book.character(other)


SCARLET = """characters:
  - name: Sherlock Holmes
    aliases: [Holmes, Sherlock]
    gender: male
  - name: John Watson
    aliases: [Watson, Dr. Watson]
    gender: male
  - name: Tobias Gregson
    aliases: [Gregson, Mr. Gregson]
    gender: male
  - name: Jefferson Hope
    aliases: [Jefferson]
    gender: male
  - name: Mara Quell
    gender: female
  - name: Ann Quell
    gender: female
  - name: Long John Silver
    aliases: [Van der Berg, my friend]
    gender: male
"""


def _scarlet(tmp_path: Path):
    from reveriemem.core.registry import prepare_book

    story = STORY + "\r\nGregson, Jefferson, Mara Quell, Ann Quell and Long John Silver waited.\r\n"
    return prepare_book(*_files(tmp_path, story=story, characters=SCARLET))[0]


@pytest.mark.parametrize(("written", "name"), [
    ("“Mara Quell”", "Mara Quell"), ('"Mara Quell"', "Mara Quell"), ("'Mara Quell'", "Mara Quell"),
    ("‘Watson’", "John Watson"), (' " Dr. Watson " ', "John Watson"),
    ("Hope", "Jefferson Hope"), ("hope", "Jefferson Hope"), ("Tobias", "Tobias Gregson"), ("TOBIAS", "Tobias Gregson"),
    ("“Hope”", "Jefferson Hope"), ("Mara", "Mara Quell"), ("Mr. Hope", "Jefferson Hope"), ("Miss Mara", "Mara Quell"),
])
def test_a_quoted_name_or_one_word_of_one_characters_name_finds_them(tmp_path: Path, written: str, name: str):
    assert _scarlet(tmp_path).character(written).name == name


def test_a_word_of_several_characters_names_lists_them_and_a_word_of_none_is_no_one(tmp_path: Path):
    from reveriemem.core.errors import RegistryError

    book = _scarlet(tmp_path)
    with pytest.raises(RegistryError, match=r"'Quell' is not a focus character of tale: .*Mara Quell, Ann Quell"):
        book.character("Quell")
    # a particle, a common word or a lower-case word of an alias names no one ("Long" is not Long John Silver)
    for nobody in ("Hop", "Lestrade", "Mr", "Dr.", "“”", "Hope Tobias", "Mrs. Hope", "long", "van", "der", "friend",
                   "Jo", "Mr. Mara"):
        with pytest.raises(RegistryError, match=r"is not a focus character of tale \(known: "):
            book.character(nobody)


def test_a_book_is_found_by_its_name_as_written_and_a_near_miss_is_offered(tmp_path: Path):
    from reveriemem.core.errors import RegistryError

    book, chars = _files(tmp_path)
    runner = CliRunner()
    result = runner.invoke(main, ["add-book", str(book), "--characters", str(chars), "--name", "A Study in Scarlet"])
    assert result.exit_code == 0, result.output
    assert list_books() == ["a-study-in-scarlet"]
    for written in ("A-Study-In-Scarlet", "A Study in Scarlet", " a study in scarlet "):
        assert load_book(written).slug == "a-study-in-scarlet", written
    result = runner.invoke(main, ["chapters", "A Study In Scarlet"])
    assert result.exit_code == 0 and "Not built yet: run `reveriemem build a-study-in-scarlet`" in result.output
    for near in ("study-in-scarlet", "A Study in Scralet", "scarlet"):
        with pytest.raises(RegistryError, match=r"did you mean 'a-study-in-scarlet'\? Registered: a-study-in-scarlet\."):
            load_book(near)
    with pytest.raises(RegistryError, match=r"No book named 'moby-dick' is registered \(registered: a-study-in-scarlet\); "
                                            r"run `reveriemem add-book"):
        load_book("moby-dick")
    with pytest.raises(RegistryError, match="No book is named '!!!': a book's name has a letter or a digit"):
        load_book("!!!")


@pytest.mark.parametrize(
    ("content", "message"),
    [(None, "does not exist"), (b"", "is empty"), (b"\x00\x01\x02binary", "binary")],
)
def test_bad_book_files_fail_with_one_sentence_and_keep_earlier_books(tmp_path: Path, content, message):
    book, chars = _files(tmp_path)
    runner = CliRunner()
    assert runner.invoke(main, ["add-book", str(book), "--characters", str(chars)]).exit_code == 0
    bad = tmp_path / "bad.txt"
    if content is not None:
        bad.write_bytes(content)
    result = runner.invoke(main, ["add-book", str(bad), "--characters", str(chars)])
    assert result.exit_code == 1
    assert message in result.output
    assert "Traceback" not in result.output
    assert list_books() == ["tale"]
    assert load_book("tale").characters[0].name == "Sherlock Holmes"


def test_duplicate_book_is_refused_and_the_first_is_untouched(tmp_path: Path):
    book, chars = _files(tmp_path)
    runner = CliRunner()
    runner.invoke(main, ["add-book", str(book), "--characters", str(chars)])
    before = load_book("tale").info["sha256"]
    result = runner.invoke(main, ["add-book", str(book), "--characters", str(chars)])
    assert result.exit_code == 1 and "already registered" in result.output
    assert load_book("tale").info["sha256"] == before
    assert runner.invoke(main, ["add-book", str(book), "--characters", str(chars), "--name", "tale-2"]).exit_code == 0


def test_character_whose_names_never_occur_is_an_error(tmp_path: Path):
    book, chars = _files(tmp_path, characters=CHARACTERS + "  - name: Dracula\n    aliases: [the Count]\n")
    result = CliRunner().invoke(main, ["add-book", str(book), "--characters", str(chars)])
    assert result.exit_code == 1
    assert "None of the names of Dracula" in result.output
    assert list_books() == []


@pytest.mark.parametrize(
    ("yaml_text", "message"),
    [("characters: []", "lists no characters"), ("foo: 1", "characters:"),
     ("characters:\n  - aliases: [X]", "non-empty `name`"),
     ("characters:\n  - name: A\n  - name: A", "twice"),
     ("characters:\n  - name: A\n    gender: dragon", "gender"),
     ("characters: [", "not valid YAML")],
)
def test_malformed_character_files(tmp_path: Path, yaml_text: str, message: str):
    path = tmp_path / "c.yaml"
    path.write_text(yaml_text, encoding="utf-8")
    with pytest.raises(CharacterFileError, match=message):
        load_character_file(path)


def test_narrator_spans_close_at_end_marker_or_next_narrator(tmp_path: Path):
    path = tmp_path / "c.yaml"
    path.write_text("""characters:
  - name: Jonathan
    narrator_spans: [{start: "JONATHAN'S JOURNAL"}]
  - name: Mina
    narrator_spans: [{start: "MINA'S JOURNAL", end: "THE END"}]
""", encoding="utf-8")
    _, characters = load_character_file(path)
    text = "JONATHAN'S JOURNAL one. MINA'S JOURNAL two. THE END. JONATHAN'S JOURNAL three."
    resolve_narrator_spans(characters, text, (0, len(text)), "t")
    jonathan, mina = characters
    assert [text[a:b] for a, b in jonathan.narrator_spans] == ["JONATHAN'S JOURNAL one. ", "JONATHAN'S JOURNAL three."]
    assert [text[a:b] for a, b in mina.narrator_spans] == ["MINA'S JOURNAL two. "]


def test_shipped_character_files_register_their_novels(tmp_path: Path):
    from tests.conftest import SHARED_BOOKS

    if not SHARED_BOOKS.exists():
        pytest.skip("the shared books folder is not beside the checkout")
    runner = CliRunner()
    for path in sorted(SHARED_BOOKS.glob("*.txt")):
        if path.stem == "GITENBERG_LICENSE":
            continue
        result = runner.invoke(main, ["add-book", str(path)])
        assert result.exit_code == 0, f"{path.name}: {result.output}"
    assert len(list_books()) == 6


@pytest.mark.parametrize("name", ["..", "/", " ", "--"])
def test_a_book_name_without_a_letter_or_digit_is_no_book_and_no_folder(tmp_path: Path, name: str):
    from reveriemem.core.errors import RegistryError
    from reveriemem.core.registry import load_book

    with pytest.raises(RegistryError, match="a book's name has a letter or a digit"):
        load_book(name, tmp_path)


def test_a_title_with_an_apostrophe_finds_the_book_registered_without_it(tmp_path: Path):
    from reveriemem.core.registry import registered_slug

    book, chars = _files(tmp_path)
    result = CliRunner().invoke(main, ["add-book", str(book), "--characters", str(chars), "--name",
                                       "the-lamplighters-ledger"])
    assert result.exit_code == 0, result.output
    for written in ("The Lamplighter's Ledger", "The Lamplighter’s Ledger", "the-lamplighters-ledger"):
        assert load_book(written).slug == "the-lamplighters-ledger", written
    assert registered_slug("Ann's Tale", []) == "ann-s-tale"  # nothing registered: the name as add-book makes it


def test_a_title_several_books_share_names_the_slugs_to_choose_from(tmp_path: Path):
    from reveriemem.core.errors import RegistryError
    from reveriemem.core.registry import registered_slug

    book, chars = _files(tmp_path, characters="title: The Saltmarsh Bell\n" + CHARACTERS)
    for name in ("bell-a", "bell-b"):
        result = CliRunner().invoke(main, ["add-book", str(book), "--characters", str(chars), "--name", name])
        assert result.exit_code == 0, result.output
    result = CliRunner().invoke(main, ["chapters", "The Saltmarsh Bell"])
    assert result.exit_code == 1
    assert result.output.strip() == ("Error: The title 'The Saltmarsh Bell' is shared by 2 registered books; "
                                     "name one by its slug: bell-a, bell-b.")
    assert load_book("bell-b").slug == "bell-b"
    with pytest.raises(RegistryError, match="shared by 2"):  # as the server reads a model's book
        registered_slug("the saltmarsh bell", ["bell-a", "bell-b"], {"bell-a": "The Saltmarsh Bell",
                                                                       "bell-b": "The Saltmarsh Bell"})
    CliRunner().invoke(main, ["remove-book", "bell-a"])
    assert load_book("The Saltmarsh Bell").slug == "bell-b"  # one book of that title: found by it


def test_a_descriptor_of_one_character_finds_them_and_a_relational_one_finds_no_one(tmp_path: Path):
    from reveriemem.core.errors import RegistryError
    from reveriemem.core.registry import prepare_book

    characters = CHARACTERS.replace("    aliases: [Watson]\n", "    aliases: [Watson]\n    descriptors: [the doctor]\n") \
        .replace("    aliases: [Holmes]\n", "    aliases: [Holmes]\n    descriptors: [my companion]\n")
    story = STORY + "\r\nThe doctor sat down. My companion laughed.\r\n"
    book = prepare_book(*_files(tmp_path, story=story, characters=characters))[0]
    assert book.character("the doctor").name == "John Watson"
    assert book.character("The Doctor").name == "John Watson"
    with pytest.raises(RegistryError, match="not a focus character"):
        book.character("my companion")


def test_names_with_accents_or_in_other_scripts_make_safe_keys_and_are_found_accents_aside(tmp_path: Path):
    import re

    from reveriemem.core.characters import slugify

    story = STORY + "\r\nZoë Laurent met José Ibáñez, and 李白 and 杜甫 wrote to Søren.\r\n"
    characters = CHARACTERS + "".join(f"  - name: {name}\n" for name in ("Zoë Laurent", "José Ibáñez", "李白", "杜甫"))
    book, chars = _files(tmp_path, story=story, characters=characters)
    result = CliRunner().invoke(main, ["add-book", str(book), "--characters", str(chars)])
    assert result.exit_code == 0, result.output
    registered = load_book("tale")
    slugs = {c.name: c.slug for c in registered.characters}
    assert slugs["Zoë Laurent"] == "zoe-laurent" and slugs["José Ibáñez"] == "jose-ibanez"
    assert slugs["李白"] != slugs["杜甫"] and slugs["李白"] == slugify("李白") == slugify(" 李白 ")
    assert all(re.fullmatch(r"[a-z0-9]+(?:-[a-z0-9]+)*", slug) for slug in slugs.values()), slugs
    for written, name in [("Zoe", "Zoë Laurent"), ("zoe laurent", "Zoë Laurent"), ("ZOË", "Zoë Laurent"),
                          ("Jose Ibanez", "José Ibáñez"), ("Ibanez", "José Ibáñez"), ("李白", "李白"),
                          (slugs["杜甫"], "杜甫")]:
        assert registered.character(written).name == name, written
    # names in ASCII keep their keys
    assert [slugify(n) for n in ("Sherlock Holmes", "Mrs. Hudson", "Long John Silver", "A Study in Scarlet",
                                 "Cap'n Flint")] == ["sherlock-holmes", "mrs-hudson", "long-john-silver",
                                                     "a-study-in-scarlet", "cap-n-flint"]
    assert slugify("Søren Straße") == "soren-strasse"
    with pytest.raises(CharacterFileError, match="no letters or digits"):
        slugify("--")
