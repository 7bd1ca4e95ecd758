from reveriemem.core.characters import Character
from reveriemem.core.text import split_paragraphs
from reveriemem.source_to_memory.dialogue import attribute_dialogue
from reveriemem.source_to_memory.mentions import AliasMatcher

HOLMES = Character(name="Sherlock Holmes", slug="holmes", aliases=["Holmes", "Mr. Holmes"], gender="male")
WATSON = Character(name="John Watson", slug="watson", aliases=["Watson", "Doctor"], gender="male")
MARA = Character(name="Mara Quell", slug="mara", aliases=["Mara", "Quell"], gender="female",
                 descriptors=["the lamplighter"])


def _attribute(text: str, characters=(HOLMES, WATSON, MARA), narrator: str | None = None):
    paragraphs = split_paragraphs(text)
    matcher = AliasMatcher(characters)
    mentions = {p.index: matcher.find(text, p.start, p.end) for p in paragraphs}
    narrator_at = {p.index: narrator for p in paragraphs} if narrator else {}
    return attribute_dialogue(text, paragraphs, mentions, characters, narrator_at)


def test_longest_alias_wins_and_underscores_are_boundaries():
    text = "Mr. Holmes met _Watson_ and Holmesian Holmes."
    found = AliasMatcher([HOLMES, WATSON]).find(text)
    assert [(m.character, m.form) for m in found] == [("holmes", "Mr. Holmes"), ("watson", "Watson"),
                                                      ("holmes", "Holmes")]


def test_a_name_joined_to_a_small_word_by_a_hyphen_is_no_mention():
    rose = Character(name="Rose Ferrer", slug="rose", aliases=["Rose"], gender="female")
    text = "Rose-coloured light fell on Holmes--and on Rose-Marie. Rose sat."
    found = AliasMatcher([rose, HOLMES]).find(text)
    assert [(m.character, m.start) for m in found] == [
        ("holmes", text.index("Holmes")), ("rose", text.index("Rose-Marie")), ("rose", text.index("Rose sat"))]


def test_shared_alias_goes_to_the_most_recently_named():
    jonathan = Character(name="Jonathan Harker", slug="jonathan", aliases=["Jonathan", "Harker"])
    mina = Character(name="Mina Harker", slug="mina", aliases=["Mina", "Harker"])
    found = AliasMatcher([jonathan, mina]).find("Mina wrote. Harker read it.")
    assert found[-1].character == "mina" and found[-1].ambiguous


def test_descriptor_matches_at_sentence_start_too():
    found = AliasMatcher([MARA]).find("The lamplighter waved. Then the lamplighter left.")
    assert [m.character for m in found] == ["mara", "mara"]


def test_speech_tags_before_and_after_the_quote():
    text = '"You have been in Afghanistan," said Holmes.\n\nWatson said, "How on earth did you know?"'
    speakers = [u.speaker for u in _attribute(text)]
    assert speakers == ["holmes", "watson"]


def test_a_term_in_quotation_marks_is_not_speech():
    text = ('I had a chicken done up with red pepper. (Get the recipe for Mara.) I asked the waiter, and he said '
            'it was called "paprika hendl," and that it was a national dish.\n\nHolmes wrote "Rache" on the card '
            'marked "Rache" and said nothing.')
    assert _attribute(text) == []


def test_non_focus_speaker_is_not_given_to_a_focus_character():
    text = 'Holmes looked up.\n\n"He is a little queer in his ideas," said Stamford.'
    [utterance] = _attribute(text)
    assert utterance.speaker is None and utterance.speaker_label == "Stamford"


def test_pronoun_tag_resolves_to_a_recent_focus_character_of_that_gender():
    text = 'Mara came in from the rain.\n\n"It was full," she said.'
    assert _attribute(text)[0].speaker == "mara"


def test_pronoun_tag_with_a_later_name_in_the_sentence_is_the_pronoun():
    text = 'Holmes sat by the fire.\n\n"Beg pardon," he said. Then, to Mara: "The Master wants you."'
    assert _attribute(text)[0].speaker == "holmes"


def test_first_person_tag_in_a_narrator_span():
    text = '"But how," said I, "can it be?"'
    assert _attribute(text, narrator="watson")[0].speaker == "watson"


def test_untagged_exchange_alternates_and_answers_the_addressee():
    text = ('"Where were you?" said Holmes.\n\n"At the club," said Watson.\n\n"Alone?"\n\n'
            '"Quite alone. Tell me, Holmes, what you found."\n\n"Mud."')
    utterances = _attribute(text)
    assert [u.speaker for u in utterances] == ["holmes", "watson", "holmes", "watson", "holmes"]
    assert [u.method for u in utterances][2:] == ["alternation", "alternation", "reply"]


def test_action_beat_names_the_speaker():
    text = '"I doubt it stayed lit." Quell turned the register round.'
    assert _attribute(text)[0].speaker == "mara"


def test_a_quote_that_is_only_a_name_does_not_address_them():
    text = 'Mara thought.\n\n"Holmes," she said at last.'
    [utterance] = _attribute(text)
    assert utterance.addressees == []


def test_he_after_someone_else_acts_is_nobody_we_can_name():
    text = ('As soon as Holmes disappeared, the captain, who had been watching him, turned towards the house.'
            '\n\n"Quarters!" he roared.')
    assert _attribute(text)[0].speaker is None
    text = 'Holmes turned towards the house.\n\n"Quarters!" he roared.'
    assert _attribute(text)[0].speaker == "holmes"
    # the subject of the tag's own clause is who "he" is: one who is no focus character, or a focus character
    text = ('Holmes crossed the room.\n\nThe lugger was gone. Mr. Dance stood there, as he said, "like a fish out '
            'of water," and sent a man off to warn the cutter.')
    assert _attribute(text)[0].speaker is None
    assert _attribute('The men stood back. Holmes turned to me, and he said, "They are off."')[0].speaker == "holmes"


def test_whom_a_line_addresses_by_name_does_not_speak_it():
    text = 'Holmes was gone up the hill long since.\n\n"Ah, Holmes! That were his name," says he.'
    assert _attribute(text)[0].speaker != "holmes"


def test_a_line_that_speaks_of_someone_is_not_theirs_unless_its_tag_names_them():
    # "he" would be Holmes, the last man named, but the line asks after Holmes: someone else speaks it
    text = 'Holmes crossed the palisade and set off through the trees.\n\n"Why," said he, "is Holmes mad?"'
    assert _attribute(text)[0].speaker is None
    # a beat by the one the line speaks of is their answer to it, not the line itself
    text = '"My friend Watson, you are late again." Watson sat down by the fire.'
    assert _attribute(text)[0].speaker is None
    # a tag that names the speaker stands, whatever the line says
    assert _attribute('"Holmes is never wrong," said Holmes.')[0].speaker == "holmes"
    assert _attribute('Holmes crossed the room.\n\n"Why," said he, "is Watson mad?"')[0].speaker == "holmes"


def test_a_name_taken_up_from_the_other_speaker_is_a_topic_and_its_answer_is_not_theirs():
    text = ('"Not a man with one leg?" he gasped.\n\n"Holmes?" I asked.\n\n"Ah, Holmes!" says he. '
            '"That were his name."\n\n"He is the ringleader too."')
    utterances = _attribute(text, characters=(HOLMES, WATSON), narrator="watson")
    assert utterances[2].addressees == []
    assert utterances[3].speaker != "holmes"


def test_a_name_set_before_its_pronoun_is_spoken_of_not_to():
    text = ('Watson came up the path.\n\n"Billy Bones was the mate; Holmes, he was quartermaster," said Watson.'
            '\n\n"I was in another ship three years back."')
    utterances = _attribute(text)
    assert utterances[0].addressees == []
    assert utterances[1].speaker != "holmes"
    assert _attribute('"Well, Holmes, we are late," said Watson.')[0].addressees == ["holmes"]


def test_he_in_a_tag_is_the_one_acting_earlier_in_the_same_paragraph():
    text = ('Holmes sat by the fire.\n\nWatson got up and crossed to the window. He saw nobody in the street. '
            '"Good!" muttered he; "Holmes was wrong about the cab."')
    assert _attribute(text)[0].speaker == "watson"


def test_she_acting_in_the_paragraph_is_the_one_woman_told_of_before_her_there():
    text = ('Holmes got up from the table.\n\nWe decided that Mara should be told everything. She herself agreed at '
            'once, and it was pitiful to see her so brave. "There must be no secrets," she said.')
    assert _attribute(text)[0].speaker == "mara"
    text = ('Holmes got up from the table.\n\nWe decided that Mara and the landlady should be told everything. She '
            'herself agreed at once. "There must be no secrets," she said.')
    assert _attribute(text)[0].speaker is None


def test_one_named_only_as_an_object_before_the_tag_is_not_he():
    text = 'Holmes sat by the fire.\n\nBut he broke in, cursing the Doctor. "Doctors are all fools," he said.'
    assert _attribute(text)[0].speaker == "holmes"


def test_a_name_given_in_quotation_marks_is_no_speech_tag_for_the_line_before():
    text = ('Watson came into the room.\n\n"But Mara told me you were ill." It was so funny to hear Mara called '
            '"the lamplighter" by this kindly old man.')
    assert _attribute(text)[0].speaker != "mara"


def test_a_narration_paragraph_ending_in_a_tag_introduces_the_next_line():
    text = ("Holmes rose and crossed to the window, and said very quietly:--\n\n"
            '"We have not a moment to lose."\n\n'
            "The fire burned low. Mara set down her lamp and said:--\n\n"
            '"It was full when I left it."\n\n'
            "The old landlady came to the door and said:--\n\n"
            '"There is a man below for you."\n\n'
            "I stood beside Holmes, and said:--\n\n"
            '"Then we must go at once."')
    utterances = _attribute(text, narrator="watson")
    assert [u.speaker for u in utterances] == ["holmes", "mara", None, "watson"]
    assert utterances[2].speaker_label == "The old landlady"  # someone who is no focus character: nobody's line


def test_a_title_in_the_introducing_tag_does_not_end_its_sentence():
    # Dracula, Seward's study: "Then Mr. Morris said to Dr. Seward:--" introduces Quincey's line
    holmes = Character(name="Sherlock Holmes", slug="holmes", aliases=["Holmes", "Mr. Holmes"], gender="male")
    watson = Character(name="John Watson", slug="watson", aliases=["Watson", "Dr. Watson"], gender="male")
    text = ("We were silent till we got back to the study. Then Mr. Holmes said to Dr. Watson:--\n\n"
            '"If that man was not bluffing, he is the sanest lunatic I ever saw."')
    assert _attribute(text, characters=(holmes, watson, MARA), narrator="mara")[0].speaker == "holmes"


def test_a_closing_tag_ending_in_a_colon_introduces_the_next_line_not_its_own():
    # Dracula, Mina's journal: her question about Jonathan, and Van Helsing's interruption
    text = ('"And your husband, is he well?" I saw an opening to speak of Watson, so I said:--\n\n'
            '"He was almost recovered." He interrupted:--\n\n'
            '"Oh, yes, I know, I know."')
    utterances = _attribute(text, characters=(HOLMES, WATSON, MARA), narrator="mara")
    # the second line is the narrator's (introduced by "so I said:--"); "He interrupted:--" is the third line's
    # tag, not a beat naming the second line's speaker, so nothing makes that line Watson's
    assert utterances[1].speaker == "mara"
    assert "watson" not in {u.speaker for u in utterances}


def test_he_is_nobody_known_when_a_man_who_is_no_focus_character_was_told_of_since():
    # Dracula, Jonathan at the lodging-house: Seward is named only as one he saw that morning
    text = ("I only saw Watson for a moment, and told him where I was off to. When I asked the man who came "
            'to the door for the deputy, he shook his head. "What are you?" I asked.\n\n'
            '"I\'m the depity," he answered.\n\n'
            'Holmes ordered the driver to wait. "We may as well learn all there is," he remarked.')
    utterances = _attribute(text, narrator="mara")
    assert utterances[1].speaker is None  # "he" may be the man at the door, not Watson
    assert utterances[2].speaker == "holmes"  # the one acting, not the driver he spoke to


def test_as_for_x_makes_x_the_he_of_the_paragraph():
    # Around the World, ch. IX: "As for Passepartout, he, too, had escaped sea-sickness ... his master's whim"
    text = ("Holmes played whist by the hour together in the saloon.\n\n"
            "As for Watson, he, too, had escaped sea-sickness, and hoped that Holmes would tire of the game.\n\n"
            '"If I am not mistaken," said he, approaching the stranger, "you are the gentleman from the quay?"')
    assert [u.speaker for u in _attribute(text)] == ["watson"]


def test_an_introduced_he_stands_only_for_the_one_acting_there():
    text = ("Holmes and Watson drew near the grave. He answered:--\n\n"
            '"I am closing the tomb."\n\n'
            "The will left everything to Holmes. When he had told us so much he went on:--\n\n"
            '"We did our best to prevent it."')
    assert [u.speaker for u in _attribute(text)] == [None, None]  # two men acting there; Holmes only an object


def test_an_introduced_line_joined_to_an_earlier_verb_is_the_last_clause_subjects():
    text = ("When I went to the door, Mara caught my arm and held me back, and whispered, so low it was:--\n\n"
            '"Do not go without the lamp."\n\n'
            "Holmes rose and led me in, saying huskily:--\n\n"
            '"You loved her too, old fellow."\n\n'
            "Mara spoke in those sweet tones that Holmes said were like music:--\n\n"
            '"Come to us."')
    assert [u.speaker for u in _attribute(text, narrator="watson")] == ["mara", "holmes", "mara"]


def test_one_spoken_to_after_the_verb_and_a_comma_is_no_speaker():
    text = ('Holmes raised his glass. "To your health," I cried, Mara dear, as the old man clasped my hand.\n\n'
            '"My turn," said Mara.')
    utterances = _attribute(text, narrator="watson")
    assert [u.speaker for u in utterances] == ["watson", "mara"]


LETTER = ('_Letter, Mara Quell to Dr. Watson._\n\n'
          '"_12 May._\n\n'
          '"My dear Doctor,--\n\n'
          '"Holmes came to tea, and he looked so grave that I knew something was wrong. He took my hand and '
          'said:--\n\n'
          '"\'Miss Quell, I ain\'t the man to frighten you, but the lamp was lit by someone else.\' He would '
          'say no more, and Mara\'s tea went cold.\n\n'
          '"Ever your friend,\n\n'
          '"MARA."\n\n'
          'Watson laid the letter down. "She writes well," said he.')


def test_a_letter_quoted_whole_is_its_writers_narration_and_its_speech_is_in_single_quotes():
    paragraphs = split_paragraphs(LETTER)
    assert [p.document for p in paragraphs] == [False, True, True, True, True, True, True, False]
    utterances = _attribute(LETTER)
    lines = [(u.speaker, u.text[:14]) for u in utterances]
    # the letter's narration is no line of anyone's; Holmes's words in it are his, by the tag before them
    assert lines == [("holmes", "'Miss Quell, I"), ("watson", "She writes wel")]
    # the apostrophes in "ain't" and "Mara's" neither open nor close a line
    assert [LETTER[a:b] for a, b in utterances[0].quote_spans] == [
        "'Miss Quell, I ain't the man to frighten you, but the lamp was lit by someone else.'"]


def test_a_dateline_in_italics_at_a_line_that_closes_its_quote_opens_no_document():
    text = '"_Your_ saying so don\'t make it so."\n\n"_Theirs_--"\n\n"For _theirs_, then."'
    assert not any(p.document for p in split_paragraphs(text))


def test_a_name_in_a_list_is_spoken_of_not_to():
    # "Gregson, Lestrade, and Co.": Watson is not addressed, so the untagged answer is not his
    text = ('"You may be sure that Holmes, Watson, and Co. will pocket all the credit," said Mara.\n\n'
            '"But he begs you to help him."')
    first, second = _attribute(text)
    assert first.addressees == []
    assert second.speaker != "watson"
    # a name spoken to before "and I", or after a word that opens the line, is still spoken to
    for line in ('"I never meant it, Watson, and I am sorry," said Mara.', '"Hurry, Watson, or Holmes will escape!"',
                 '"Good-bye, Watson, and God bless you," said Mara.'):
        assert _attribute(line)[0].addressees == ["watson"], line
    # inside a longer list too
    assert _attribute('"You may be sure that Gregson, Watson, Holmes, and Co. will pocket it."')[0].addressees == []
