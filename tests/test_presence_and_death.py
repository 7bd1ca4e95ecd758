"""Presence as a state and death, on short synthetic passages: who is granted what a user would ask about."""

import pytest

from reveriemem.core.errors import CharacterFileError
from reveriemem.core.registry import prepare_book
from reveriemem.source_to_memory.deaths import detected_deaths
from reveriemem.source_to_memory.facts import assign_visibility, evidence_units, presences_from_rosters
from reveriemem.source_to_memory.preparation import roster_rows
from reveriemem.source_to_memory.reading import BookReading

CAST = """characters:
  - name: Ann Moss
    aliases: [Ann]
  - name: Bob Hale
    aliases: [Bob]
    descriptors: [my companion]
  - name: Cy Dunn
    aliases: [Cy]
"""
FILLER = "The wind rose over the roofs of the town and the shutters rattled all night long."


def read_story(tmp_path, text: str, cast: str = CAST):
    """Register a story offline and read it: (book, reading, scenes, roster evidence, roster rows)."""
    import polars as pl

    (tmp_path / "story.txt").write_text(text, encoding="utf-8")
    (tmp_path / "cast.yaml").write_text(cast, encoding="utf-8")
    book, _ = prepare_book(tmp_path / "story.txt", tmp_path / "cast.yaml", slug="story")
    reading = BookReading(book)
    spans = reading.heuristic_scenes()
    evidence = reading.roster_evidence(spans)
    judged = [{slug: (record.status(), None) for slug, record in scene.items()} for scene in evidence]
    return book, reading, spans, evidence, pl.DataFrame(roster_rows(reading, spans, evidence, judged, "test"))


def build(tmp_path, story: str, cast: str = CAST):
    """Register a one-chapter story offline and return (book, reading, who knows each sentence)."""
    text = ("CHAPTER I.\n\n" + story.strip() + "\n\n" + "\n\n".join([FILLER] * 3)
            + "\n\nCHAPTER II.\n\nThe names of Ann Moss, Bob Hale and Cy Dunn are on the stone in the church.\n")
    book, reading, spans, evidence, rosters = read_story(tmp_path, text, cast)
    speakers = {u.start: u.speaker for u in reading.utterances(spans) if u.speaker}
    triples = [(i + 1, reading.paragraphs[s.first].start, reading.paragraphs[s.last].end) for i, s in enumerate(spans)]
    facts = evidence_units(book, triples, speakers)
    assign_visibility(facts, presences_from_rosters(rosters), [], [], [c.slug for c in book.characters],
                      reading.deaths)
    knows = {f.evidence: {g.character for g in f.grants} for f in facts}
    return book, evidence[0], knows


def knowers(knows: dict[str, set[str]], opening: str) -> set[str]:
    return next(who for sentence, who in knows.items() if sentence.startswith(opening))


def test_a_late_arrival_does_not_hear_what_was_said_before_and_hears_what_follows(tmp_path):
    _, roster, knows = build(tmp_path, """
Ann sat alone by the fire with her mending in her lap.

"The key to the press is gone from its hook," said Ann to the empty room.

Bob came in and shut the door behind him against the wind.

"Which key do you mean?" said Bob.

"The brass key to the press," said Ann.
""")
    assert "bob-hale" not in knowers(knows, '"The key to the press')
    assert {"ann-moss", "bob-hale"} <= knowers(knows, '"The brass key')
    assert roster["bob-hale"].status() == "present_active"


def test_a_departure_ends_presence(tmp_path):
    _, roster, knows = build(tmp_path, """
Ann and Bob sat together at the long table in the kitchen.

"I shall be back before dark," said Bob, and Bob went out into the yard.

"He has taken the lantern with him again," said Ann to herself.
""")
    assert "bob-hale" not in knowers(knows, '"He has taken the lantern')


@pytest.mark.parametrize("away", ["Cy was at the mill, two miles away.",
                                  "Cy, meanwhile, was fishing far out on the lake.",
                                  "Cy was asleep in his own house across the river.",
                                  "Cy was at the lighthouse, miles away on Gull Point."])
def test_one_told_to_be_somewhere_else_is_not_there(tmp_path, away):
    _, roster, knows = build(tmp_path, f"""
Ann and Bob sat together at the long table in the kitchen while the wind howled. {away}

"The money is in the red box under the stair," said Ann to Bob. "Tell no one."
""")
    assert "cy-dunn" not in knowers(knows, '"The money is in the red box')
    assert roster["cy-dunn"].status() == "referenced"


@pytest.mark.parametrize("leaves", [" Then Bob said goodnight and went up to bed.",
                                    "\n\nThen Bob said goodnight and went up to bed.",
                                    " Bob was sent down to the village on an errand.",
                                    " Bob went away across the river to his own house."])
def test_going_to_bed_or_being_sent_away_ends_presence(tmp_path, leaves):
    _, _, knows = build(tmp_path, f"""
Ann and Bob sat together at the long table in the kitchen.

"The mare is lame again," said Bob.{leaves}

"The money is in the red box under the stair," said Ann to Cy, who had come in from the yard.
""")
    assert "bob-hale" in knowers(knows, '"The mare is lame')
    assert "bob-hale" not in knowers(knows, '"The money is in the red box')


def test_a_character_only_talked_about_or_whose_letter_is_read_is_not_present(tmp_path):
    _, roster, knows = build(tmp_path, """
Ann stood by the window and unfolded the letter that had come that morning.

"Dear Ann, I am well and shall be home by Friday. Cy," she read aloud to the empty kitchen.

Ann thought of Cy, far away in Lisbon, and folded the letter up again slowly.
""")
    assert roster["cy-dunn"].status() == "referenced" and roster["cy-dunn"].spans == []
    assert [s for s, who in knows.items() if "cy-dunn" in who and not s.startswith("The names")] == []


def test_who_acts_in_a_letter_set_in_from_the_margin_is_not_present_where_it_is_read(tmp_path):
    _, roster, knows = build(tmp_path, """
Ann stood by the window of the inn and read the letter from the town aloud.

     The ship is bought and fitted.  Cy found a crew for
     her in two days, and Cy brings them down to the quay
     on Monday.

"So we sail on Tuesday," said Ann, and she folded the letter away.

Bob came in from the yard with the lantern.
""")
    assert roster["cy-dunn"].status() == "referenced" and roster["cy-dunn"].spans == []
    assert roster["bob-hale"].status() == "present_silent"
    assert "cy-dunn" not in knowers(knows, '"So we sail')


def test_first_person_narration_of_the_narrators_past_reaches_only_the_narrator(tmp_path):
    cast = CAST.replace("    aliases: [Ann]\n", "    aliases: [Ann]\n    narrator_spans: all\n")
    _, roster, knows = build(tmp_path, """
In the year 1878 I took my degree at the University and went out to the war as an assistant surgeon.

I came home with my health ruined and took rooms in a quiet street near the river.

Bob came in one morning while I sat at breakfast, and he laughed at my newspaper.
""", cast)
    assert knowers(knows, "In the year 1878") == {"ann-moss"}
    assert "bob-hale" in knowers(knows, "Bob came in")


def test_a_relational_descriptor_counts_only_once_its_character_is_in_the_scene(tmp_path):
    _, roster, knows = build(tmp_path, """
I met an old friend in the street, and my companion laughed at my news as we walked along together.

"You will like Bob," said Ann, "though he keeps strange hours."

At the laboratory Bob looked up from his bench and bowed to us both.

My companion smiled and went back to his test tubes.
""")
    first = knowers(knows, "I met an old friend")
    assert "bob-hale" not in first  # "my companion" here is the friend: Bob is not in the scene yet
    assert "bob-hale" in knowers(knows, "My companion smiled")


def test_a_relational_descriptor_speaks_for_nobody_before_its_character_is_in_the_scene(tmp_path):
    _, roster, knows = build(tmp_path, """
I met an old friend at the corner of the street, and we walked along together towards the river.

"That is a strange thing," remarked my companion; "you are the second man to-day to say so."

"And who was the first?" I asked him.
""")
    assert "bob-hale" not in knowers(knows, '"That is a strange thing')  # the friend speaks, not Bob
    assert roster["bob-hale"].utterances == 0


def test_a_relational_descriptor_is_no_longer_one_left_behind(tmp_path):
    # A Study in Scarlet, Part I ch. I: Watson and Stamford leave Holmes at his chemicals; "my companion" is
    # Stamford again on the walk to the hotel
    cast = CAST.replace("    aliases: [Ann]\n", "    aliases: [Ann]\n    narrator_spans: all\n")
    story = """
Bob looked up from his bench in the laboratory and shook hands with me and my old friend.

"Call for me here at noon to-morrow," said Bob.

We left him working among his chemicals, and we walked together towards my hotel.

My companion smiled an enigmatical smile as we crossed the street by the old church.

"That is just his little peculiarity," he said, and we parted at the corner.
"""
    book, roster, knows = build(tmp_path, story, cast)
    assert "bob-hale" in knowers(knows, "Bob looked up")
    walk = book.text.index("My companion smiled")
    assert all(end <= walk for _, end in roster["bob-hale"].spans)  # not present on the walk
    assert "bob-hale" not in knowers(knows, '"That is just his little peculiarity')  # the friend's line


def test_as_for_turns_the_narration_to_one_characters_thread(tmp_path):
    # Around the World, ch. IX: Fogg plays whist in the saloon; "As for Passepartout" is elsewhere on the steamer
    _, roster, knows = build(tmp_path, """
Ann played whist by the hour together in the saloon, and Bob watched the cards over her shoulder.

As for Cy, he took his meals in the forward cabin, and he found the obliging stranger on deck the next day.

Cy asked the stranger his name, and the stranger laughed and told him.
""")
    assert {"ann-moss", "bob-hale"} <= knowers(knows, "Ann played whist")
    assert not {"ann-moss", "bob-hale"} & knowers(knows, "Cy asked the stranger")


def test_a_narrators_question_what_was_x_doing_turns_to_xs_thread(tmp_path):
    # Around the World, ch. XVI: "What was detective Fix ... doing all this while?" while Fogg and Aouda sail on
    _, roster, knows = build(tmp_path, """
Ann and Bob sat on the deck of the steamer and watched the islands go by in the long afternoon.

What was Cy, so unluckily drawn on from port to port, doing all this while? He had managed to come aboard unseen.

He hoped to keep his presence hidden until the end of the voyage, whatever it cost him.
""")
    assert {"ann-moss", "bob-hale"} <= knowers(knows, "Ann and Bob sat")
    assert not {"ann-moss", "bob-hale"} & knowers(knows, "He had managed to come aboard")


def test_a_subject_parted_from_its_verb_by_a_parenthesis_acts(tmp_path):
    # Around the World, ch. XXIX: "Mr. Fogg, with folded arms, remained motionless."
    _, roster, knows = build(tmp_path, """
The last riders were disappearing in the south, along the banks of the river, and the plain was empty.

Ann, with folded arms, remained motionless beside the engine while the smoke drifted over the snow.
""")
    assert roster["ann-moss"].actions >= 1  # she acts here: present, not only named


def test_having_been_somewhere_once_is_no_presence_in_the_scene(tmp_path):
    _, roster, knows = build(tmp_path, """
The farm prospered, and the girl grew up tall and fair among the wheat fields of the valley.

Wherever there were adventures to be had in those years, Bob had been there in search of them.

The old farmer counted his cattle in the evening and locked the gate of the yard.

Bob walked up to the gate at dusk and called to the farmer for a drink of water.
""")
    assert "bob-hale" not in knowers(knows, "The farm prospered")  # before he rides up
    assert "bob-hale" in knowers(knows, "Bob walked up")


def test_nothing_is_granted_after_a_narrated_death(tmp_path):
    _, roster, knows = build(tmp_path, """
Ann and Cy sat by the fire while the storm beat upon the shutters.

Cy coughed and turned his face to the wall, and before midnight Cy was dead.

Ann sat on beside the bed until the grey light came through the shutters.
""")
    assert "cy-dunn" in knowers(knows, "Ann and Cy sat")
    assert "cy-dunn" not in knowers(knows, "Ann sat on beside the bed")


def test_the_dead_are_never_present_in_a_later_scene(tmp_path):
    import polars as pl

    text = ("CHAPTER I.\n\nAnn and Cy sat by the fire while the storm beat upon the shutters.\n\n"
            "Cy coughed and turned his face to the wall, and before midnight Cy was dead.\n\n"
            + "\n\n".join([FILLER] * 3)
            + "\n\nCHAPTER II.\n\nAnn wept at the window, just as Cy smiled when the swallows came back.\n\n"
            "Ann locked the door of the empty house and walked down to the harbour with Bob.\n")
    _, _, spans, evidence, rows = read_story(tmp_path, text)
    last = rows.filter((pl.col("scene_id") == len(spans)) & (pl.col("character") == "cy-dunn"))
    assert evidence[-1]["cy-dunn"].actions  # "Cy smiled" reads as an act...
    assert last["status"].to_list() == ["referenced"] and last["presence_spans"].to_list() == [[]]  # ...of the dead


@pytest.mark.parametrize("sentence", [
    "Cy was not dead, though he lay very still.",
    "Cy was dead tired after the long walk home.",
    "If Cy died, the house would go to his cousin.",
    "Cy nearly died of the fever that winter.",
    '"Cy is dead," said Ann, but it was a lie.',
])
def test_hedged_figurative_or_spoken_deaths_are_not_deaths(sentence):
    from reveriemem.core.characters import Character

    cy = Character(name="Cy Dunn", slug="cy-dunn", aliases=["Cy"])
    assert detected_deaths(sentence + "\n", [cy]) == {}


def test_the_character_file_can_declare_a_death_and_must_find_it_once(tmp_path):
    cast = CAST + "    dies: \"turned his face to the wall\"\n"
    book, roster, knows = build(tmp_path, """
Ann and Cy sat by the fire while the storm beat upon the shutters.

Cy coughed and turned his face to the wall and spoke no more that night.

Ann sat on beside the bed until the grey light came through the shutters.
""", cast)
    assert book.character("Cy Dunn").death_offset is not None
    assert "cy-dunn" not in knowers(knows, "Ann sat on beside the bed")
    with pytest.raises(CharacterFileError, match="never occurs"):
        build(tmp_path, "Ann and Cy sat by the fire all evening long and said very little.",
              CAST + "    dies: \"no such words\"\n")


def test_one_said_to_be_gone_is_not_there_for_what_follows(tmp_path):
    # Treasure Island, ch. XXXIV: "Silver was gone." before the voyage home and Ben Gunn's nineteen days
    _, _, knows = build(tmp_path, """
Ann and Bob and Cy sat together at the long table in the kitchen over their supper.

Cy rose from the table and stood by the door. Ann filled the kettle at the pump.

In the morning Cy was gone. Ann and Bob sold the grey mare at the fair for eleven pounds.
""")
    assert "cy-dunn" in knowers(knows, "Ann filled the kettle")
    assert "cy-dunn" not in knowers(knows, "Ann and Bob sold the grey mare")
    assert {"ann-moss", "bob-hale"} <= knowers(knows, "Ann and Bob sold the grey mare")
    _, _, knows = build(tmp_path, """
Ann and Bob and Cy sat together at the long table in the kitchen over their supper.

Cy rose from the table and stood by the door. Ann filled the kettle at the pump.

In the morning Cy was already gone. Ann and Bob sold the grey mare at the fair for eleven pounds.
""")
    assert "cy-dunn" not in knowers(knows, "Ann and Bob sold the grey mare")  # "already gone" is no presence
    _, _, knows = build(tmp_path, """
Ann and Bob and Cy sat together at the long table in the kitchen over their supper.

Ann had kept the farm alone for three long years while Cy was gone to sea. The rain beat upon the \
shutters all that evening.
""")
    assert "cy-dunn" in knowers(knows, "The rain beat upon the shutters")  # an absence told as a time


def test_a_name_in_the_small_capitals_of_a_chapter_opening_is_the_character(tmp_path):
    # Treasure Island and Tom Sawyer open chapters so: "WE rode hard", "TOM appeared on the sidewalk"
    _, _, knows = build(tmp_path, """
ANN came into the kitchen and sat down at the long table beside Bob, shaking the rain from her shawl.

The kettle began to sing on the hob while the rain beat upon the shutters of the kitchen.
""")
    assert "ann-moss" in knowers(knows, "The kettle began to sing")


def test_an_act_in_a_time_clause_before_a_pluperfect_is_of_an_earlier_time(tmp_path):
    # Around the World, ch. XIX: "Shortly after Fix left the opium den, two waiters had lifted the unconscious
    # Passepartout": Fix is not in the den with him for what follows
    _, _, knows = build(tmp_path, """
Ann and Bob sat together at the long table in the kitchen over their supper.

Shortly after Cy finished his ale at the inn, two carters had lifted the drunken stranger into their cart. \
Ann and Bob watched the cart go by from the kitchen window.
""")
    assert "cy-dunn" not in knowers(knows, "Ann and Bob watched the cart")
    assert {"ann-moss", "bob-hale"} <= knowers(knows, "Ann and Bob watched the cart")


def test_narrated_thoughts_are_the_thinkers_alone_until_someone_acts_or_speaks(tmp_path):
    _, _, knows = build(tmp_path, """
Ann and Bob sat together at the long table in the kitchen.

"The carter was late again this morning," said Ann.

Bob thought that the carter had taken the key. The man had been alone in the yard for an hour. \
Ann rose and filled the kettle at the pump.

Bob set down his cup. He wondered whether the carter would come back for the rest of the sacks.

Bob thought it a poor trick, but told Ann so at once.
""")
    assert knowers(knows, "Bob thought that the carter") == {"bob-hale"}
    assert knowers(knows, "The man had been alone") == {"bob-hale"}  # free indirect thought goes on
    assert {"ann-moss", "bob-hale"} <= knowers(knows, "Ann rose and filled")
    assert knowers(knows, "He wondered whether") == {"bob-hale"}  # he: Bob, who acted last in the paragraph
    assert {"ann-moss", "bob-hale"} <= knowers(knows, "Bob thought it a poor trick")  # voiced


def test_a_thought_tagged_verb_first_and_carried_into_the_next_paragraph_is_the_thinkers(tmp_path):
    # Around the World, ch. XXX: Fix at Fort Kearney station, Aouda beside him
    _, _, knows = build(tmp_path, """
Ann and Bob waited together on the platform of the little station while the snow fell.

"He will never come back, and I am nothing but a fool!" So reasoned Bob, while the hours crept by all too slowly. He did not know what to do with himself.

He felt a sort of insurmountable longing to abandon the whole game at once.
""")
    assert knowers(knows, "So reasoned Bob") == {"bob-hale"}
    assert knowers(knows, "He did not know what to do") == {"bob-hale"}
    assert knowers(knows, "He felt a sort of insurmountable longing") == {"bob-hale"}  # a new paragraph, still his


def test_words_tagged_as_thought_are_the_thinkers_alone(tmp_path):
    _, _, knows = build(tmp_path, """
Ann and Bob sat together at the long table in the kitchen over their supper.

"Well," thought Bob, looking at her across the candle, "she has hidden the key after all."

"The bread is stale again," said Ann, and Bob nodded.
""")
    assert knowers(knows, '"Well," thought Bob') == {"bob-hale"}
    assert {"ann-moss", "bob-hale"} <= knowers(knows, '"The bread is stale')


def test_a_question_in_the_narration_is_nobody_elses_to_hear(tmp_path):
    _, _, knows = build(tmp_path, """
Ann and Bob sat together at the long table in the kitchen over their supper.

Bob looked at the empty hook by the door. Who had taken the key to the press? Had Cy come back in the night?

"Pass the bread," said Ann.

Bob passed it and kept repeating to himself, "Cy has it. I know that Cy has it."
""")
    assert knowers(knows, "Who had taken the key") == {"bob-hale"}
    assert "ann-moss" not in knowers(knows, "Had Cy come back")
    assert "ann-moss" not in knowers(knows, "I know that Cy has it")


def test_what_follows_a_narrated_question_while_nobody_acts_is_still_the_askers_thought(tmp_path):
    # Around the World, ch. XII: "What was this cool Englishman thinking of? ... This would be utter folly"
    _, _, knows = build(tmp_path, """
Ann and Bob sat together at the long table in the kitchen over their supper.

Bob looked hard at Ann across the candle. What was she planning? This would be utter folly, and it was \
hard to believe that she was such a fool. Ann rose and filled the kettle at the pump.
""")
    assert knowers(knows, "What was she planning") == {"bob-hale"}
    assert knowers(knows, "This would be utter folly") == {"bob-hale"}
    assert {"ann-moss", "bob-hale"} <= knowers(knows, "Ann rose and filled")


def test_what_moves_a_characters_mind_and_the_thought_it_starts_are_theirs(tmp_path):
    # Around the World, ch. XVIII: "This expression rather disturbed Fix, without his knowing why. Had the
    # Frenchman guessed his real purpose? He knew not what to think."
    _, _, knows = build(tmp_path, """
Ann and Bob sat together at the long table in the kitchen over their supper.

"You are a sly one," said Ann, laughing at him across the candle.

This word rather disturbed Bob, without his knowing why. Had she found the key? He knew not what to think. Ann rose and filled the kettle at the pump.
""")
    assert knowers(knows, "This word rather disturbed Bob") == {"bob-hale"}
    assert knowers(knows, "He knew not what to think") == {"bob-hale"}
    assert {"ann-moss", "bob-hale"} <= knowers(knows, "Ann rose and filled")


def test_when_the_story_follows_a_departing_character_the_others_stay_behind(tmp_path):
    _, _, knows = build(tmp_path, """
Ann and Bob sat together at the long table in the kitchen.

"I shall see to the mare," said Bob, and Bob went out into the yard.

The yard lay white under the moon, and the pump handle was stiff with frost.

Bob crossed to the stable and saddled the grey mare by the light of his lantern.
""")
    assert "ann-moss" not in knowers(knows, "The yard lay white")
    assert "ann-moss" not in knowers(knows, "Bob crossed to the stable")
    assert "bob-hale" in knowers(knows, "The yard lay white")


def test_a_move_within_the_room_is_no_departure(tmp_path):
    _, _, knows = build(tmp_path, """
Ann and Bob sat together at the long table in the kitchen.

"The kettle is boiling," said Bob, and Bob went back to his seat by the fire.

Ann poured the tea into the two blue cups on the dresser.

"There is no sugar left in the house," said Ann.
""")
    assert "bob-hale" in knowers(knows, "Ann poured the tea")
    assert "bob-hale" in knowers(knows, '"There is no sugar')


def test_a_fronted_time_or_place_adverbial_does_not_hide_the_subjects_arrival(tmp_path):
    _, _, knows = build(tmp_path, """
Cy walked the harbour wall alone before dawn and counted the boats at their moorings.

The council sat at noon and rose at three, and at dusk Ann found Cy on the harbour wall again.

"The boats are all in," said Cy.
""")
    assert "ann-moss" not in knowers(knows, "Cy walked the harbour wall")
    assert "ann-moss" in knowers(knows, "The council sat at noon")
    assert "ann-moss" in knowers(knows, '"The boats are all in')


def test_a_companion_who_had_come_with_someone_is_present_from_that_sentence(tmp_path):
    _, _, knows = build(tmp_path, """
Cy walked the harbour wall alone before dawn and counted the boats at their moorings.

At dusk Ann found Cy on the harbour wall again, at the top of the steps.

Bob had come down with her, carrying the long pole and a can of new oil.

"The boats are all in," said Cy.
""")
    assert "bob-hale" not in knowers(knows, "Cy walked the harbour wall")
    assert "bob-hale" in knowers(knows, "Bob had come down with her")
    assert "bob-hale" in knowers(knows, '"The boats are all in')


def test_the_narrators_general_present_exposition_reaches_nobody(tmp_path):
    _, _, knows = build(tmp_path, """
Ann and Bob sat together at the long table in the kitchen.

"The carrier will be late again," said Bob.

The town of Harlow is situated at the mouth of the river. The road to the coast runs along its northern bank.

Ann looked up from the bread she was cutting.

"Then we shall wait," said Ann.
""")
    assert knowers(knows, "The town of Harlow is situated") == set()
    assert knowers(knows, "The road to the coast runs") == set()
    assert {"ann-moss", "bob-hale"} <= knowers(knows, '"Then we shall wait')


def test_another_writers_document_starts_afresh(tmp_path):
    cast = CAST.replace("    aliases: [Ann]\n", "    aliases: [Ann]\n    narrator_spans:\n"
                        "      - start: \"_Ann Moss's Journal._\"\n        end: \"_Cutting from\"\n")
    _, _, knows = build(tmp_path, """
_Ann Moss's Journal._

I sat by the window of the inn with Bob all the evening, and we talked of the wreck until late.

"The ship went down off the point in the dark," said Bob, and he filled his pipe again.

_Cutting from the Town Gazette, 8 August._

The body of a sailor was found on the sands below the cliffs this morning by two fishermen.
The coroner will sit on Thursday, and the harbour master has asked for witnesses of the wreck.
""", cast)
    assert "bob-hale" in knowers(knows, '"The ship went down')
    assert knowers(knows, "The body of a sailor") & {"ann-moss", "bob-hale"} == set()


def test_a_reverie_and_what_one_comes_to_believe_are_the_thinkers_alone(tmp_path):
    _, _, knows = build(tmp_path, """
Ann and Bob sat together in the railway carriage as the train ran on through the hills.

Bob was now plunged into absorbing reverie. The journey would not end at the coast after all. He came to regard
the wager as a serious matter, and began to worry about every delay on the line.

Ann opened the window and looked out at the river below.
""")
    assert knowers(knows, "Bob was now plunged") == {"bob-hale"}
    assert knowers(knows, "The journey would not end") == {"bob-hale"}  # the reverie goes on
    assert knowers(knows, "He came to regard") == {"bob-hale"}  # coming to believe is no act
    assert {"ann-moss", "bob-hale"} <= knowers(knows, "Ann opened the window")


def test_being_puzzled_and_asking_oneself_are_the_thinkers_alone(tmp_path):
    _, _, knows = build(tmp_path, """
Ann and Bob sat together in the railway carriage as the train ran on through the hills.

Bob was fairly puzzled. He asked himself whether the stranger at the station had been following them.

Ann opened the window and looked out at the river below.
""")
    assert knowers(knows, "Bob was fairly puzzled") == {"bob-hale"}
    assert knowers(knows, "He asked himself whether") == {"bob-hale"}
    assert {"ann-moss", "bob-hale"} <= knowers(knows, "Ann opened the window")


@pytest.mark.parametrize("thought", [
    "Bob even felt a strong desire to shake the stranger by the hand.",
    "Bob remembered that it was the stranger who had found the carriage.",
    "Bob would never forget what the stranger had risked for them.",
    "Bob was greatly tempted to stop the stranger on the spot.",
    "Bob would have liked to read the stranger's eyes.",
])
def test_remembering_being_tempted_and_wishing_are_the_thinkers_alone(tmp_path, thought):
    _, _, knows = build(tmp_path, f"""
Ann and Bob sat together in the railway carriage as the train ran on through the hills.

{thought}

Ann opened the window and looked out at the river below.
""")
    assert knowers(knows, thought[:20]) == {"bob-hale"}
    assert {"ann-moss", "bob-hale"} <= knowers(knows, "Ann opened the window")


@pytest.mark.parametrize("act", ["Bob remembered to lock the door behind the stranger.",
                                 "Bob recalled the dog with a sharp whistle."])
def test_remembering_to_do_something_and_calling_back_are_acts_the_others_see(tmp_path, act):
    _, _, knows = build(tmp_path, f"""
Ann and Bob sat together in the railway carriage as the train ran on through the hills.

{act}

Ann opened the window and looked out at the river below.
""")
    assert {"ann-moss", "bob-hale"} <= knowers(knows, act[:20])


def test_a_thought_told_as_a_parenthesis_or_a_counterfactual_is_the_thinkers_alone(tmp_path):
    _, _, knows = build(tmp_path, """
Ann and Bob sat together in the railway carriage as the train ran on through the hills.

Bob began very seriously to conjecture why the stranger was on the train. He never could have imagined that
Ann was the one being followed. Bob walked to the end of the carriage.
Cy, he thought, could only be an agent of Mr. Dunn's old partners.

Ann opened the window and looked out at the river below.
""")
    assert knowers(knows, "Bob began very seriously") == {"bob-hale"}  # an intensifier before the adverb
    # what he could not have thought is withheld from him too: it tells what he does not know
    assert knowers(knows, "He never could have imagined") == set()
    assert {"ann-moss", "bob-hale"} <= knowers(knows, "Bob walked to the end")
    # a parenthetical "he thought"; and the title before a name ends no sentence, so the thought is one unit
    assert knowers(knows, "Cy, he thought, could only be an agent of Mr. Dunn's old partners.") == {"bob-hale"}
    assert {"ann-moss", "bob-hale"} <= knowers(knows, "Ann opened the window")


def test_the_narrators_own_pondering_and_resolving_reach_only_the_narrator(tmp_path):
    cast = CAST.replace("    aliases: [Ann]\n", "    aliases: [Ann]\n    narrator_spans: all\n")
    _, _, knows = build(tmp_path, """
Bob came in one morning while I sat at breakfast, and he laughed at my newspaper.

I pondered over our short conversation, however, and tried to draw my deductions from it. I enumerated in my
own mind all the points on which he was well informed. I even took a pencil and jotted them down.

Bob rang for more coffee and opened the window.
""", cast)
    assert knowers(knows, "I pondered over") == {"ann-moss"}
    assert knowers(knows, "I enumerated in my") == {"ann-moss"}
    assert "bob-hale" in knowers(knows, "I even took a pencil")  # an act: seen by whoever is there
    assert "bob-hale" in knowers(knows, "Bob rang for more coffee")


def test_the_narrators_hidden_fear_and_what_another_does_not_know_are_not_theirs(tmp_path):
    """Hidden in the barrel, the narrator hears Bob: the narrator's fear and what they would have done are the
    narrator's, not Bob's, though his voice is in the sentence; "He did not know that I had overheard him" is
    withheld from him; a deed of his told beside a thought of the narrator's ("as I thought") stays his."""
    cast = CAST.replace("    aliases: [Ann]\n", "    aliases: [Ann]\n    narrator_spans: all\n")
    _, _, knows = build(tmp_path, """
Bob came down to the hold with a lantern and sat on a coil of rope beside the barrel where I lay.

It was Bob's voice, and before I had heard a dozen words, I would not have shown myself for all the world.

"The gold is under the third stone of the old well," said Bob.

Bob lifted the lid of the barrel, and he looked in at me and laughed.

He did not know, to be sure, that I had overheard him from the barrel.

Bob added to me in a low whisper, as I thought, that the wind would turn.

Bob said, "Come here, lass," and I knew then that he meant to sail without Cy.

Bob's hand closed hard upon my arm, and I felt sick with fear.

"Listen. He did not know that the gold was under the third stone," said Bob to me.
""", cast)
    assert knowers(knows, "It was Bob's voice") == {"ann-moss"}
    assert "bob-hale" in knowers(knows, '"The gold is under')
    assert "bob-hale" not in knowers(knows, "He did not know, to be sure")
    assert "bob-hale" in knowers(knows, "Bob added to me")
    assert knowers(knows, "Bob said, \"Come here") == {"ann-moss"}  # the narrator's knowing, after the quotation
    assert "bob-hale" in knowers(knows, "Bob's hand closed")  # his deed, though told by a part of him
    assert "bob-hale" in knowers(knows, 'He did not know that the gold')  # what he says himself is his


def test_after_a_change_of_time_inside_a_scene_who_is_there_must_show_again(tmp_path):
    book, roster, knows = build(tmp_path, """
Ann and Bob sat together at the long table in the kitchen.

"The mare is lame again," said Bob.

Three days later the frost broke over the town.

The harbour filled with boats from the north, and the market was loud with fish.

Bob mended the torn net in the yard behind the house.
""")
    # one offline scene: the cue is too close to the chapter's start to cut it, but it is a checkpoint
    assert roster["bob-hale"].status() == "present_active"
    assert "bob-hale" in knowers(knows, '"The mare is lame')
    assert "bob-hale" not in knowers(knows, "The harbour filled") and "ann-moss" not in knowers(
        knows, "The harbour filled")
    assert "bob-hale" in knowers(knows, "Bob mended the torn net")


def test_one_said_to_be_with_us_is_present_from_there(tmp_path):
    _, roster, knows = build(tmp_path, """
Ann and I sat by the fire in the kitchen, where the lamp was lit early.

Bob was with us by then, his coat still wet from the road.

Ann told us that the brass key to the press was gone from its hook.

Cy was with his sister at the mill, and heard nothing of it.
""")
    assert "bob-hale" in knowers(knows, "Ann told us that the brass key")
    assert roster["bob-hale"].status().startswith("present")
    assert "cy-dunn" not in knowers(knows, "Ann told us that the brass key")


def test_a_roll_of_those_present_puts_each_listed_name_there(tmp_path):
    _, roster, knows = build(tmp_path, """
Our meeting in the long room at the mill. Present: Mr. Bob Hale, Ann Moss, and the miller.

The miller told the meeting that the brass key to the press was gone from its hook.

Afterwards the miller wrote to Cy that the key was gone.
""")
    assert {"ann-moss", "bob-hale"} <= knowers(knows, "The miller told the meeting")
    assert roster["bob-hale"].status().startswith("present")
    assert "cy-dunn" not in knowers(knows, "The miller told the meeting")


def test_a_name_and_his_companions_acting_together_put_him_there(tmp_path):
    _, roster, knows = build(tmp_path, """
The cart climbed the long hill above the town in the grey morning.

Having breakfasted, Bob and his companions resumed their places in the cart.

The carter told them that the brass key to the press was gone from its hook.
""")
    assert "bob-hale" in knowers(knows, "The carter told them that the brass key")
    assert roster["bob-hale"].status().startswith("present")


def test_what_of_theirs_comes_in_is_no_arrival_of_theirs(tmp_path):
    _, roster, knows = build(tmp_path, """
Ann sat by the fire in the kitchen with her mending in her lap.

Bob's letter came in with the morning post, and Ann read it twice over.

"The brass key to the press is gone from its hook," said Ann to the cat.

Bob came in at noon, shaking the rain from his coat.

"I wrote to you that I would come," said Bob.
""")
    assert "bob-hale" not in knowers(knows, '"The brass key to the press')
    assert "bob-hale" in knowers(knows, '"I wrote to you')


def test_an_act_in_a_when_clause_inside_a_pluperfect_one_is_an_earlier_time(tmp_path):
    _, roster, knows = build(tmp_path, """
Ann sat by the fire in the kitchen with her mending in her lap.

A draught came from the window, which had rattled ever since that wild night when Bob broke the latch, and Ann shivered.

"The brass key to the press is gone from its hook," said Ann to the cat.
""")
    assert "bob-hale" not in knowers(knows, '"The brass key to the press')
    assert not roster["bob-hale"].status().startswith("present")


def test_when_the_narrator_comes_into_another_room_those_left_behind_do_not_follow(tmp_path):
    cast = CAST.replace("    aliases: [Ann]\n", "    aliases: [Ann]\n    narrator_spans: all\n")
    _, roster, knows = build(tmp_path, """
Bob and I sat late in the kitchen and talked it all over. Bob is mending the net, and I shall go up to the mill.

When I came into the mill-house the miller was at the stones. The miller told me that the brass key to the press was gone.
""", cast)
    assert "bob-hale" not in knowers(knows, "The miller told me that the brass key")
    assert "ann-moss" in knowers(knows, "The miller told me that the brass key")


def test_the_party_coming_back_home_is_a_change_of_place(tmp_path):
    cast = CAST.replace("    aliases: [Ann]\n", "    aliases: [Ann]\n    narrator_spans: all\n")
    _, roster, knows = build(tmp_path, """
Bob and I waited at the mill while the miller ground the last of the corn.

"The mare is lame again," said Bob.

With heavy hearts we came back to the house, where the lamp was already lit.

The brass key to the press was gone from its hook, and the door of the press stood open.
""", cast)
    assert "bob-hale" in knowers(knows, '"The mare is lame')
    assert "bob-hale" not in knowers(knows, "The brass key to the press was gone")
    assert "ann-moss" in knowers(knows, "The brass key to the press was gone")


def test_one_said_to_be_with_someone_who_is_there_is_there_too(tmp_path):
    _, roster, knows = build(tmp_path, """
Ann was sitting at the door of the mill with her mending in her lap.

Bob and Cy were with Ann at the door, asking questions about the night.

The miller told them that the brass key to the press was gone from its hook.
""")
    assert {"bob-hale", "cy-dunn"} <= knowers(knows, "The miller told them that the brass key")


def test_one_said_to_be_with_someone_elsewhere_is_not_here(tmp_path):
    _, roster, knows = build(tmp_path, """
Ann sat by the fire in the kitchen with her mending in her lap.

Bob was with Cy at the fair in the next town all that day.

The miller told Ann that the brass key to the press was gone from its hook.
""")
    assert "bob-hale" not in knowers(knows, "The miller told Ann that the brass key")


def test_they_acting_after_a_sentence_naming_two_are_those_two(tmp_path):
    _, roster, knows = build(tmp_path, """
Ann sat by the fire in the kitchen with her mending in her lap.

At dusk the latch lifted, and on the step stood Bob and Cy. They came quickly in and shut the door behind them.

The miller's boy told them all that the brass key to the press was gone from its hook.
""")
    assert {"bob-hale", "cy-dunn"} <= knowers(knows, "The miller's boy told them all")


def test_the_narrator_coming_along_a_corridor_leaves_the_room_behind(tmp_path):
    cast = CAST.replace("    aliases: [Ann]\n", "    aliases: [Ann]\n    narrator_spans: all\n")
    _, roster, knows = build(tmp_path, """
Bob and I sat late in the parlour, and Bob wept for his brother.

As I came along the corridor I met the miller. The miller told me that the brass key to the press was gone.
""", cast)
    assert "bob-hale" not in knowers(knows, "The miller told me that the brass key")
    assert "ann-moss" in knowers(knows, "The miller told me that the brass key")


def test_springing_out_of_a_chair_is_no_departure(tmp_path):
    _, roster, knows = build(tmp_path, """
Ann and Bob sat by the fire in the kitchen with the lamp between them.

Bob sprang out of his chair and upset the remainder of his tea.

"The brass key to the press is gone from its hook," said Ann.
""")
    assert "bob-hale" in knowers(knows, '"The brass key to the press')


def test_an_arrival_denied_or_imagined_is_none(tmp_path):
    _, roster, knows = build(tmp_path, """
Ann sat by the fire in the kitchen with her mending in her lap.

Bob did not come in at supper, and Cy would gladly have hurried into the kitchen, but the snow held him.

"The brass key to the press is gone from its hook," said Ann to the cat.

Bob came in at midnight, shaking the snow from his coat.

"I was held at the mill," said Bob.

Cy came in behind him. "The snow is deep on the hill road," said Cy.
""")
    assert not {"bob-hale", "cy-dunn"} & knowers(knows, '"The brass key to the press')
    assert "bob-hale" in knowers(knows, '"I was held at the mill')


def test_one_who_did_not_go_with_the_others_stayed_there(tmp_path):
    # the demo's muster: "Mara did not go with them. She had traded her round with Hobb for the night"
    _, roster, knows = build(tmp_path, """
The muster broke up after the evening bell, and the lamplighters went out to their rounds.

Bob did not go with them, and sat on in the emptying hall by the cold stove.

The miller's boy ran in and told the hall that the brass key to the press was gone from its hook.

"Then someone has the key," said Bob.
""")
    assert "bob-hale" in knowers(knows, "The miller's boy ran in and told the hall")


def test_what_one_did_not_notice_or_know_places_nobody(tmp_path):
    _, roster, knows = build(tmp_path, """
Ann sat by the fire in the kitchen with her mending in her lap.

Bob did not notice that the brass key was gone, nor did Cy; neither had been near the press all week.

"The brass key to the press is gone from its hook," said Ann to the cat.
""")
    assert "bob-hale" not in knowers(knows, '"The brass key to the press')


def test_one_the_narrator_wakes_or_tells_is_there(tmp_path):
    cast = CAST.replace("    aliases: [Ann]\n", "    aliases: [Ann]\n    narrator_spans: all\n")
    _, roster, knows = build(tmp_path, """
I kept the fire alive all night in the little hut under the pass, and the wolves howled below.

Near dawn I woke Bob, for the snow had stopped. The brass key of the press, I saw, was gone from the ring.
""", cast)
    assert "bob-hale" in knowers(knows, "The brass key of the press")


def test_one_the_narrator_looks_at_is_there(tmp_path):
    # Dracula: "I looked at Van Helsing", "I glanced at Quincey": in the narrator's sight, in the room
    cast = CAST.replace("    aliases: [Ann]\n", "    aliases: [Ann]\n    narrator_spans: all\n")
    _, roster, knows = build(tmp_path, """
I kept the fire alive all night in the little hut under the pass, and the wolves howled below.

Near dawn I glanced at Bob, for the snow had stopped. The brass key of the press, I saw, was gone from the ring.
""", cast)
    assert "bob-hale" in knowers(knows, "The brass key of the press")


def test_what_the_narrator_says_aloud_of_her_mind_is_heard_and_what_she_keeps_is_not(tmp_path):
    cast = CAST.replace("    aliases: [Ann]\n", "    aliases: [Ann]\n    narrator_spans: all\n")
    _, _, knows = build(tmp_path, """
Bob came in one morning while I sat at breakfast, and he laughed at my newspaper.

"You will never find the key in there," said Bob.

I said I was sure of it, and then he went on about the fair. I said nothing of the key, but I felt sure he had it.

Bob rang for more coffee and opened the window.
""", cast)
    assert "bob-hale" in knowers(knows, "I said I was sure of it")  # said aloud, heard by the one there
    assert knowers(knows, "I said nothing of the key") == {"ann-moss"}  # kept to herself


@pytest.mark.parametrize("kept", [
    "I told myself I feared he had the key.",
    "I answered him civilly, but in my own mind I knew he lied.",
    "I replied, and all the while I felt that he was lying.",
    "I told Bob nothing; I fear he suspects.",
])
def test_a_thought_beside_words_said_is_still_the_narrators_own(tmp_path, kept):
    cast = CAST.replace("    aliases: [Ann]\n", "    aliases: [Ann]\n    narrator_spans: all\n")
    _, _, knows = build(tmp_path, f"""
Bob came in one morning while I sat at breakfast, and he laughed at my newspaper.

"You will never find the key in there," said Bob.

{kept} Bob rang for more coffee and opened the window.
""", cast)
    assert knowers(knows, kept[:20]) == {"ann-moss"}
