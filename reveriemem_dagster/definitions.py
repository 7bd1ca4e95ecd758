"""The one `Definitions` of ReverieMem: the assets, the jobs and the resources from the environment.

Nothing in the project imports this module; Dagster loads it
(`workspace.yaml`, `dagster job execute -m reveriemem_dagster.definitions`).
A book's whole memory spans two partitions definitions, so it is two jobs:
`book_memory` for a book, then `character_memory` for each of its
(book|character) pairs; `reveriemem build` launches exactly these runs.
"""

from __future__ import annotations

import dagster as dg

from assets import BOOK_ASSETS, CHARACTER_ASSETS, EVALUATION_ASSETS, NARRATIVE_ASSETS, book_text
from assets import evaluation as evaluation_assets
from reveriemem_dagster.io_managers import MemoryIOManager
from reveriemem_dagster.partitions import book_character_partitions, book_partitions
from reveriemem_dagster.resources import EmbeddingModel, LanguageModel

ALL_ASSETS = [*BOOK_ASSETS, *CHARACTER_ASSETS, *EVALUATION_ASSETS, *NARRATIVE_ASSETS]

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
narrative_job = dg.define_asset_job(
    "narrative",
    selection=dg.AssetSelection.assets(*NARRATIVE_ASSETS),
    partitions_def=book_partitions,
    description="Task 2 on a book: scripts, every method's stories, pairwise judgements and the report.",
)


def default_resources() -> dict[str, object]:
    """Resources configured from the environment (REVERIEMEM_LM, REVERIEMEM_EMBEDDER, REVERIEMEM_HOME)."""
    return {"lm": LanguageModel(), "embedder": EmbeddingModel(), "memory_io": MemoryIOManager()}


defs = dg.Definitions(
    assets=[book_text, *ALL_ASSETS],
    jobs=[book_memory_job, character_memory_job, kbf_items_job, kbf_evaluation_job, narrative_job],
    resources=default_resources(),
)
