"""Personality layer assets (paper: "Personality clustering").

`dialogue_records` (book): every focus character's utterance with its
(emotion, intensity, trigger) and intent; `emotion_transitions` (book x
character): a character's records in story order as state transitions;
`personality_patterns` (book x character): behavioural patterns with a
description (embedded for search) and verbatim excerpts.
"""


import dagster as dg
import polars as pl

from assets.context import ASKS_MODEL, CODE_VERSION, ModelUsage, partition_of
from reveriemem.core import progress
from reveriemem.core.registry import Book
from reveriemem.core.schemas import DIALOGUE_RECORDS, EMOTION_TRANSITIONS, PERSONALITY_PATTERNS, patterns_schema
from reveriemem.core.storage import frame
from reveriemem.source_to_memory.dialogue_records import Line, annotate_lines
from reveriemem.source_to_memory.dialogue_records import emotion_transitions as transition_record
from reveriemem.source_to_memory.patterns import build_patterns, pattern_rows
from reveriemem_dagster.partitions import book_character_partitions, book_of_pair, book_partitions
from reveriemem_dagster.resources import EmbeddingModel, LanguageModel

GROUP = "personality"


@dg.asset(partitions_def=book_partitions, io_manager_key="memory_io", group_name=GROUP, code_version=CODE_VERSION,
          kinds={"parquet", "dspy"}, op_tags=ASKS_MODEL,
          check_specs=[dg.AssetCheckSpec("dialogue_is_annotated", asset="dialogue_records",
                                         description="Every utterance of a focus character has an annotation.")])
def dialogue_records(context: dg.AssetExecutionContext, lm: LanguageModel, utterances: pl.DataFrame,
                     scenes: pl.DataFrame):
    """Focus characters' utterances, each with emotion, intensity (1-5), trigger, intent and act."""
    part = partition_of(context)
    book, reading = part.book, part.reading
    names = {c.slug: c.name for c in book.characters}
    lines = [Line.from_row(row) for row in utterances.iter_rows(named=True)]
    first_paragraph = {int(r["scene_id"]): int(r["first_paragraph"]) for r in scenes.iter_rows(named=True)}
    handle = lm.handle()
    usage = ModelUsage(handle)
    step = "dialogue_records"
    progress.step_started(book.slug, step, len(first_paragraph))
    annotated = annotate_lines(book.text, reading.paragraphs, lines, first_paragraph, names, handle,
                               on_scene=lambda scene_id: progress.unit_done(book.slug, step))
    for failure in annotated.failures:
        context.log.warning(f"Fell back to the lexicon annotator: {failure}")
    rows = [
        {"book": book.slug, "scene_id": line.scene_id, "paragraph": line.paragraph, "start": line.start,
         "end": line.end, "speaker": line.speaker, "speaker_name": names[line.speaker or ""],
         "addressees": line.addressees, "text": line.text, "emotion": a.emotion, "intensity": a.intensity,
         "trigger": a.trigger, "intent": a.intent, "act": a.act, "method": a.method, "error": a.error or None}
        for line, a in zip(annotated.lines, annotated.annotations)
    ]
    table = frame(rows, DIALOGUE_RECORDS)
    expected = utterances.filter(pl.col("speaker").is_in(list(names))).height
    counts = dict(table.group_by("emotion").len().iter_rows()) if table.height else {}
    metadata = {
        "records": table.height, "method": annotated.method, "fallbacks": len(annotated.failures), "failed_scenes": len(annotated.failures),
        "scenes_with_dialogue": annotated.scenes_annotated,
        **{f"emotion_{k}": int(v) for k, v in counts.items()}, **usage.metadata(),
    }
    yield dg.Output(table, metadata=metadata)
    yield annotated_check(table, expected)


@dg.asset(partitions_def=book_character_partitions, io_manager_key="memory_io", group_name=GROUP,
          code_version=CODE_VERSION, ins={"dialogue_records": dg.AssetIn(partition_mapping=book_of_pair)},
          kinds={"parquet"})
def emotion_transitions(context: dg.AssetExecutionContext, dialogue_records: pl.DataFrame) -> pl.DataFrame:
    """A character's emotional states in story order, each with the previous state, trigger and intent."""
    part = partition_of(context)
    if part.outside_book(context):
        context.add_output_metadata({"in_book": False})
        return frame([], EMOTION_TRANSITIONS)
    mine = dialogue_records.filter(pl.col("speaker") == part.slug).to_dicts()
    table = frame(transition_record(mine), EMOTION_TRANSITIONS)
    context.add_output_metadata({
        "in_book": True, "transitions": table.height,
        "emotion_changes": table.filter(pl.col("changed") & pl.col("from_emotion").is_not_null()).height,
        "scenes": table["scene_id"].n_unique() if table.height else 0,
    })
    return table


@dg.asset(partitions_def=book_character_partitions, io_manager_key="memory_io", group_name=GROUP,
          code_version=CODE_VERSION, metadata={"backend": "lancedb"}, kinds={"lancedb", "dspy"}, op_tags=ASKS_MODEL,
          ins={"dialogue_records": dg.AssetIn(partition_mapping=book_of_pair)},
          check_specs=[
              dg.AssetCheckSpec("excerpts_are_verbatim", asset="personality_patterns",
                                description="Every excerpt is a verbatim slice of the book spoken by the character."),
              dg.AssetCheckSpec("speakers_have_patterns", asset="personality_patterns",
                                description="A character with dialogue has at least one pattern."),
          ])
def personality_patterns(context: dg.AssetExecutionContext, lm: LanguageModel, embedder: EmbeddingModel,
                         dialogue_records: pl.DataFrame):
    """Behavioural patterns of a character: hdbscan clusters of their behaviour units, described and embedded."""
    part = partition_of(context)
    book = part.book
    if part.outside_book(context):
        table = frame([], PERSONALITY_PATTERNS)
        yield dg.Output(table, metadata={"in_book": False})
        yield from patterns_checks(table, book, frame([], DIALOGUE_RECORDS))
        return
    character, reading = part.character, part.reading
    mine = dialogue_records.filter(pl.col("speaker") == character.slug)
    handle = lm.handle()
    usage = ModelUsage(handle)
    step = f"personality_patterns[{character.slug}]"
    result = build_patterns(
        book.text, reading.paragraphs, mine.to_dicts(), character.name, {c.slug: c.name for c in book.characters},
        embedder.embedder(), handle, gender=character.gender,
        on_start=lambda total: progress.step_started(book.slug, step, total),
        on_pattern=lambda number: progress.unit_done(book.slug, step),
    )
    for failure in result.failures:
        context.log.warning(f"Fell back to the template description: {failure}")
    table = frame(pattern_rows(book.slug, character.slug, character.name, result),
                  patterns_schema(embedder.embedder().dim))
    origins = dict(table.group_by("origin").len().iter_rows()) if table.height else {}
    metadata = {
        "in_book": True, "patterns": table.height, "utterances": mine.height, "units": len(result.units),
        "clustering": result.clustering, "fallbacks": len(result.failures), "failed_scenes": len(result.failures), "embedder": embedder.embedder().name,
        **{f"origin_{k}": int(v) for k, v in origins.items()}, **usage.metadata(),
    }
    yield dg.Output(table, metadata=metadata)
    yield from patterns_checks(table, book, mine)


def annotated_check(table: pl.DataFrame, expected: int) -> dg.AssetCheckResult:
    """One record per focus-speaker utterance, each with an emotion, an intensity in 1..5 and a method."""
    complete = table.filter(pl.col("emotion").is_not_null() & pl.col("intensity").is_between(1, 5)
                            & pl.col("method").is_not_null()).height
    return dg.AssetCheckResult(check_name="dialogue_is_annotated", passed=table.height == expected == complete,
                               metadata={"records": table.height, "focus_utterances": expected, "annotated": complete})


def patterns_checks(table: pl.DataFrame, book: Book, records: pl.DataFrame):
    spans = sorted((int(r["start"]), int(r["end"])) for r in records.iter_rows(named=True))
    bad: list[str] = []
    excerpts = 0
    for row in table.iter_rows(named=True):
        for text, start in zip(row["excerpts"], row["excerpt_starts"]):
            excerpts += 1
            inside = any(a <= start and start + len(text) <= b for a, b in spans)
            if book.text[start:start + len(text)] != text or not inside:
                bad.append(f"pattern {row['pattern_id']}: {text[:40]!r}")
    yield dg.AssetCheckResult(check_name="excerpts_are_verbatim", passed=not bad,
                              metadata={"excerpts": excerpts, "not_verbatim": len(bad), "examples": bad[:5]})
    yield dg.AssetCheckResult(check_name="speakers_have_patterns", passed=records.height == 0 or table.height > 0,
                              metadata={"utterances": records.height, "patterns": table.height})
