"""A book that prints its speech in single quotation marks is read as one printed in double marks."""

from pathlib import Path

from click.testing import CliRunner

from reveriemem.core.quotes import read_speech_quotes, speech_in_single_quotes
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
    text = 'CHAPTER I.\n\n"Not a wink," Bob answered.\n\n' + "\n\n".join(["'Aye,' said Ann."] * 3)
    assert not speech_in_single_quotes(text)
    assert read_speech_quotes(text) is text


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
