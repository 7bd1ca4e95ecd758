"""Scene preparation assets (paper: Source-to-Memory, "Scene preparation").

`scenes` (book): dramatic units with location, time and atmosphere, embedded
for search; `utterances` (book): quoted speech with attributed speakers;
`scene_rosters` (book): every focus character's status in every scene;
`character_scenes` (book x character): the scenes a character is part of.
"""


import dagster as dg
import polars as pl

from assets.context import ASKS_MODEL, CODE_VERSION, ModelUsage, book_text, partition_of
from reveriemem.core.schemas import CHARACTER_SCENES, ROSTERS, UTTERANCES, scenes_schema
from reveriemem.core.storage import frame
from reveriemem.core.text import normalise_space
from reveriemem.source_to_memory.preparation import judge_rosters, prepare_scenes, roster_rows
from reveriemem.source_to_memory.reading import BookReading
from reveriemem.source_to_memory.scenes import Span
from reveriemem_dagster.partitions import book_character_partitions, book_of_pair, book_partitions
from reveriemem_dagster.resources import EmbeddingModel, LanguageModel

GROUP = "scene_preparation"


def scenes_from_frame(reading: BookReading, frame: pl.DataFrame) -> list[Span]:
    """Rebuild scene spans (their prose paragraphs) from stored scene rows."""
    prose = {p for span in reading.candidates for p in span.paragraphs}
    spans = []
    for row in frame.sort("scene_id").iter_rows(named=True):
        paragraphs = [p for p in range(row["first_paragraph"], row["last_paragraph"] + 1) if p in prose]
        spans.append(Span(chapter=row["chapter"], chapter_title=row["chapter_title"], first=row["first_paragraph"],
                          last=row["last_paragraph"], boundary=row["boundary"], words=row["words"],
                          paragraphs=paragraphs))
    return spans


@dg.asset(partitions_def=book_partitions, io_manager_key="memory_io", group_name=GROUP, code_version=CODE_VERSION,
          deps=[book_text], metadata={"backend": "lancedb"}, kinds={"lancedb", "dspy"}, op_tags=ASKS_MODEL,
          check_specs=[dg.AssetCheckSpec("scenes_are_ordered", asset="scenes",
                                         description="Scenes exist, are ordered and do not overlap.")])
def scenes(context: dg.AssetExecutionContext, lm: LanguageModel, embedder: EmbeddingModel):
    """Scenes: candidate spans merged into dramatic units, with setting metadata."""
    part = partition_of(context)
    book, reading = part.book, part.reading
    handle = lm.handle()
    usage = ModelUsage(handle)
    prepared = prepare_scenes(reading, handle)
    for failure in prepared.failures:
        context.log.warning(f"Fell back to the heuristic: {failure}")
    openings = [
        " ".join(normalise_space(book.text[reading.paragraphs[s.first].start: reading.paragraphs[s.last].end]).split()[:200])
        for s in prepared.scenes
    ]
    vectors = embedder.embedder().embed(openings)
    rows = [
        {
            "book": book.slug, "character": "", "scene_id": i + 1, "chapter": s.chapter,
            "chapter_title": s.chapter_title, "start": reading.paragraphs[s.first].start,
            "end": reading.paragraphs[s.last].end, "first_paragraph": s.first, "last_paragraph": s.last,
            "words": s.words, "boundary": s.boundary, "location": setting.location, "time": setting.time,
            "atmosphere": setting.atmosphere, "opening": opening, "method": prepared.method,
            "setting_method": setting_method, "vector": vector.tolist(),
        }
        for i, (s, setting, setting_method, opening, vector) in enumerate(
            zip(prepared.scenes, prepared.settings, prepared.setting_methods, openings, vectors)
        )
    ]
    metadata = {
        "scenes": len(rows), "candidate_spans": len(reading.candidates), "method": prepared.method,
        "fallbacks": len(prepared.failures), "embedder": embedder.embedder().name, **usage.metadata(),
    }
    table = frame(rows, scenes_schema(embedder.embedder().dim))
    yield dg.Output(table, metadata=metadata)
    yield scenes_ordered_check(table)


@dg.asset(partitions_def=book_partitions, io_manager_key="memory_io", group_name=GROUP, code_version=CODE_VERSION,
          deps=[book_text], kinds={"parquet"})
def utterances(context: dg.AssetExecutionContext, scenes: pl.DataFrame) -> pl.DataFrame:
    """Quoted speech per paragraph with its attributed speaker (focus or not)."""
    part = partition_of(context)
    book, reading = part.book, part.reading
    spans = scenes_from_frame(reading, scenes)
    scene_of = {p: i + 1 for i, s in enumerate(spans) for p in s.paragraphs}
    rows = [
        {"book": book.slug, "scene_id": scene_of[u.paragraph], "paragraph": u.paragraph, "start": u.start,
         "end": u.end, "speaker": u.speaker, "speaker_label": u.speaker_label, "addressees": u.addressees,
         "text": u.text, "method": u.method}
        for u in reading.utterances(spans)
    ]
    table = frame(rows, UTTERANCES)
    attributed = table.filter(pl.col("speaker_label").is_not_null()).height
    context.add_output_metadata({"utterances": table.height, "attributed": attributed,
                                 "to_focus_characters": table.filter(pl.col("speaker").is_not_null()).height})
    return table


@dg.asset(partitions_def=book_partitions, io_manager_key="memory_io", group_name=GROUP, code_version=CODE_VERSION,
          deps=[book_text], kinds={"parquet", "dspy"}, op_tags=ASKS_MODEL,
          check_specs=[dg.AssetCheckSpec("rosters_are_complete", asset="scene_rosters",
                                         description="Every scene has one roster row per focus character.")])
def scene_rosters(context: dg.AssetExecutionContext, lm: LanguageModel, scenes: pl.DataFrame):
    """For every focus character and scene: present_active, present_silent, referenced or absent."""
    part = partition_of(context)
    book, reading = part.book, part.reading
    spans = scenes_from_frame(reading, scenes)
    evidence = reading.roster_evidence(spans)
    handle = lm.handle()
    usage = ModelUsage(handle)
    judged, method, failures = judge_rosters(reading, spans, evidence, handle)
    for failure in failures:
        context.log.warning(f"Fell back to the heuristic: {failure}")
    rows = roster_rows(reading, spans, evidence, judged, method)
    table = frame(rows, ROSTERS)
    counts = dict(table.group_by("status").len().iter_rows())
    metadata = {"method": method, "fallbacks": len(failures),
                **{f"status_{k}": int(v) for k, v in counts.items()}, **usage.metadata()}
    yield dg.Output(table, metadata=metadata)
    yield rosters_complete_check(table, len(book.characters))


@dg.asset(partitions_def=book_character_partitions, io_manager_key="memory_io", group_name=GROUP,
          code_version=CODE_VERSION, ins={"scene_rosters": dg.AssetIn(partition_mapping=book_of_pair),
               "scenes": dg.AssetIn(partition_mapping=book_of_pair)}, kinds={"parquet"})
def character_scenes(context: dg.AssetExecutionContext, scene_rosters: pl.DataFrame,
                     scenes: pl.DataFrame) -> pl.DataFrame:
    """The scenes a character is present in or referenced by, with presence offsets."""
    part = partition_of(context)
    if part.outside_book(context):
        context.add_output_metadata({"in_book": False})
        return frame([], CHARACTER_SCENES)
    mine = scene_rosters.filter((pl.col("character") == part.slug) & (pl.col("status") != "absent"))
    joined = mine.join(scenes.select("scene_id", "location", "time", "atmosphere"), on="scene_id", how="left")
    table = frame(joined.select(CHARACTER_SCENES.names).to_dicts(), CHARACTER_SCENES)
    context.add_output_metadata({
        "in_book": True,
        "present_scenes": table.filter(pl.col("status").str.starts_with("present")).height,
        "referenced_scenes": table.filter(pl.col("status") == "referenced").height,
    })
    return table


def scenes_ordered_check(table: pl.DataFrame) -> dg.AssetCheckResult:
    """Scenes exist, are ordered and do not overlap."""
    ordered = table.sort("scene_id")
    starts, ends = ordered["start"].to_list(), ordered["end"].to_list()
    overlaps = sum(1 for i in range(1, len(starts)) if starts[i] < ends[i - 1])
    return dg.AssetCheckResult(check_name="scenes_are_ordered", passed=table.height > 0 and overlaps == 0,
                               metadata={"scenes": table.height, "overlaps": overlaps})


def rosters_complete_check(table: pl.DataFrame, characters: int) -> dg.AssetCheckResult:
    """Every scene has exactly one roster row per focus character."""
    per_scene = table.group_by("scene_id").len()["len"].unique().to_list()
    complete = table.height > 0 and per_scene == [characters]
    return dg.AssetCheckResult(check_name="rosters_are_complete", passed=complete,
                               metadata={"rows": table.height, "characters": characters})
