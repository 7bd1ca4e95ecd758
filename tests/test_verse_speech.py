"""Speech in a poem printed without quotation marks (Paradise Lost): told by the epic's formulas.

The lines here are written for the tests, in the manner of such a poem; none is Milton's."""

import pytest

from reveriemem.core.characters import Character
from reveriemem.core.text import split_paragraphs
from reveriemem.source_to_memory.dialogue import attribute_dialogue
from reveriemem.source_to_memory.mentions import AliasMatcher
from reveriemem.source_to_memory.own_lines import own_quote_spans
from reveriemem.source_to_memory.scenes import inner_cues
from reveriemem.source_to_memory.verse_speech import reads_as_verse

WARDEN = Character(name="Warden", slug="warden", aliases=["_Warden_"], descriptors=["the Keeper"], gender="male")
SIBYL = Character(name="Sibyl", slug="sibyl", aliases=["_Sibyl_"], gender="female")
ROVER = Character(name="Rover", slug="rover", aliases=["_Rover_"], descriptors=["the Wanderer"], gender="male")
CAST = (WARDEN, SIBYL, ROVER)


# A poem's opening, so that each text below reads as verse (its carried lines start with capitals).
OPENING = "Of lamps I sing, and of the watch\nThey kept upon the shore,\nAnd of the sea.\n\n"


def _speeches(text: str, drop: str | None = None):
    text = OPENING + text
    paragraphs = [p for p in split_paragraphs(text) if drop is None or drop not in p.text]
    matcher = AliasMatcher(CAST)
    mentions = {p.index: matcher.find(text, p.start, p.end) for p in paragraphs}
    return [(u.speaker, u.text) for u in attribute_dialogue(text, paragraphs, mentions, CAST, {})]


def test_a_speech_runs_from_its_introducing_formula_to_the_closing_one():
    text = ("Upon the shore the Keeper stood, and to the tide\nBreaking the silence of the night thus began.\n\n"
            "Go back, thou sea, the lamps are lit for ships.\n\n"
            "So spake the Keeper, and the waters fell.")
    assert _speeches(text) == [("warden", "Go back, thou sea, the lamps are lit for ships.")]


@pytest.mark.parametrize("text, spoken", [
    # an answer ends the speech it answers, and has its own speaker
    ("Then _Sibyl_ by the lamp thus began.\n\nThe oil is low, and winter comes apace.\n"
     "To whom thus _Warden_ repli’d.\n\nThen fetch the cask.\n\nShe ended, and turnd away.",
     [("sibyl", "The oil is low, and winter comes apace."), ("warden", "Then fetch the cask.")]),
    # a new speech after one that tells no story (it speaks to someone) means the first was over
    ("Then _Rover_ by the lamp thus began.\n\nThou art cold, and ye are weary; rest thee here.\n\n"
     "The night went on; and _Sibyl_ rising thus began.\n\nThe lamps are out.\n\nShe ended.",
     [("rover", "Thou art cold, and ye are weary; rest thee here."), ("sibyl", "The lamps are out.")]),
])
def test_one_speech_ends_where_the_next_begins(text, spoken):
    assert _speeches(text) == spoken


def test_an_answer_ends_even_a_story():
    # her words tell of others, so a speech begun inside them would be hers, but "Her thus" answers her
    text = ("Then _Sibyl_ by the lamp thus began.\n\nThe Wanderer came at dusk; he sat, and they spoke of him.\n\n"
            "Her thus the Keeper answer’d.\n\nHe will come again.\n\nHe ended.")
    assert [speaker for speaker, _ in _speeches(text)] == ["sibyl", "warden"]


def test_a_name_after_a_preposition_is_spoken_to_not_the_speaker():
    text = "And to _Sibyl_ the Wanderer thus reply’d.\n\nI saw the lamp.\n\nHe ended."
    assert _speeches(text) == [("rover", "I saw the lamp.")]


def test_a_closing_formula_denied_closes_nothing():
    text = "Then _Sibyl_ thus began.\n\nThe oil is low.\n\nShe ended not, but spake on.\n\nShe ended."
    assert _speeches(text) == [("sibyl", "The oil is low."), ("sibyl", "She ended not, but spake on.")]


def test_a_name_excepted_is_not_the_speaker():
    text = "Then whom, _Rover_ except, none higher sat, thus began.\n\nWar then.\n\nHe ended."
    assert _speeches(text) == [(None, "War then.")]


def test_a_pronoun_of_the_other_gender_unnames_the_speaker():
    text = "_Warden_ beside her, thus she spake.\n\nHe sleeps.\n\nShe ended."
    assert _speeches(text) == [(None, "He sleeps.")]


def test_an_elliptical_answer_names_its_speaker():
    text = "Then _Sibyl_ thus began.\n\nWho trims the lamp?\n\nTo whom the Keeper.\n\nI do.\n\nHe ended."
    assert _speeches(text) == [("sibyl", "Who trims the lamp?"), ("warden", "I do.")]


def test_a_story_told_inside_a_speech_is_the_tellers_with_the_words_in_it():
    # the Wanderer tells the Keeper of the Sibyl's words: she is not present where it is told
    text = ("To whom the Wanderer thus reply’d.\n\n"
            "Far off I saw the Sibyl on her rock;\nShe stood, and they that heard her wept.\n"
            "And to the winds she thus began.\n\n"
            "Blow, for the lamps are out.\n\nSo spake the Sibyl, and the winds obeyd.\n\n"
            "Such was the tale. Now hear what follows, Keeper.\n\n"
            "He ended, and the Keeper mus’d in silence.")
    spoken = _speeches(text)
    assert {speaker for speaker, _ in spoken} == {"rover"}
    assert "Blow, for the lamps are out." in [line for _, line in spoken]
    assert not any("mus’d" in line for _, line in spoken)


def test_a_closing_formula_naming_another_does_not_end_the_outer_speech():
    # "So spake the Sibyl" closes a speech of hers the formulas missed, not the Wanderer's tale
    text = ("To whom the Wanderer thus reply’d.\n\nThe Sibyl cried upon the rock: Blow, winds.\n\n"
            "So spake the Sibyl. And the winds blew on,\nAs I have told thee.\n\nHe ended.")
    spoken = _speeches(text)
    assert [speaker for speaker, _ in spoken] == ["rover", "rover"]


def test_inside_a_story_any_closing_formula_closes_the_speech_told():
    # the inner speech is the Sibyl's; a formula naming the Keeper still closes it, and "He ended" the tale
    text = ("To whom the Wanderer thus reply’d.\n\n"
            "Far off I saw her; she stood, and they heard her,\nAnd he wept. And _Sibyl_ to the winds thus began.\n\n"
            "Blow, winds.\n\nSo spake the Keeper once, they say. He ended.\n\nThe Keeper walked alone.")
    assert not any("walked alone" in line for _, line in _speeches(text))


def test_a_verb_of_speaking_without_its_formula_introduces_nothing():
    text = "The Keeper and the Sibyl long together spake.\n\nThe night grew cold.\n\nSo spake the Keeper."
    assert _speeches(text) == []


def test_a_closing_formula_with_a_participle_closes():
    text = ("Then _Sibyl_ by the lamp thus began.\n\nThe oil is low.\n\n"
            "Thus _Sibyl_ singing went her way, and the Keeper watched.")
    assert _speeches(text) == [("sibyl", "The oil is low.")]


def test_a_sentence_that_closes_one_speech_may_introduce_the_next():
    text = ("Then _Rover_ thus began.\n\nThe lamp is lit.\n\nHe ended; and thus _Sibyl_ last reply’d.\n\n"
            "Then let it burn.\n\nShe ended.")
    assert _speeches(text) == [("rover", "The lamp is lit."), ("sibyl", "Then let it burn.")]


def test_a_new_book_closes_a_speech_left_open():
    text = ("To whom the Wanderer thus reply’d.\n\nThe night is long.\n\n  BOOK II.\n\n"
            "Meanwhile the Keeper trimmd the lamp alone.")
    assert _speeches(text, drop="BOOK") == [("rover", "The night is long.")]  # the heading left out of scenes


def test_a_speaker_unnamed_before_is_named_by_the_closing_formula_of_a_short_speech():
    text = ("And from the cliff a voice thus began.\n\nBeware the reef.\n\nSo spake the Wanderer, and was gone.")
    assert _speeches(text) == [("rover", "Beware the reef.")]
    long = text.replace("Beware the reef.", "Beware the reef.\n" * 200)  # past a formula it may have missed
    assert [speaker for speaker, _ in _speeches(long)] == [None]


def test_only_a_poem_without_quotation_marks_is_read_by_its_formulas():
    verse = OPENING + "Upon the shore the Keeper stood\nAnd thus began.\n\nGo back, thou sea.\n\nHe ended."
    assert reads_as_verse(split_paragraphs(verse))
    assert reads_as_verse(split_paragraphs(verse.replace("And of the sea.", "'Tis the sea.")))  # an elision
    prose = ("The Keeper stood upon the shore in the grey light\nof the morning and thus began, as was his\n"
             "custom, to speak to the sea.\n\nHe ended, and went\nhome to his lamp.")  # prose, any wrap width
    assert not reads_as_verse(split_paragraphs(prose))
    quoted = verse.replace("Go back, thou sea.", '"Go back," said the Keeper.')  # speech in quotation marks
    assert not reads_as_verse(split_paragraphs(quoted))
    assert _speeches('The Keeper stood and thus began.\n\n"Go back," said the Keeper.') == [("warden", "Go back,")]


def test_a_transition_inside_a_verse_paragraph_is_a_checkpoint():
    text = "The Keeper slept beside the lamp.  Mean while on the rock the Sibyl sang.  And the tide rose."
    [paragraph] = split_paragraphs(text)
    assert [text[at:at + 10] for at in inner_cues(paragraph)] == ["Mean while"]
    assert inner_cues(paragraph, [(0, len(text))]) == []  # inside speech it is no change of scene


def test_a_poems_speech_is_its_speakers_own_line():
    # personality excerpts come from a character's own lines: in a poem, the speech the formulas found
    text = OPENING + "Then _Sibyl_ thus began.\n\nThe oil is low,\nAnd winter comes.\n\nShe ended."
    paragraphs = split_paragraphs(text)
    matcher = AliasMatcher(CAST)
    mentions = {p.index: matcher.find(text, p.start, p.end) for p in paragraphs}
    [line] = attribute_dialogue(text, paragraphs, mentions, CAST, {})
    paragraph = paragraphs[line.paragraph]
    assert [text[a:b] for a, b in own_quote_spans(text, paragraph, line.start, line.end)] == [
        "The oil is low,\nAnd winter comes."]
