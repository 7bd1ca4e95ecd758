"""Speech in a poem printed without quotation marks (Paradise Lost): told by the epic's formulas.

The lines here are written for the tests, in the manner of such a poem; none is Milton's."""

from reveriemem.core.characters import Character
from reveriemem.core.text import split_paragraphs
from reveriemem.source_to_memory.dialogue import attribute_dialogue
from reveriemem.source_to_memory.mentions import AliasMatcher
from reveriemem.source_to_memory.scenes import inner_cues

WARDEN = Character(name="Warden", slug="warden", aliases=["_Warden_"], descriptors=["the Keeper"], gender="male")
SIBYL = Character(name="Sibyl", slug="sibyl", aliases=["_Sibyl_"], gender="female")
ROVER = Character(name="Rover", slug="rover", aliases=["_Rover_"], descriptors=["the Wanderer"], gender="male")
CAST = (WARDEN, SIBYL, ROVER)


def _speeches(text: str):
    paragraphs = split_paragraphs(text)
    matcher = AliasMatcher(CAST)
    mentions = {p.index: matcher.find(text, p.start, p.end) for p in paragraphs}
    return [(u.speaker, u.text) for u in attribute_dialogue(text, paragraphs, mentions, CAST, {})]


def test_a_speech_runs_from_its_introducing_formula_to_the_closing_one():
    text = ("Upon the shore the Keeper stood, and to the tide\nBreaking the silence of the night thus began.\n\n"
            "Go back, thou sea, the lamps are lit for ships.\n\n"
            "So spake the Keeper, and the waters fell.")
    assert _speeches(text) == [("warden", "Go back, thou sea, the lamps are lit for ships.")]


def test_an_answer_ends_the_speech_it_answers_and_has_its_own_speaker():
    text = ("Then _Sibyl_ by the lamp thus began.\n\nThe oil is low, and winter comes apace.\n"
            "To whom thus _Warden_ repli’d.\n\nThen fetch the cask.\n\nShe ended not, but turnd away.")
    assert _speeches(text) == [("sibyl", "The oil is low, and winter comes apace."),
                               ("warden", "Then fetch the cask.")]


def test_a_speaker_is_the_subject_not_one_spoken_to_or_of():
    # "to _Sibyl_" is spoken to; "thus she spake" with a man's name alone names no speaker
    text = ("And to _Sibyl_ the Wanderer thus reply’d.\n\nI saw the lamp.\n\nSo spake the Wanderer.\n\n"
            "Upon _Warden_ gazing, thus she spake.\n\nHe sleeps.\n\nShe ended.")
    assert _speeches(text) == [("rover", "I saw the lamp."), (None, "He sleeps.")]


def test_a_story_told_inside_a_speech_is_the_tellers_with_the_words_in_it():
    # the Wanderer tells the Keeper of the Sibyl's words: she is not present where it is told
    text = ("To whom the Wanderer thus reply’d.\n\n"
            "Far off I saw the Sibyl on her rock, and she\nTo the winds that heard her thus began.\n\n"
            "Blow, for the lamps are out.\n\nSo spake the Sibyl, and the winds obeyd.\n\n"
            "Such was the tale. Now hear what follows, Keeper.\n\n"
            "He ended, and the Keeper mus’d in silence.")
    spoken = _speeches(text)
    assert {speaker for speaker, _ in spoken} == {"rover"}
    assert "Blow, for the lamps are out." in [line for _, line in spoken]


def test_a_closing_formula_naming_another_does_not_end_the_outer_speech():
    # "So spake the Sibyl" closes a speech of hers the formulas missed, not the Wanderer's tale
    text = ("To whom the Wanderer thus reply’d.\n\nThe Sibyl cried upon the rock: Blow, winds.\n\n"
            "So spake the Sibyl. And the winds blew on, as I have told thee.\n\nHe ended.")
    spoken = _speeches(text)
    assert [speaker for speaker, _ in spoken] == ["rover", "rover"]


def test_a_new_book_closes_a_speech_left_open():
    text = ("To whom the Wanderer thus reply’d.\n\nThe night is long.\n\n  BOOK II.\n\n"
            "Meanwhile the Keeper trimmd the lamp alone.")
    paragraphs = [p for p in split_paragraphs(text) if "BOOK" not in p.text]  # the heading is left out
    matcher = AliasMatcher(CAST)
    mentions = {p.index: matcher.find(text, p.start, p.end) for p in paragraphs}
    spoken = attribute_dialogue(text, paragraphs, mentions, CAST, {})
    assert [(u.speaker, u.text) for u in spoken] == [("rover", "The night is long.")]


def test_a_book_with_quotation_marks_is_read_by_its_marks():
    text = 'The Keeper stood and thus began.\n\n"Go back," said the Keeper.'
    assert _speeches(text) == [("warden", "Go back,")]


def test_a_transition_inside_a_verse_paragraph_is_a_checkpoint():
    text = "The Keeper slept beside the lamp.  Meanwhile on the rock the Sibyl sang.  And the tide rose."
    [paragraph] = split_paragraphs(text)
    assert [text[at:at + 9] for at in inner_cues(paragraph)] == ["Meanwhile"]
    assert inner_cues(paragraph, [(0, len(text))]) == []  # inside speech it is no change of scene


def test_a_speaker_unnamed_before_is_named_by_the_closing_formula_of_a_short_speech():
    text = ("And from the cliff a voice thus began.\n\nBeware the reef.\n\nSo spake the Wanderer, and was gone.")
    assert _speeches(text) == [("rover", "Beware the reef.")]
    long = text.replace("Beware the reef.", "Beware the reef. " * 200)  # past a formula it may have missed
    assert [speaker for speaker, _ in _speeches(long)] == [None]
