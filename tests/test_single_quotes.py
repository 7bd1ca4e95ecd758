"""A book that prints its speech in single quotation marks is read as one printed in double marks."""

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from reveriemem.core.quotes import read_speech_quotes, speech_in_single_quotes, speech_marks
from reveriemem.core.registry import load_book
from reveriemem_dagster.cli import main
from tests.test_presence_and_death import FILLER, read_story

SPEECH = """'You're up early,' said Ann. 'Couldn't you sleep?'

'Not a wink,' Bob answered. 'The ledger is missing, and Cy has the only key.'

'Aye,' said Ann, 'and 'tis the Smiths' boat that sails at noon.'

'Then ask Cy,' said Bob, 'before he says "gone" to it.'

'I will--' Ann began.

'Go on, then!' said Bob."""


def test_a_book_with_speech_in_double_marks_is_left_as_it_is():
    # six paragraphs open on a quotation in single marks, but more hold double ones: speech is in double marks
    text = "CHAPTER I.\n\n" + "\n\n".join(["'Aye,' said Ann, and the word ran round the room."] * 6
                                          + ['"Not a wink," Bob answered.'] * 4)
    assert not speech_in_single_quotes(text)
    assert read_speech_quotes(text) is text
    assert speech_in_single_quotes(text.replace('"', "'"))  # the same book printed with single marks


def test_a_licence_in_double_marks_does_not_hide_a_short_story_in_single_ones():
    story = "\n\n".join(f"'Line {i} of the talk,' said Ann.\n\nBob looked at the sea." for i in range(6))
    licence = "\n\n".join(['"Project Gutenberg" is a registered trademark.'] * 12)
    text = ("*** START OF THE PROJECT GUTENBERG EBOOK TALE ***\n\n" + story
            + "\n\n*** END OF THE PROJECT GUTENBERG EBOOK TALE ***\n\n" + licence)
    assert speech_in_single_quotes(text)  # only the story's body is read


def test_a_stanza_opening_on_an_elided_word_is_no_speech():
    # elisions no list holds: what tells them from speech is that nothing closes them
    stanzas = ["'Cross the heather on the hill\nLay the shepherd, cold and still.",
               "'Round the fold his mother cried,\nWhere is he that was my pride?",
               "'Long the birches and the burn\nWaited she for his return.",
               "'Fore the dawn they found him there,\nFrost upon his yellow hair.",
               "'Bove the wolf and past the storm,\nNone could keep his body warm.",
               "'Side the kirk they laid him low;\nNone would say the words of woe."]
    assert not speech_in_single_quotes("\n\n".join(stanzas))


@pytest.mark.parametrize(("printed", "read"), [
    ("'Who?'—he began—'who are you?'", "“Who?”—he began—“who are you?”"),  # a dash after the closing mark
    ("'Look!'--'God's seat!'--and he crossed himself.", "“Look!”--“God's seat!”--and he crossed himself."),
    ("He was never seen on 'Change. 'Hello,' said Bob.", "He was never seen on 'Change. “Hello,” said Bob."),
    ("'_Your_ saying so don't make it so.'", "“_Your_ saying so don't make it so.”"),  # italics first
    ("''Tis true,' said Ann.", "“'Tis true,” said Ann."),
    ("'...and then,' said Ann.", "“...and then,” said Ann."),
])
def test_where_a_single_mark_opens_or_closes_speech(printed, read):
    marks = dict(speech_marks(printed))
    assert "".join({"open": "“", "close": "”"}.get(marks.get(i, ""), ch) for i, ch in enumerate(printed)) == read


def test_single_marks_that_quote_are_read_as_double_ones_and_apostrophes_stay():
    text = "CHAPTER I.\n\nAnn came into the kitchen.\n\n" + SPEECH
    assert speech_in_single_quotes(text)
    read = read_speech_quotes(text)
    assert len(read) == len(text)  # one character for one: every offset is the file's
    assert "“You're up early,” said Ann. “Couldn't you sleep?”" in read
    assert "“Aye,” said Ann, “and 'tis the Smiths' boat that sails at noon.”" in read  # apostrophes stay
    assert "“Then ask Cy,” said Bob, “before he says 'gone' to it.”" in read  # a quotation inside speech
    assert "“I will--” Ann began." in read and "“Go on, then!” said Bob." in read
    assert read_speech_quotes(read) == read  # read once, read for good (a registered book is read again)


def test_the_speakers_of_single_quoted_speech_are_present_and_one_only_named_is_not(tmp_path):
    text = ("CHAPTER I.\n\nAnn came into the kitchen at dawn and found Bob already at the table.\n\n" + SPEECH
            + "\n\n" + "\n\n".join([FILLER] * 3) + "\n\nCHAPTER II.\n\nThe names of Ann Moss, Bob Hale and Cy "
            "Dunn are on the stone in the church.\n")
    _, reading, spans, evidence, _ = read_story(tmp_path, text)
    speakers = [u.speaker for u in reading.utterances(spans)]
    assert speakers == ["ann-moss", "bob-hale", "ann-moss", "bob-hale", "ann-moss", "bob-hale"]
    assert evidence[0]["bob-hale"].status() == "present_active"  # before: never speaking, only "referenced"
    assert evidence[0]["cy-dunn"].status() == "referenced"  # named in the speech only


def test_a_registered_single_quoted_book_reads_the_same_when_loaded_again(tmp_path: Path):
    text = ("*** START OF THE PROJECT GUTENBERG EBOOK TALE ***\r\n\r\nCHAPTER I.\r\n\r\nAnn came into the kitchen "
            "at dawn.\r\n\r\n" + SPEECH.replace("\n", "\r\n") + "\r\n\r\n" + "\r\n\r\n".join([FILLER] * 20)
            + "\r\n\r\n*** END OF THE PROJECT GUTENBERG EBOOK TALE ***\r\n")
    (tmp_path / "tale.txt").write_text(text, encoding="utf-8", newline="")
    (tmp_path / "tale.yaml").write_text("characters:\n  - name: Ann Moss\n    aliases: [Ann]\n  - name: Bob Hale\n"
                                        "    aliases: [Bob]\n", encoding="utf-8")
    result = CliRunner().invoke(main, ["add-book", str(tmp_path / "tale.txt"), "--characters",
                                       str(tmp_path / "tale.yaml")])
    assert result.exit_code == 0, result.output
    assert "its speech is in single quotation marks" in result.output  # the user is told how it is read
    book = load_book("tale")
    assert book.info["speech_marks"] == "single" and book.info["paragraphs"] == "blank lines"
    assert len(book.text) == len(text)
    assert book.text[book.text.find("“Not a wink,”"):].startswith("“Not a wink,” Bob answered.")
    # a book registered before speech marks were read: its stored text has them as printed, and is read at load
    folder = tmp_path / "home" / "books" / "tale"
    info = json.loads((folder / "book.json").read_text(encoding="utf-8"))
    del info["speech_marks"]
    (folder / "book.json").write_text(json.dumps(info), encoding="utf-8")
    (folder / "source.txt").write_text(text, encoding="utf-8", newline="")
    assert load_book("tale").text == book.text
