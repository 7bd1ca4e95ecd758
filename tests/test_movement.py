"""Narrated movement on short synthetic passages: leaving by pronoun, being alone, following a leaver, asides."""

from reveriemem.source_to_memory.movement import departs, pronoun_subject, writing_now
from tests.test_presence_and_death import build, knowers

CAST = """characters:
  - name: Ann Moss
    aliases: [Ann]
    gender: female
  - name: Bob Hale
    aliases: [Bob]
    gender: male
  - name: Cy Dunn
    aliases: [Cy]
    gender: male
"""


def test_he_who_leaves_is_the_last_man_who_acted_by_name(tmp_path):
    _, _, knows = build(tmp_path, """
Ann and Bob sat at the table in the inn's parlour, over the remains of supper.

Bob rose and folded his napkin.  He went down to the cellar with a candle.

Ann counted the coins in her purse and laid them in a row beside her plate.

"Two shillings short," said Ann.
""", CAST)
    assert "bob-hale" not in knowers(knows, "Ann counted the coins")
    assert "bob-hale" not in knowers(knows, '"Two shillings short')
    assert "ann-moss" in knowers(knows, '"Two shillings short')


def test_a_pronoun_with_two_candidates_of_its_gender_decides_nothing():
    actors = [(10, "bob-hale"), (40, "cy-dunn")]
    genders = {"bob-hale": "male", "cy-dunn": "male", "ann-moss": "female"}
    assert pronoun_subject("He", 100, actors, genders) is None
    assert pronoun_subject("She", 100, actors, genders) is None
    assert pronoun_subject("He", 900, [(10, "bob-hale"), (700, "cy-dunn")], genders) == "cy-dunn"


def test_alone_with_someone_leaves_only_the_two(tmp_path):
    _, _, knows = build(tmp_path, """
Ann, Bob and Cy stood together in the hall of the old house, talking of the harvest.

In the evening Ann found herself alone with Bob by the fire in the hall.

"I never meant to leave the farm," said Bob quietly.
""", CAST)
    assert knowers(knows, '"I never meant') >= {"ann-moss", "bob-hale"}
    assert "cy-dunn" not in knowers(knows, '"I never meant')


def test_the_story_follows_a_leaver_even_when_it_meets_someone_new_outside(tmp_path):
    _, _, knows = build(tmp_path, """
Ann and Bob sat in the railway car, watching the snow fall on the plain.

Bob rushed out of the car.  A dozen passengers stood by the line, and among them was Cy.

Cy stamped his boots in the snow and shouted at the guard about the broken bridge ahead.

Bob listened with set teeth and said nothing of the bridge to anyone.
""", CAST)
    assert "ann-moss" not in knowers(knows, "Cy stamped his boots")
    assert "ann-moss" not in knowers(knows, "Bob listened with set teeth")
    assert "bob-hale" in knowers(knows, "Cy stamped his boots")


def test_words_said_to_oneself_are_heard_by_nobody_else(tmp_path):
    _, _, knows = build(tmp_path, """
Ann and Bob walked together along the quay in the grey morning light.

"The ledger was forged," muttered Bob to himself, "and the clerk knows it."
""", CAST)
    assert knowers(knows, '"The ledger was forged') == {"bob-hale"}


def test_departure_verbs_need_their_own_subject():
    text = "Bob pressed her hand, and, having given her the bag, went off with the soldiers."
    assert departs(text, len("Bob"), len(text))
    text = "Bob watched as the guard rushed out of the car."
    assert not departs(text, len("Bob"), len(text))
    text = "Bob went back to his seat by the window."
    assert not departs(text, len("Bob"), len(text))


def test_a_place_named_with_capitals_is_still_a_place_left():
    # Around the World, ch. XXXIV: Fix stays on the Custom House floor while the three leave
    text = "Mr. Fogg, Aouda, and Passepartout left the Custom House without delay, got into a cab."
    assert departs(text, len("Mr. Fogg"), len(text))
    text = "Bob went to the Reform Club to dine."
    assert departs(text, len("Bob"), len(text))
    for text in ("Bob left Carter at the gate.", "Bob left Campbell a note.", "Bob left the Court Circular on the table.",
                 "Bob left the carpet wet."):  # a name or a word that only begins like a place is none
        assert not departs(text, len("Bob"), len(text)), text


def test_setting_off_is_a_departure_and_setting_a_thing_out_is_not():
    text = "Bob took up his hat, put the chart in his pocket, crossed the palisade and set off briskly through the trees."
    assert departs(text, len("Bob"), len(text))
    text = "Bob set out for the coast at dawn."
    assert departs(text, len("Bob"), len(text))
    text = "Bob set out the cups and the saucers on the table."
    assert not departs(text, len("Bob"), len(text))


NARRATED = CAST.replace("    aliases: [Ann]\n", "    aliases: [Ann]\n    narrator_spans: all\n")


def test_the_company_stays_behind_when_the_first_person_narrator_leaves(tmp_path):
    _, _, knows = build(tmp_path, """
Bob and I sat over our supper in the parlour of the inn, talking of the harvest.

"The barley is in at last," said Bob, and filled his pipe.

I left them there and went down to the cellar with a candle. I counted the casks along the wall.
""", NARRATED)
    assert "bob-hale" in knowers(knows, '"The barley is in')
    assert "bob-hale" not in knowers(knows, "I counted the casks")
    assert "ann-moss" in knowers(knows, "I counted the casks")


def test_the_narrator_moving_with_the_company_separates_nobody(tmp_path):
    _, _, knows = build(tmp_path, """
Bob and I sat over our supper in the parlour of the inn, talking of the harvest.

"The barley is in at last," said Bob, and filled his pipe.

Bob and I went out to the yard together. The moon was up over the barn roof.
""", NARRATED)
    assert {"ann-moss", "bob-hale"} <= knowers(knows, "The moon was up")


def test_he_after_a_participle_clause_leaves_as_the_speaker_before_him(tmp_path):
    _, _, knows = build(tmp_path, """
Ann and Bob stood on the deck of the ship in the evening light, watching the gulls.

"A fair wind for the morning," says Bob.

And clapping her upon the shoulder, he hobbled off forward and went below.

Ann leaned on the rail and watched the lights of the harbour come out one by one.
""", CAST)
    assert "bob-hale" not in knowers(knows, "Ann leaned on the rail")


def test_seeming_is_no_arrival():
    from reveriemem.source_to_memory.rosters import _ARRIVAL

    assert _ARRIVAL.search(" himself appeared less terrible in contrast with this creature of the woods") is None
    assert _ARRIVAL.search(" appeared at the door with a lantern") is not None
    assert _ARRIVAL.search(" appeared.") is not None


def test_a_bargain_with_someone_is_no_company_and_staying_with_them_is(tmp_path):
    _, _, knows = build(tmp_path, """
Ann sat alone in the cabin with the ledger open before her on the table.

Had she not struck a bargain with Bob, the whole crew would have been lost long ago.

In the evening Ann stayed behind in the empty cabin with Cy, and they read the ledger through.
""", CAST)
    assert "bob-hale" not in knowers(knows, "In the evening Ann stayed")
    assert "cy-dunn" in knowers(knows, "In the evening Ann stayed")


def test_the_narrator_finding_people_seated_leaves_the_others_behind(tmp_path):
    _, _, knows = build(tmp_path, """
Bob and Cy stood on the deck of the ship with me, watching the island come up out of the sea.

"A fair wind," said Cy, and went below to the cabin.

Not long after, I was sent for, and I found them all three seated round the table in the cabin.
The stern window was open, and the moon shone on the water behind.
""", NARRATED)
    assert "bob-hale" not in knowers(knows, "The stern window was open")


def test_someone_compared_in_the_narration_is_not_there(tmp_path):
    _, _, knows = build(tmp_path, """
Ann walked on through the wood alone, and a wild figure sprang out from behind a tree before her.

Bob himself appeared less terrible in contrast with this creature of the woods, and Ann turned on her heel.

The creature followed her at a distance, dodging from trunk to trunk like a deer.
""", CAST)
    assert "bob-hale" not in knowers(knows, "The creature followed her")


def test_doing_as_someone_directed_does_not_bring_them(tmp_path):
    _, _, knows = build(tmp_path, """
Ann went up to her room at the top of the lonely house on the hill.

She set the flowers round the window as Bob directed, and soon fell asleep in the chair.

A flapping at the window woke her in the dark of the night.
""", CAST)
    assert "bob-hale" not in knowers(knows, "A flapping at the window")


def test_word_sent_from_afar_does_not_bring_its_sender(tmp_path):
    cast = CAST.replace("    aliases: [Ann]\n", "    aliases: [Ann]\n    narrator_spans: all\n")
    _, _, knows = build(tmp_path, """
I sat late in my study over the ledgers of the house with the lamp turned low.

Bob wrote me a line too, and from him I hear that the roads are open again in the north.

"You work too late, sir," said the old servant at the door, and I sent him to bed.
""", cast)
    assert "bob-hale" not in knowers(knows, '"You work too late')


def test_the_narrators_journey_to_a_named_place_leaves_the_company_behind(tmp_path):
    cast = CAST.replace("    aliases: [Ann]\n", "    aliases: [Ann]\n    narrator_spans: all\n")
    _, _, knows = build(tmp_path, """
I rose early and went down to breakfast in the long room of the house.

Bob came in and sat with me, and I told him where I was off to. I drove to Walworth and found the court.

The man who came to the door shook his head and said he knew no such person.
""", cast)
    assert "bob-hale" not in knowers(knows, "The man who came to the door")


def test_a_face_under_a_modal_puts_nobody_there(tmp_path):
    _, _, knows = build(tmp_path, """
Ann wrote late by the candle in her room at the top of the lonely house on the hill.

It is not good to note this down, lest some day it should meet Bob's eyes and cause him pain.

The three women whispered together in the passage, and then they all laughed.
""", CAST)
    assert "bob-hale" not in knowers(knows, "The three women whispered")


def test_names_joined_to_a_leaver_leave_with_them(tmp_path):
    _, _, knows = build(tmp_path, """
Ann, Bob and Cy stood together by the grave until the last of the mourners had gone.

Bob and Cy went away together to the station, and Ann walked on alone up the hill.

The wind had dropped, and the church clock struck four over the empty road.
""", CAST)
    assert "bob-hale" not in knowers(knows, "The wind had dropped")


def test_going_on_deck_or_upstairs_leaves_but_an_errand_there_and_back_does_not(tmp_path):
    _, _, knows = build(tmp_path, """
Bob and I sat over our supper in the cabin of the brig, talking of the voyage.

"We shall sight the island by noon," said Bob, and filled his pipe.

I ran on deck. The watch stood forward, and I climbed into the boat that lay amidships.
""", NARRATED)
    assert "bob-hale" in knowers(knows, '"We shall sight')
    assert "bob-hale" not in knowers(knows, "The watch stood forward")
    (tmp_path / "errand").mkdir()
    _, _, knows = build(tmp_path / "errand", """
Bob and I sat over our supper in the parlour of the inn, talking of the harvest.

"The barley is in at last," said Bob, and filled his pipe.

I went downstairs and carried the lamp back up in my hand. The flame shook as I set it on the table.
""", NARRATED)
    assert "bob-hale" in knowers(knows, "The flame shook")
    assert not departs("Bob went upstairs and came back with a candle.", 3, 48)
    assert departs("Bob went upstairs to bed.", 3, 25)


def test_he_found_himself_alone_with_her_leaves_the_others_even_named_only_before(tmp_path):
    _, _, knows = build(tmp_path, """
Cy sat in a corner of the parlour and looked ruefully at the fire. Ann was still pensive.

About half-past seven in the evening Bob sent to know if Ann would receive him, and in a few moments he found himself alone with her.

Bob took a chair near the fireplace. "Madam, will you pardon me?" said he.
""", CAST)
    assert "cy-dunn" in knowers(knows, "Ann was still pensive")
    assert "cy-dunn" not in knowers(knows, "Bob took a chair")
    assert {"ann-moss", "bob-hale"} <= knowers(knows, "Bob took a chair")


def test_being_alone_when_a_visitor_comes_in_keeps_the_visitor(tmp_path):
    _, _, knows = build(tmp_path, """
Ann climbed the outside stair late that afternoon, and knocked, and heard him call out for her to come in.

He was alone, as he nearly always was, sitting by a small fire. Bob brightened when he saw who it was.

"Ann! Has it turned up?" said Bob.
""", CAST)
    assert "ann-moss" in knowers(knows, "Has it turned up")


def test_what_a_narrated_question_wonders_seats_nobody(tmp_path):
    _, _, knows = build(tmp_path, """
Ann sat alone by the fire with her mending in her lap.

Should she tell her brother of the letter? Would it not be better to wait until Bob came home from the fair?

The clock struck nine and the fire burned low in the grate.
""", CAST)
    assert "bob-hale" not in knowers(knows, "The clock struck nine")


def test_those_who_go_out_with_a_leaver_are_where_the_story_goes_and_who_stays_is_not(tmp_path):
    _, _, knows = build(tmp_path, """
Ann, Bob and Cy sat at the little table in the railway car and played at cards.

At eleven the whistle blew. Ann rose, and, followed by Bob, went out upon the platform. Cy remained in the car, as pale as death. "It is cold out here," said Ann.

The wind blew the smoke of the engine low across the platform.
""", CAST)
    assert knowers(knows, "The wind blew the smoke") >= {"ann-moss", "bob-hale"}
    assert "cy-dunn" not in knowers(knows, "The wind blew the smoke")


def test_those_named_with_the_narrator_as_one_company_are_where_the_narration_is(tmp_path):
    _, _, knows = build(tmp_path, """
A little before midnight we three--Bob, Cy Dunn, and myself--went to the churchyard. The gate was locked
and the sexton had gone home. I lit the lantern and held it over the tomb while the wind rose.

The lid of the coffin lay a little aside, and within it there was nothing but dust.
""", NARRATED)
    assert knowers(knows, "The lid of the coffin") >= {"ann-moss", "bob-hale", "cy-dunn"}


def test_a_name_beside_the_narrator_in_a_possession_a_wish_or_a_fear_places_nobody(tmp_path):
    _, _, knows = build(tmp_path, """
I sat alone in my room with the note-books of Bob and Cy and myself spread on the table. If Cy and I
were walking on the cliffs, how pleasant it would be. I told the maid that both Bob and I feared rain.

The candle burned down and I went on writing late into the night.
""", NARRATED)
    assert not knowers(knows, "The candle burned down") & {"bob-hale", "cy-dunn"}


def test_one_spoken_to_in_the_narration_is_there(tmp_path):
    _, _, knows = build(tmp_path, """
Ann sat by the sick-bed and watched the candle gutter in the draught from the door.

"She will sleep till morning," said Ann quietly to Bob. "Then we shall see."

The candle went out, and the room was dark but for the fire.
""", CAST)
    assert "bob-hale" in knowers(knows, "The candle went out")
    assert "cy-dunn" not in knowers(knows, "The candle went out")


def test_one_who_stays_behind_a_little_after_the_others_leave_is_not_where_the_story_goes(tmp_path):
    _, _, knows = build(tmp_path, """
Ann, Bob and Cy sat at the little table in the railway car and played at cards.

At eleven the whistle blew. Ann rose and went out upon the platform. Bob followed with the pistols under his arm. Cy remained in the car, as pale as death.

The conductor came along the platform and shouted that the train would not stop.
""", CAST)
    assert "cy-dunn" not in knowers(knows, "The conductor came along")


def test_company_wished_for_or_planned_places_nobody(tmp_path):
    _, _, knows = build(tmp_path, """
Ann sat alone at the inn and wrote up her journal by the light of a candle. I shall keep these notes, as they may
refresh my memory when I talk over my travels with Bob.

The landlord knocked and brought her a letter and a glass of wine.
""", NARRATED)
    assert "bob-hale" not in knowers(knows, "The landlord knocked")


def test_a_thought_does_not_place_the_thinker_where_the_story_is(tmp_path):
    _, _, knows = build(tmp_path, """
Bob rightly suspected that his leaving would set the whole market talking.

The gossips met at the pump and the
baker laid a wager with the smith on the day of his return.

Ann came into the square and heard the wager.
""", CAST)
    assert "bob-hale" not in knowers(knows, "The gossips met")
    assert "ann-moss" in knowers(knows, "Ann came into the square")


def test_the_company_acting_as_one_holds_who_acts_next_in_the_paragraph(tmp_path):
    _, _, knows = build(tmp_path, """
The rain had not stopped since noon, and the lamps were lit early in the study.

We went gravely into what was to be done. The house in the square would have to be searched before the owner
came back. Bob told us what the agent had said.

Cy walked in from the stables with his coat soaked through and a letter in his hand.
""", NARRATED)
    assert "bob-hale" in knowers(knows, "The house in the square")  # "we", then Bob acts with no arrival
    assert "cy-dunn" not in knowers(knows, "The house in the square")  # Cy arrives later: not of that company
    assert "cy-dunn" in knowers(knows, "Cy walked in from the stables")


def test_getting_up_taking_off_or_letting_go_is_no_departure():
    for text in ("Bob sprang out of his chair and upset his tea.", "Bob slipped off his shoes by the door.",
                 "Bob suddenly left hold of me and stood listening."):
        assert not departs(text, len("Bob"), len(text)), text
    assert departs("Bob slipped off into the dark.", len("Bob"), 30)
    assert departs("Bob sprang out of the window.", len("Bob"), 29)


def test_going_to_the_door_is_still_inside_the_room(tmp_path):
    _, _, knows = build(tmp_path, """
Bob and I sat over our supper in the parlour of the inn, talking of the harvest.

"The barley is in at last," said Bob, and filled his pipe.

I went towards the door, saying it was late. Before I reached it the landlord's dog began to howl.
""", NARRATED)
    assert "bob-hale" in knowers(knows, "Before I reached it")
    assert not departs("I went to the door and looked out.", 1, 33)
    assert departs("I went out of the door and down the lane.", 1, 40)
    for gone in ("He went to the door and left the house.", "She ran to the front door and was gone.",
                 "He walked to the door and disappeared."):  # what is done at the door may be leaving
        assert departs(gone, 2 if gone.startswith("He") else 3, len(gone)), gone


def test_the_writers_moment_of_writing_leaves_the_company_of_the_day_behind(tmp_path):
    _, _, knows = build(tmp_path, """
Bob met me at the coach and we drove up to the inn together, talking of the harvest all the way.

"The barley is in at last," said Bob, and filled his pipe.

I like this place. Indeed, I am writing now on the bench by the churchyard wall. An old sailor sits beside me.
""", NARRATED)
    assert "bob-hale" in knowers(knows, '"The barley is in')
    assert "bob-hale" not in knowers(knows, "An old sailor sits beside me")
    assert "ann-moss" in knowers(knows, "An old sailor sits beside me")


def test_a_writing_habit_or_writing_while_others_go_on_leaves_nobody_behind(tmp_path):
    _, _, knows = build(tmp_path, """
Bob met me at the coach and we drove up to the inn together, talking of the harvest all the way.

"The barley is in at last," said Bob, and filled his pipe.

I write letters to my aunt every week, and she never answers. The landlord brought in the lamp.
""", NARRATED)
    assert "bob-hale" in knowers(knows, "The landlord brought in the lamp")
    for sentence in ("I write up my diary every night.", "What I write here is true.", "I will write to him.",
                     "I am writing this in the parlour while Bob talks.", "As I wrote it, he laughed."):
        assert writing_now(sentence, [(0, len(sentence))]) == [], sentence
    assert writing_now("As I write, Bob sleeps.", [(0, 23)]) == [(0, 23)]


def test_one_the_text_leaves_alone_with_another_is_present_though_they_never_act(tmp_path):
    _, roster, knows = build(tmp_path, """
Bob rode out to the farm in the grey morning and found that, by Ann's wish, her brother was away at the fair, so that he was alone with her.

Bob looked long at the ledger on the table and said nothing of what he thought of it.
""", CAST)
    assert "ann-moss" in knowers(knows, "Bob looked long at the ledger")
    assert roster["ann-moss"].status() == "present_silent"


def test_one_who_had_come_in_before_is_present_though_they_never_act(tmp_path):
    _, roster, knows = build(tmp_path, """
Bob stood at the window of the parlour and watched the carts go by on the wet road.

"The harvest will be late," said Bob. Cy had come in a little before and stood by the door without a word.

Bob turned back to the fire and warmed his hands.
""", CAST)
    assert "cy-dunn" in knowers(knows, "Bob turned back to the fire")
    assert roster["cy-dunn"].status() == "present_silent"


def test_a_state_of_the_body_the_others_see_is_presence(tmp_path):
    _, roster, knows = build(tmp_path, """
Bob and Cy carried the nets down to the boat in the grey light before dawn.

Ann was exhausted after the long night's watch, and leaned against the mast.

"The tide turns at six," said Bob to Cy.
""", CAST)
    assert "ann-moss" in knowers(knows, '"The tide turns at six')
    assert roster["ann-moss"].status() == "present_silent"


def test_a_name_and_the_guide_act_as_one_subject(tmp_path):
    _, roster, knows = build(tmp_path, """
Ann waited in the shadow of the wall while the lanterns went by on the road below.

Bob and the guide stopped at the gate and listened.

"They are changing the watch," said Ann.
""", CAST)
    assert "bob-hale" in knowers(knows, '"They are changing the watch')
