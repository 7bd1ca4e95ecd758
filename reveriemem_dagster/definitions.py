"""The one `Definitions` of ReverieMem."""

from __future__ import annotations

import dagster as dg

from assets import episodic as episodic_assets
from assets import evaluation as evaluation_assets
from assets import knowledge as knowledge_assets
from assets import personality as personality_assets
from assets import scenes as scene_assets
from reveriemem_dagster.io_managers import MemoryIOManager
from reveriemem_dagster.partitions import book_character_partitions, book_partitions
from reveriemem_dagster.resources import EmbeddingModel, LanguageModel
from reveriemem_dagster.whole_book import whole_book_memory

BOOK_ASSETS = [scene_assets.scenes, scene_assets.utterances, scene_assets.scene_rosters,
               knowledge_assets.scene_graphs, knowledge_assets.entities, knowledge_assets.memberships,
               knowledge_assets.facts,
               personality_assets.dialogue_records]
CHARACTER_ASSETS = [scene_assets.character_scenes, episodic_assets.episodes,
                    personality_assets.emotion_transitions, personality_assets.personality_patterns]
EVALUATION_ASSETS = [evaluation_assets.kbf_items, evaluation_assets.kbf_report]
ALL_ASSETS = [*BOOK_ASSETS, *CHARACTER_ASSETS, *EVALUATION_ASSETS]

book_memory_job = dg.define_asset_job(
    "book_memory",
    selection=dg.AssetSelection.assets(*BOOK_ASSETS),
    partitions_def=book_partitions,
    description="A book's book-level assets: scenes, rosters, dialogue records, semantic layer (one run per book).",
)
character_memory_job = dg.define_asset_job(
    "character_memory",
    selection=dg.AssetSelection.assets(*CHARACTER_ASSETS),
    partitions_def=book_character_partitions,
    description="Per-character memory of a book (one run per book|character pair).",
)
kbf_items_job = dg.define_asset_job(
    "kbf_item_generation",
    selection=dg.AssetSelection.assets(evaluation_assets.kbf_items),
    partitions_def=book_character_partitions,
    description="KBF-QA items of one book|character pair, from its built memory.",
)
kbf_evaluation_job = dg.define_asset_job(
    "kbf_evaluation",
    selection=dg.AssetSelection.assets(evaluation_assets.kbf_report),
    partitions_def=book_partitions,
    description="Every KBF-QA method on a book's items under the configured model, with the report.",
)


def default_resources() -> dict[str, object]:
    """Resources configured from the environment (REVERIEMEM_LM, REVERIEMEM_EMBEDDER, REVERIEMEM_HOME)."""
    return {"lm": LanguageModel(), "embedder": EmbeddingModel(), "memory_io": MemoryIOManager()}


defs = dg.Definitions(
    assets=ALL_ASSETS,
    jobs=[book_memory_job, character_memory_job, whole_book_memory, kbf_items_job, kbf_evaluation_job],
    resources=default_resources(),
)
