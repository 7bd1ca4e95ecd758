"""Knowledge-graph extraction as a DSPy program: entities, then relations over them.

One call per passage of a scene returns the entities first and then the
relations among them (the extract-then-relate order, in a single prompt so a
scene's text is sent once), plus any earlier account the passage has someone
read out or retell. Who could know each relation is not asked of the model:
`reveriemem.source_to_memory.visibility` works that out from the source text; the model only
reports what the text says about who took part, who saw it, and whether it
was announced to an organisation.
"""

from __future__ import annotations

from typing import Literal

import dspy
from pydantic import BaseModel, Field

EntityType = Literal["person", "organisation", "location", "object", "event", "time", "concept"]
ENTITY_TYPES: tuple[str, ...] = ("person", "organisation", "location", "object", "event", "time", "concept")
ENTITY_TYPE_NOTES = {
    "person": "a named or described individual, human or not, who can act or speak",
    "organisation": "a group people belong to: a guild, firm, council, army, church, crew, family as an institution",
    "location": "a place: a town, building, room, street, ship as a place, country",
    "object": "a physical thing that matters to the story: a book, key, letter, weapon, cask",
    "event": "something that happened or will happen: a storm, a meeting, a crime, a wedding",
    "time": "a date, day, season or period the story refers to",
    "concept": "anything else worth a node: a rule, a debt, a secret, an idea",
}


class SceneEntity(BaseModel):
    name: str = Field(description="the fullest name the passage gives")
    type: EntityType = Field(description="one of: " + "; ".join(f"{k}: {v}" for k, v in ENTITY_TYPE_NOTES.items()))
    aliases: list[str] = Field(default_factory=list, description="other names or titles the passage uses for it")
    affiliations: list[str] = Field(
        default_factory=list, description="for a person: organisations they belong to at this point of the story"
    )
    former_affiliations: list[str] = Field(
        default_factory=list, description="for a person: organisations they used to belong to and have left or been put out of"
    )


class SceneRelation(BaseModel):
    subject: str = Field(description="an entity name, as listed")
    predicate: str = Field(description="what the subject did or is, a short verb phrase")
    object: str = Field(description="an entity name or a short phrase completing the predicate")
    cause: str = Field(default="", description="why it happened, only when the text says so; otherwise empty")
    evidence: str = Field(description="a short verbatim quotation from the passage that states it")
    participants: list[str] = Field(
        default_factory=list,
        description="characters who lived it first-hand: did it, underwent it, or know it from their own experience",
    )
    witnesses: list[str] = Field(
        default_factory=list,
        description="characters the text says saw or heard the event itself, if they are not in this passage",
    )
    shared_with: list[str] = Field(
        default_factory=list,
        description="organisations whose members were all told it (a notice, an order, an announcement to members)",
    )
    common: bool = Field(default=False, description="true for world background that everyone in the story knows")
    private: bool = Field(
        default=False,
        description="true when nobody in the scene perceives it: a private thought, a memory, a narrator's aside",
    )


class ReportedAccount(BaseModel):
    source_opening: str = Field(description="verbatim first words of the earlier passage being read out or retold")
    source_closing: str = Field(default="", description="verbatim last words of that earlier passage, if known")
    evidence: str = Field(description="verbatim words of this passage where it is read out or retold")


class ExtractSceneGraph(dspy.Signature):
    """You build a knowledge graph of a novel, one passage at a time. First list the
    entities the passage names or clearly describes, each with one type. Then list
    the relations between them that the passage states, each as subject, predicate,
    object and, when the passage gives one, the cause; quote the words that state
    it. For each relation say who experienced it first-hand, who is said to have
    seen it happen from elsewhere, and whether it was announced to an
    organisation's members. Finally, if someone in the passage reads out or retells
    an earlier written or spoken account (a letter, a diary, a confession), quote
    where that account began. Use only what this passage says."""

    passage: str = dspy.InputField(desc="a passage of one scene of the novel")
    focus_characters: list[str] = dspy.InputField(desc="the main characters, each as 'Name (aliases)'; use these names")
    entities: list[SceneEntity] = dspy.OutputField(desc="the passage's entities")
    relations: list[SceneRelation] = dspy.OutputField(desc="facts the passage states, at most 25")
    accounts: list[ReportedAccount] = dspy.OutputField(desc="earlier accounts read out or retold here; usually none")


def scene_graph_program() -> dspy.Module:
    return dspy.Predict(ExtractSceneGraph)
