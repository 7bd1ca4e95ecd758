from pathlib import Path

import pytest

from reveriemem.core.errors import BookInputError
from reveriemem.core.text import (
    decode_book_bytes,
    find_all_text,
    find_body,
    find_text,
    fold_small_caps,
    read_book_file,
    sentence_runs,
    split_paragraphs,
)


def test_utf8_with_bom_and_crlf_keeps_offsets_into_the_decoded_text():
    raw = "\ufeffTitle\r\n\r\nFirst line\r\nsame paragraph.\r\n\r\nSecond “quoted” one.\r\n".encode()
    decoded = decode_book_bytes(raw, "x")
    assert decoded.encoding == "utf-8"
    paragraphs = split_paragraphs(decoded.text)
    assert [p.text for p in paragraphs][1] == "First line\r\nsame paragraph."
    for p in paragraphs:
        assert decoded.text[p.start : p.end] == p.text


def test_windows_1252_and_latin1_are_decoded():
    assert decode_book_bytes("caf\u00e9 \u2014 na\u00efve".encode("cp1252"), "x").text == "caf\u00e9 \u2014 na\u00efve"
    latin = "Ol\u00e9 \x8d".encode("latin-1")  # 0x8d is undefined in cp1252
    assert decode_book_bytes(latin * 1, "x").encoding == "latin-1"


@pytest.mark.parametrize(
    ("raw", "message"),
    [(b"", "empty"), (b"  \r\n\t", "empty"), (b"PK\x03\x04\x00\x00binary", "binary"),
     (bytes(range(128, 160)) * 50, "could not be decoded")],
)
def test_bad_bytes_get_one_clear_sentence(raw: bytes, message: str):
    with pytest.raises(BookInputError, match=message):
        decode_book_bytes(raw, "book.txt")


def test_missing_file(tmp_path: Path):
    with pytest.raises(BookInputError, match="does not exist"):
        read_book_file(tmp_path / "nope.txt")


def test_gutenberg_header_and_footer_are_stripped():
    text = ("Header words\r\n*** START OF THE PROJECT GUTENBERG EBOOK X ***\r\n\r\nStory begins here.\r\n\r\n"
            "*** END OF THE PROJECT GUTENBERG EBOOK X ***\r\nLicence.")
    start, end = find_body(text)
    assert text[start:end] == "Story begins here."


def test_the_publishers_back_matter_after_the_end_is_no_story():
    story = "CHAPTER I\r\n\r\n" + "The lamps were lit along the wall and the boats came home. " * 40
    closed = story + "\r\n\r\nJONATHAN HARKER.\r\n\r\n    THE END\r\n\r\n_There's More to Follow!_ More stories of the sort you like.\r\n"
    start, end = find_body(closed)
    assert closed[start:end].endswith("JONATHAN HARKER.")  # the ad after THE END is not read as story
    # a last chapter called "The End", a book's part ending, or THE END early in the book close nothing
    titled = story + "\n\nCHAPTER XXX\n\nThe End\n\n" + "She walked home at last. " * 10
    assert find_body(titled)[1] == len(titled.rstrip())
    part = story + "\n\nTHE END OF THE FIRST BOOK.\n\nThe second book begins.\n"
    assert find_body(part)[1] == len(part.rstrip())
    early = "THE END\n\n" + story
    assert find_body(early)[1] == len(early.rstrip())
    for heading in ("XXX.", "EPILOGUE", "Chapter the Last"):  # other shapes of a last chapter's heading
        titled = f"{story}\n\n{heading}\n\nThe End\n\n" + "She walked home at last. " * 10
        assert find_body(titled)[1] == len(titled.rstrip())
    for closing in ("_THE END_", "[THE END]", "FINIS.", "THE END.  "):  # printed forms of the closing line
        ended = f"{story}\r\n\r\nPart of him stayed there.\r\n\r\n{closing}\r\n\r\nMore titles.\r\n"
        assert closed_at(ended).endswith("Part of him stayed there.")
    signed = story + "\n\nYours ever,\n\nL.\n\nTHE END\n\nMore titles.\n"  # a signed initial is no heading
    assert closed_at(signed).endswith("L.")
    continued = story + "\n\nThe end.\n\nShe walked home.\n\nTHE END\n\nCHAPTER XXXI\n\nThe morning after.\n"
    assert find_body(continued)[1] == len(continued.rstrip())  # a sentence "The end." or a chapter after: no cut


def test_a_transcribers_notes_at_the_end_are_no_story():
    story = "CHAPTER I\r\n\r\n" + "The lamps were lit along the wall and the boats came home. " * 40
    for heading in ("ORIGINAL TRANSCRIBER\u2019S NOTES:", "TRANSCRIBER'S NOTE"):
        noted = f"{story}\r\n\r\nIn the meantime, be content.\r\n\r\n{heading}\r\n\r\n[Footnote 1: a caption.]\r\n"
        assert closed_at(noted).endswith("In the meantime, be content.")  # the footnotes are no story
    early = "TRANSCRIBER'S NOTES\n\n" + story  # a note before the story cuts nothing
    assert find_body(early)[1] == len(early.rstrip())
    inside = f"{story}\n\n[Transcriber's Note:\nA leaf is missing here.]\n\nShe walked home at last.\n"
    assert find_body(inside)[1] == len(inside.rstrip())  # a bracketed note inside the story is no heading


def closed_at(text: str) -> str:
    start, end = find_body(text)
    return text[start:end]


def test_text_without_gutenberg_framing_is_all_body():
    assert find_body("Just a story.\n") == (0, len("Just a story."))


def test_a_title_before_a_name_ends_no_sentence_run():
    text = ("He was following Mr. Fogg's tracks step by step. What was Dr. Seward's object? He lived at No. 7, "
            "Saville Row. \"No.\" It cost 3.5 pounds.")
    runs = [run.group().strip() for run in sentence_runs(text)]
    assert runs[:4] == ["He was following Mr. Fogg's tracks step by step.", "What was Dr. Seward's object?",
                        "He lived at No. 7, Saville Row.", "\"No.\""]
    assert "".join(run.group() for run in sentence_runs(text)) == text  # runs still cover the text, in order
    assert [run.group() for run in sentence_runs("I wrote to Mr.")] == ["I wrote to Mr."]  # at the end, it ends one
    # "Co." before a small letter goes on (a quoted fact was "will pocket all the credit."); before a capital it ends
    text = "You may be sure that Gregson, Lestrade, and Co. will pocket all the credit. I sold it to Smith and Co. He paid."
    assert [run.group().strip() for run in sentence_runs(text)] == [
        "You may be sure that Gregson, Lestrade, and Co. will pocket all the credit.", "I sold it to Smith and Co.",
        "He paid."]


def test_a_marker_is_found_as_a_reader_copies_it_across_line_breaks_and_quotation_marks():
    text = "Mr. Fogg lived at No. 7, Saville Row, Burlington\r\nGardens.  \u201cYes,\u201d he said. It\u2019s late."
    at = text.index("Saville")
    for marker in ("Saville Row, Burlington Gardens", "Saville Row, Burlington\nGardens", "Saville  Row,\tBurlington"):
        assert find_all_text(text, marker) == [at], marker  # a space, LF or tab for the file's CRLF
    assert find_text(text, '"Yes," he said. It\'s late.') == text.index("\u201cYes")  # straight quotes for curly
    assert find_text(text, "Saville Row Burlington") == -1  # the words must still be the book's, comma and all


def test_a_chapter_opening_in_small_capitals_reads_as_its_word_at_the_same_offsets():
    text = ("CHAPTER IV.\r\n\r\nTHE SEA CHEST\r\n\r\nWE rode hard all the way.\r\n\r\n\"WELL, sir,\" said he. "
            "The NOT in a sentence stays.\r\n\r\nHISPANIOLA and offered a target.")
    folded = fold_small_caps(text)
    assert len(folded) == len(text)
    assert "\r\nWe rode hard" in folded and '"Well, sir,"' in folded and "\r\nHispaniola and" in folded
    assert "CHAPTER IV." in folded and "THE SEA CHEST" in folded and "The NOT in" in folded  # headings, emphasis
    assert fold_small_caps(folded) == folded
    # a marker copied from the book file, capitals and all, is found in the folded text
    assert find_text(folded, "WE rode hard") == text.index("WE rode hard")
    assert find_text(folded, "no such words") == -1
    # nothing across a paragraph break, no numeral, no signature
    for kept in ("II.\n\n\u201cWell,\u201d said Ann", "XIV said the clerk", '"LUCY."\n\nThe next day', "CONTENTS\n\nI. The"):
        assert fold_small_caps(kept) == kept, kept
    # a folded form counts only where a paragraph opens: the marker is found once, at its own place
    text = "At dawn. Ann sat alone by the window.\n\nANN sat alone by the fire."
    assert find_all_text(fold_small_caps(text), "ANN sat alone") == [text.index("ANN sat alone")]
