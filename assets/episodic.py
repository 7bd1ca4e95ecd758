"""The Episodic layer asset (paper: "Episodic summarisation").

`episodes` (book x character): one first-person memory per scene the character
is present for, made scene by scene from that scene alone and the character's
own earlier memories, embedded and stored in LanceDB for similarity search.
"""


import dagster as dg
import polars as pl

from assets.context import ASKS_MODEL, CODE_VERSION, ModelUsage, partition_of
from reveriemem.core.schemas import EPISODES, episodes_schema
from reveriemem.core.storage import frame
from reveriemem.source_to_memory.episodic import build_episodes
from reveriemem_dagster.partitions import book_character_partitions, book_of_pair
from reveriemem_dagster.resources import EmbeddingModel, LanguageModel

GROUP = "episodic"


@dg.asset(partitions_def=book_character_partitions, io_manager_key="memory_io", group_name=GROUP,
          code_version=CODE_VERSION, ins={"scenes": dg.AssetIn(partition_mapping=book_of_pair),
               "scene_rosters": dg.AssetIn(partition_mapping=book_of_pair),
               "utterances": dg.AssetIn(partition_mapping=book_of_pair)},
          metadata={"backend": "lancedb"}, kinds={"lancedb", "dspy"}, op_tags=ASKS_MODEL,
          check_specs=[dg.AssetCheckSpec(
              "episodes_match_presence", asset="episodes",
              description="One non-empty episode per scene the character is present for, none for any other scene.",
          )])
def episodes(context: dg.AssetExecutionContext, lm: LanguageModel, embedder: EmbeddingModel,
             scenes: pl.DataFrame, scene_rosters: pl.DataFrame, utterances: pl.DataFrame):
    """First-person scene memories of one character, embedded for search."""
    part = partition_of(context)
    book, slug = part.book, part.slug
    if part.outside_book(context):
        empty = frame([], EPISODES)
        yield dg.Output(empty, metadata={"in_book": False, "episodes": 0})
        yield episodes_presence_check(empty, scene_rosters, slug)
        return
    handle = lm.handle()
    usage = ModelUsage(handle)
    built = build_episodes(book, scenes, scene_rosters, utterances, slug, handle)
    for failure in built.failures:
        context.log.warning(f"Fell back to the extractive digest: {failure}")
    rows = [episode.row(book.slug, slug) for episode in built.episodes]
    if rows:
        vectors = embedder.embedder().embed([row["text"] for row in rows])
        for row, vector in zip(rows, vectors):
            row["vector"] = vector.tolist()
    table = frame(rows, episodes_schema(embedder.embedder().dim))
    methods = {str(k): int(v) for k, v in table.group_by("method").len().iter_rows()}
    failed = [e.scene_id for e in built.episodes if e.error is not None]
    metadata = {
        "in_book": True, "episodes": table.height, "methods": dg.MetadataValue.json(methods),
        "failed_scenes": len(failed), "failed_scene_ids": dg.MetadataValue.json(failed),
        "embedder": embedder.embedder().name if rows else "", **usage.metadata(),
    }
    yield dg.Output(table, metadata=metadata)
    yield episodes_presence_check(table, scene_rosters, slug)


def episodes_presence_check(table: pl.DataFrame, rosters: pl.DataFrame, slug: str) -> dg.AssetCheckResult:
    """Episodes cover exactly the scenes the character is present for, each once and none empty."""
    mine = rosters.filter(pl.col("character") == slug)
    present = set(mine.filter(pl.col("status").str.starts_with("present"))["scene_id"].to_list())
    ids = table["scene_id"].to_list()
    missing = sorted(present - set(ids))
    unexpected = sorted(set(ids) - present)  # absent, only referenced, or unknown scenes
    duplicates = len(ids) - len(set(ids))
    empty = table.filter(
        (pl.col("scene_understanding").str.strip_chars() == "") | (pl.col("text").str.strip_chars() == "")
    ).height
    passed = not missing and not unexpected and duplicates == 0 and empty == 0
    return dg.AssetCheckResult(
        check_name="episodes_match_presence", passed=passed,
        metadata={"present_scenes": len(present), "episodes": len(ids),
                  "missing_scenes": dg.MetadataValue.json(missing),
                  "unexpected_scenes": dg.MetadataValue.json(unexpected),
                  "duplicates": duplicates, "empty": empty},
    )
