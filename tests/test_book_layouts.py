"""A book with one paragraph to a line (an e-book exported to text) is read paragraph by paragraph."""

import textwrap

from click.testing import CliRunner

from reveriemem.core.layout import BLANK_LINES, INDENTED, LINE_ENDS, paragraph_break
from reveriemem.core.registry import load_book
from reveriemem.core.text import split_paragraphs
from reveriemem_dagster.cli import main
from tests.test_presence_and_death import FILLER, read_story

STORY = [
    "CHAPTER I.",
    "Ann came into the kitchen at dawn and found Bob already at the table, bent over the harbour ledger with a "
    "candle guttering beside his elbow and the shutters still closed against the grey morning outside.",
    '"You\'re up early," said Ann, taking off her wet shawl and hanging it by the fire to dry. "Couldn\'t you '
    'sleep at all, or has the ledger kept you up the whole night long again?"',
    '"Not a wink," Bob answered, without lifting his eyes from the page. "The last page of the ledger is gone, '
    'and Cy has the only key to the drawer it was kept in."',
    "Ann poured the tea and sat down across from him, and for a long while neither of them said a word while the "
    "wind worried at the shutters and the candle burned down.",
    "CHAPTER II.",
    "Cy was alone on the quay when the boat came in, his hands in his pockets and his collar up against the rain "
    "that had been falling since the night before, and he did not look round.",
]


# a paragraph of narration, longer than a wrapped line as most are
LONG = FILLER + " Nobody in the house slept, and at first light the boats were still drawn up on the shingle."


def _lines(paragraphs: list[str], newline: str = "\r\n") -> str:
    return newline.join(paragraphs) + newline


def test_one_paragraph_to_a_line_breaks_at_every_line_end_and_wrapped_text_at_blank_lines():
    text = _lines(STORY + [LONG] * 20)
    assert paragraph_break(text) is LINE_ENDS
    assert [p.text for p in split_paragraphs(text)][:3] == STORY[:3]
    wrapped = "\r\n\r\n".join("\r\n".join(textwrap.wrap(p, 70)) for p in STORY)
    assert paragraph_break(wrapped) is BLANK_LINES  # Gutenberg's layout: lines of 70, blank lines between
    assert len(split_paragraphs(wrapped)) == len(STORY)
    unbroken = "\r\n".join(wrapped.replace("\r\n\r\n", "\r\n").splitlines())  # wrapped, with no blank line at all
    assert paragraph_break(unbroken) is BLANK_LINES  # nothing says where a paragraph opens: read as before
    indented = "\r\n".join("\r\n".join(textwrap.wrap(p, 70, initial_indent="    ")) for p in STORY)
    assert paragraph_break(indented) is INDENTED  # an old electronic text: paragraphs open on an indented line
    assert [" ".join(p.text.split()) for p in split_paragraphs(indented)] == STORY
    talk = [f'"Line {i} of the talk," said Ann.' for i in range(20)]  # mostly one-line paragraphs of dialogue
    assert paragraph_break(_lines(talk[:8] + STORY[1:2])) is LINE_ENDS  # one long line in ten is enough
    assert len(split_paragraphs("\r\n".join("    " + line for line in talk) + "\r\n" + indented)) == len(
        talk) + len(STORY)


def test_a_story_with_one_paragraph_to_a_line_has_the_speakers_and_presence_of_the_same_story_printed(tmp_path):
    printed = "\n\n".join(STORY + [LONG] * 20) + "\n"
    line_by_line = _lines(STORY + [LONG] * 20)
    readings = []
    for name, text in (("printed", printed), ("lines", line_by_line)):
        (tmp_path / name).mkdir()
        _, reading, spans, evidence, _ = read_story(tmp_path / name, text)
        readings.append(([u.speaker for u in reading.utterances(spans)],
                         [{slug: record.status() for slug, record in scene.items()} for scene in evidence]))
    assert readings[1] == readings[0]
    speakers, statuses = readings[1]
    assert speakers == ["ann-moss", "bob-hale"]
    assert statuses[0] == {"ann-moss": "present_active", "bob-hale": "present_active", "cy-dunn": "referenced"}


def test_registering_a_book_with_one_paragraph_to_a_line_says_how_it_is_read(tmp_path):
    (tmp_path / "tale.txt").write_text(_lines(STORY + [LONG] * 20), encoding="utf-8", newline="")
    (tmp_path / "tale.yaml").write_text("characters:\n  - name: Ann Moss\n    aliases: [Ann]\n", encoding="utf-8")
    result = CliRunner().invoke(main, ["add-book", str(tmp_path / "tale.txt"), "--characters",
                                       str(tmp_path / "tale.yaml")])
    assert result.exit_code == 0, result.output
    assert "each line is read as a paragraph" in result.output
    assert load_book("tale").info["paragraphs"] == "one to a line"
