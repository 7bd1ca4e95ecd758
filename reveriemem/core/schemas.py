"""Explicit Arrow schemas of every stored asset, in one place.

The four schemas that hold vectors (scenes, episodes, personality patterns,
facts) are built for the embedder's dimension: `facts_schema(dim)` and its
siblings, or `schema_for(asset, dim)`. `SCENES`, `EPISODES`,
`PERSONALITY_PATTERNS` and `FACTS` are those schemas at `DEFAULT_DIM`, the
dimension of the default embedder. A vector is a fixed-size list of float32.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import polars as pl
import pyarrow as pa

DEFAULT_DIM = 384  # all-MiniLM-L6-v2, the default embedder, and the `hash` embedder


def vector_type(dim: int) -> pa.DataType:
    """The Arrow type of one stored vector of `dim` dimensions."""
    if dim <= 0:
        raise ValueError(f"A vector dimension must be positive, not {dim}.")
    return pa.list_(pa.float32(), dim)


def _with_vector(fields: list[tuple[str, pa.DataType]]) -> Callable[[int], pa.Schema]:
    """A schema builder: `fields` followed by a `vector` column of the given dimension."""

    def build(dim: int = DEFAULT_DIM) -> pa.Schema:
        return pa.schema([*fields, ("vector", vector_type(dim))])

    return build


scenes_schema = _with_vector(
    [
        ("book", pa.string()),
        ("character", pa.string()),  # "" : scenes are book-level rows
        ("scene_id", pa.int32()),
        ("chapter", pa.int32()),
        ("chapter_title", pa.string()),
        ("start", pa.int64()),
        ("end", pa.int64()),
        ("first_paragraph", pa.int32()),
        ("last_paragraph", pa.int32()),
        ("words", pa.int32()),
        ("boundary", pa.string()),
        ("location", pa.string()),
        ("time", pa.string()),
        ("atmosphere", pa.string()),
        ("opening", pa.string()),
        ("method", pa.string()),
        ("setting_method", pa.string()),
    ]
)
SCENES = scenes_schema(DEFAULT_DIM)

UTTERANCES = pa.schema(
    [
        ("book", pa.string()),
        ("scene_id", pa.int32()),
        ("paragraph", pa.int32()),
        ("start", pa.int64()),
        ("end", pa.int64()),
        ("speaker", pa.string()),  # focus character slug or null
        ("speaker_label", pa.string()),
        ("addressees", pa.list_(pa.string())),
        ("text", pa.string()),
        ("method", pa.string()),
    ]
)

ROSTERS = pa.schema(
    [
        ("book", pa.string()),
        ("scene_id", pa.int32()),
        ("character", pa.string()),
        ("character_name", pa.string()),
        ("status", pa.string()),
        ("heuristic_status", pa.string()),
        ("model_status", pa.string()),
        ("utterances", pa.int32()),
        ("narration", pa.int32()),
        ("addressed", pa.int32()),
        ("actions", pa.int32()),
        ("mentions", pa.int32()),
        ("present_start", pa.int64()),  # the first presence span's start
        ("present_end", pa.int64()),  # the last presence span's end
        ("presence_spans", pa.list_(pa.list_(pa.int64()))),  # every [start, end) of presence, in story order
        ("first_offset", pa.int64()),
        ("scene_start", pa.int64()),
        ("scene_end", pa.int64()),
        ("method", pa.string()),
    ]
)

CHARACTER_SCENES = pa.schema(
    [
        ("book", pa.string()),
        ("character", pa.string()),
        ("scene_id", pa.int32()),
        ("status", pa.string()),
        ("scene_start", pa.int64()),
        ("scene_end", pa.int64()),
        ("present_start", pa.int64()),
        ("present_end", pa.int64()),
        ("location", pa.string()),
        ("time", pa.string()),
        ("atmosphere", pa.string()),
        ("utterances", pa.int32()),
        ("method", pa.string()),
    ]
)

episodes_schema = _with_vector(
    [
        ("book", pa.string()),
        ("character", pa.string()),
        ("scene_id", pa.int32()),
        ("status", pa.string()),  # the character's roster status: present_active or present_silent
        ("scene_start", pa.int64()),
        ("scene_end", pa.int64()),
        ("source_start", pa.int64()),  # the passage the episode was made from (the character's presence)
        ("source_end", pa.int64()),
        ("location", pa.string()),
        ("time", pa.string()),
        ("atmosphere", pa.string()),
        ("scene_understanding", pa.string()),
        ("my_actions", pa.string()),
        ("my_emotions", pa.string()),
        ("text", pa.string()),  # the fields joined: what is embedded and searched
        ("method", pa.string()),
        ("error", pa.string()),  # why the model's episode failed, else null
    ]
)
EPISODES = episodes_schema(DEFAULT_DIM)

DIALOGUE_RECORDS = pa.schema(
    [
        ("book", pa.string()),
        ("scene_id", pa.int32()),
        ("paragraph", pa.int32()),
        ("start", pa.int64()),  # the utterance's offsets in the book text
        ("end", pa.int64()),
        ("speaker", pa.string()),  # focus character slug
        ("speaker_name", pa.string()),  # its canonical name
        ("addressees", pa.list_(pa.string())),
        ("text", pa.string()),
        ("emotion", pa.string()),  # Plutchik's eight or neutral
        ("intensity", pa.int32()),  # 1..5
        ("trigger", pa.string()),
        ("intent", pa.string()),
        ("act", pa.string()),  # the utterance's form (question, command, ...), always deterministic
        ("method", pa.string()),
        ("error", pa.string()),  # why the model's annotation was not used, else null
    ]
)

EMOTION_TRANSITIONS = pa.schema(
    [
        ("book", pa.string()),
        ("character", pa.string()),
        ("character_name", pa.string()),
        ("step", pa.int32()),  # 1.. in story order
        ("scene_id", pa.int32()),
        ("paragraph", pa.int32()),
        ("start", pa.int64()),
        ("end", pa.int64()),
        ("from_emotion", pa.string()),  # null for the first utterance
        ("from_intensity", pa.int32()),
        ("to_emotion", pa.string()),
        ("to_intensity", pa.int32()),
        ("changed", pa.bool_()),
        ("same_scene", pa.bool_()),
        ("trigger", pa.string()),
        ("intent", pa.string()),
        ("act", pa.string()),
        ("text", pa.string()),
        ("method", pa.string()),
    ]
)

patterns_schema = _with_vector(  # the vector is the description's embedding
    [
        ("book", pa.string()),
        ("character", pa.string()),
        ("character_name", pa.string()),
        ("pattern_id", pa.int32()),  # 1.. by first appearance in the story
        ("description", pa.string()),
        ("excerpts", pa.list_(pa.string())),  # verbatim slices of the book text
        ("excerpt_starts", pa.list_(pa.int64())),  # their offsets
        ("scene_ids", pa.list_(pa.int32())),
        ("utterance_starts", pa.list_(pa.int64())),
        ("units", pa.int32()),  # behaviour units grouped in the pattern
        ("utterances", pa.int32()),
        ("dominant_emotion", pa.string()),
        ("mean_intensity", pa.float32()),
        ("dominant_act", pa.string()),
        ("origin", pa.string()),  # cluster | noise (a unit hdbscan left alone) | threshold (grouped without hdbscan)
        ("attached_noise", pa.int32()),  # noise units attached to this cluster
        ("clustering", pa.string()),
        ("method", pa.string()),  # what wrote the description
        ("error", pa.string()),
    ]
)
PERSONALITY_PATTERNS = patterns_schema(DEFAULT_DIM)

SCENE_GRAPHS = pa.schema(
    [
        ("book", pa.string()),
        ("scene_id", pa.int32()),
        ("passage", pa.int32()),
        ("start", pa.int64()),
        ("end", pa.int64()),
        ("method", pa.string()),  # model:<name>, failed:<name>, or heuristic (no model: no graph)
        ("error", pa.string()),
        ("entities", pa.int32()),
        ("relations", pa.int32()),
        ("accounts", pa.int32()),
        ("payload", pa.string()),  # JSON: entities, relations (located), accounts (located)
    ]
)

ENTITIES = pa.schema(
    [
        ("book", pa.string()),
        ("entity_id", pa.string()),  # "<type>:<slug>"; focus characters are "person:<character slug>"
        ("name", pa.string()),
        ("type", pa.string()),  # person | organisation | location | object | event | time | concept
        ("aliases", pa.list_(pa.string())),
        ("scene_ids", pa.list_(pa.int32())),
        ("character", pa.string()),  # focus character slug, or null
        ("method", pa.string()),
    ]
)

MEMBERSHIPS = pa.schema(
    [
        ("book", pa.string()),
        ("character", pa.string()),
        ("organisation", pa.string()),  # entity id
        ("organisation_name", pa.string()),
        ("scene_id", pa.int32()),
        ("offset", pa.int64()),
        ("member", pa.bool_()),  # False: the text says they left or were put out
        ("method", pa.string()),
    ]
)

GRANT = pa.struct([("character", pa.string()), ("route", pa.string()), ("scene_id", pa.int32()),
                   ("offset", pa.int64())])
STATEMENT = pa.struct([("scene_id", pa.int32()), ("start", pa.int64()), ("end", pa.int64()),
                       ("spoken", pa.bool_()), ("private", pa.bool_())])

facts_schema = _with_vector(
    [
        ("book", pa.string()),
        ("character", pa.string()),  # "" : facts are book-level rows; `visibility` bounds them
        ("fact_id", pa.string()),
        ("scene_id", pa.int32()),  # scene of the first statement
        ("subject", pa.string()),
        ("predicate", pa.string()),  # "" for an offline evidence unit (a source sentence)
        ("object", pa.string()),
        ("cause", pa.string()),
        ("subject_entity", pa.string()),
        ("object_entity", pa.string()),
        ("text", pa.string()),  # what is embedded and shown: "s p o (because c)" or the sentence
        ("evidence", pa.string()),
        ("source_start", pa.int64()),
        ("source_end", pa.int64()),
        ("statements", pa.list_(STATEMENT)),
        ("visibility", pa.list_(pa.string())),  # character slugs: V(f); filter with array_has_any
        ("routes", pa.list_(pa.string())),  # per visibility entry: its strongest route
        ("visible_from", pa.list_(pa.int64())),  # per visibility entry: the earliest source offset
        ("grants", pa.list_(GRANT)),
        ("organisations", pa.list_(pa.string())),
        ("common", pa.bool_()),
        ("method", pa.string()),
        ("error", pa.string()),
    ]
)
FACTS = facts_schema(DEFAULT_DIM)

KBF_ITEMS = pa.schema(
    [
        ("book", pa.string()),
        ("character", pa.string()),  # character slug
        ("item_id", pa.string()),
        ("split", pa.string()),  # KRf | KR
        ("part", pa.string()),  # train | held-out
        ("method", pa.string()),  # what made the item: heuristic:cloze-v1 or model:<name>
        ("fact_id", pa.string()),
        ("record", pa.string()),  # the item as one line of the documented JSONL format
    ]
)

READER_CALIBRATION = pa.schema(  # one row per train item read: the floors are chosen over the book's rows
    [
        ("book", pa.string()),
        ("character", pa.string()),  # character slug
        ("item_id", pa.string()),  # the generated train item read
        ("reader", pa.string()),  # the offline reader version that read it
        ("source", pa.string()),
        ("split", pa.string()),  # KRf or KR
        ("gold", pa.string()),
        ("best", pa.string()),  # the option the character's memory supports best
        ("support", pa.float64()),  # its support in the character's memory
        ("book_support", pa.float64()),  # the best support the whole book gives any option
        ("share", pa.float64()),  # the free-form reading's context share (0 when not on point)
        ("on_point", pa.bool_()),  # the free-form answer's fact states the item's fact or gold option
    ]
)

BY_ASSET: dict[str, tuple[str, pa.Schema]] = {
    "scene_graphs": ("parquet", SCENE_GRAPHS),
    "entities": ("parquet", ENTITIES),
    "memberships": ("parquet", MEMBERSHIPS),
    "facts": ("lancedb", FACTS),
    "scenes": ("lancedb", SCENES),
    "utterances": ("parquet", UTTERANCES),
    "scene_rosters": ("parquet", ROSTERS),
    "character_scenes": ("parquet", CHARACTER_SCENES),
    "episodes": ("lancedb", EPISODES),
    "dialogue_records": ("parquet", DIALOGUE_RECORDS),
    "emotion_transitions": ("parquet", EMOTION_TRANSITIONS),
    "personality_patterns": ("lancedb", PERSONALITY_PATTERNS),
    "kbf_items": ("parquet", KBF_ITEMS),
    "reader_calibration": ("parquet", READER_CALIBRATION),
}

VECTOR_SCHEMAS: dict[str, Callable[[int], pa.Schema]] = {
    "scenes": scenes_schema,
    "episodes": episodes_schema,
    "personality_patterns": patterns_schema,
    "facts": facts_schema,
}


def schema_for(asset: str, dim: int | None = None) -> pa.Schema:
    """The Arrow schema of `asset`, its vectors (if it holds any) of `dim` dimensions (None: `DEFAULT_DIM`)."""
    if asset in VECTOR_SCHEMAS:
        return VECTOR_SCHEMAS[asset](dim or DEFAULT_DIM)
    return BY_ASSET[asset][1]


def vector_dim(data: Any) -> int | None:
    """The dimension of the `vector` column of a schema, table, polars frame or rows; None when there is none.

    Rows without a fixed-size type give the length of their first vector (None when there are no rows).
    """
    if isinstance(data, list):
        first = next((row.get("vector") for row in data if row.get("vector") is not None), None)
        return len(first) if first is not None else None
    if isinstance(data, pl.DataFrame):
        if "vector" not in data.columns:
            return None
        dtype = data.schema["vector"]
        if isinstance(dtype, pl.Array):
            return int(dtype.size)
        first = next((v for v in data["vector"] if v is not None), None)
        return len(first) if first is not None else None
    schema = data if isinstance(data, pa.Schema) else getattr(data, "schema", None)
    if not isinstance(schema, pa.Schema) or "vector" not in schema.names:
        return None
    field_type = schema.field("vector").type
    if isinstance(field_type, pa.FixedSizeListType):
        return int(field_type.list_size)
    column = data.column("vector") if isinstance(data, pa.Table) else None
    first = next((v for v in column.to_pylist() if v is not None), None) if column is not None else None
    return len(first) if first is not None else None
