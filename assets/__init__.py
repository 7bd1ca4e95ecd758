"""The project's assets, one module per stage, gathered in the lists the wiring and the build use.

`BOOK_ASSETS` are partitioned by book and `CHARACTER_ASSETS` by book x
character; together they are a book's memory (with the offline reasoner's calibration, `reader_calibration`).
`EVALUATION_ASSETS` score it.
`book_text` is the registered book, an external asset observed by the build.
"""

from assets import episodic, evaluation, knowledge, narrative, personality, scenes
from assets.context import book_text

BOOK_ASSETS = [scenes.scenes, scenes.utterances, scenes.scene_rosters,
               knowledge.scene_graphs, knowledge.entities, knowledge.memberships, knowledge.facts,
               personality.dialogue_records]
CHARACTER_ASSETS = [scenes.character_scenes, episodic.episodes,
                    personality.emotion_transitions, personality.personality_patterns,
                    evaluation.reader_calibration]
EVALUATION_ASSETS = [evaluation.kbf_items, evaluation.kbf_report]
NARRATIVE_ASSETS = [narrative.scripts, narrative.stories, narrative.judgements, narrative.narrative_report]
# Modules an asset imports only when it runs and that take a moment to import (hdbscan: about a second of CPU):
# a build imports those of its planned assets in the background while its first model calls are out.
SLOW_IMPORTS = {personality.personality_patterns.key: ("hdbscan",)}

__all__ = ["BOOK_ASSETS", "CHARACTER_ASSETS", "EVALUATION_ASSETS", "NARRATIVE_ASSETS", "SLOW_IMPORTS", "book_text"]
