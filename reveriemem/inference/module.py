"""`ReverieInference`: the one character agent (paper: "Inference Pipeline", Algorithm 1).

One `dspy.Module` is what users talk to (`reveriemem ask`, `chat`, `reveriemem.ask`), what
KBF-QA measures (the `reveriemem` method and its ablations) and what `reveriemem compile`
optimises and saves; a saved JSON loads back into it (`reveriemem.inference.compiled`).

Its predictors are attributes: `self_probe` (Self-Probe, with the Sufficient verdict from round
2), `select_pattern` (Pattern) and `memory_fusion` (Memory-Fusion), from `dspy_programs.inference`.
Its tools are handed in, as `dspy.ReAct` takes tools, and shared by every copy DSPy makes of it
(`Tools`): `memory`, a callable from a character's name to that character and its bounded reader
(Anchor, Vis-Retrieve, patterns, emotion record: `reveriemem.inference.memory_reader`), the model
handle, and the deterministic emotion track (`gate`, `transition`:
`reveriemem.inference.emotion_track`).

`forward(question, character, history, as_of, state)` runs, for one turn:

- the reasoning chain (`reveriemem.inference.reasoning_chain`), in the calling thread: Anchor
  recalls the character's own scene notes, then Self-Probe rounds each issue one probe to
  Vis-Retrieve, until Self-Probe says Sufficient (from round 2), `max_rounds` is reached, or no new
  probe is left;
- the personality track (`reveriemem.inference.personality_track`), beside it in a worker thread
  that inherits the caller's context (DSPy's settings and trace included): Emo-Gate, then only when
  it fires Emo-Transition and Pattern. A first turn holds the pattern of the personality layer
  closest to the recorded state and the turn, chosen without a call; Pattern is asked of the model
  only when the gate fires. A turn thus makes one Self-Probe call per round and Memory-Fusion:
  3 calls for an exit at round 2 with a quiet gate, 4 when it fires;
- **Memory-Fusion**, which writes the reply from the scene notes, the pool and the pattern.

It returns a `dspy.Prediction` with `reply`, `state` (to carry to the next turn) and `trace`
(`reveriemem.inference.trace.Trace`: anchored scenes, probes per round, exit round, facts with
routes and offsets, pattern, emotion, and per step its calls, tokens and latency). `respond` is
the same call for a conversation: it carries the state from turn to turn and returns a `Turn`.

Without a model (`handle.lm is None`) the offline reasoner decides (`reveriemem.inference.offline`):
the chain probes with the question and, when it carries options, with the question read with each
option; the reasoner reads the bounded pool and the scene notes and picks an option, quotes a fact,
or refuses below the floors calibrated with the build. Every step but Memory-Fusion degrades rather
than fails when the model's output never parses and the trace lists each fallback in `degraded`;
Memory-Fusion raises `ModelOutputError`. Ablations (`layers`) remove a memory layer from this same
module. A call answered from the persistent model cache never runs its predictor, so DSPy does not
trace it: compile with a handle whose `cache` is off.
"""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import dspy

from reveriemem.core.characters import Character
from reveriemem.core.embeddings import Embedder
from reveriemem.core.errors import ModelOutputError, ReverieMemError
from reveriemem.core.registry import Book
from reveriemem.inference.calibration import DEFAULT_CALIBRATION, ReaderCalibration, load_calibration
from reveriemem.inference.compiled import PREDICTORS, demos_of, load_compiled, load_default
from reveriemem.inference.emotion_track import AgentState, emotion_gate, emotion_transition
from reveriemem.inference.memory_reader import MemoryReader, Reader, score_of, similarity_of
from reveriemem.inference.offline import EXTRACTIVE_METHOD, OfflineReasoner, load_rarity
from reveriemem.inference.offline_reader import NEIGHBOUR_GAP, Rarity
from reveriemem.inference.options import Question, parse_options
from reveriemem.inference.personality_track import Personality, PersonalityTrack
from reveriemem.inference.reasoning_chain import Reasoning, ReasoningChain, route_of
from reveriemem.inference.trace import RecalledFact, Trace, Turn, TurnLog, listen_for_step_usage
from reveriemem.inference.turn_text import history_line, numbered_facts
from reveriemem.models import ModelHandle, run_program

ANCHOR_K = 3  # scenes recalled as the frame
PATTERN_K = 3  # candidate patterns offered to the Pattern step
HISTORY_LINES = 8  # conversation lines shown to the model
LAYERS = frozenset({"episodic", "semantic", "personality"})  # the three memory layers; ablations drop one

Memory = Callable[[str | None], tuple[Character, Reader]]  # a character's name (None: the default) -> it and its reader


def one_character(reader: Reader, character: Character) -> Memory:
    """The memory tool of an agent that speaks as `character` only (named by name, slug or alias, or None)."""
    names = {n.casefold() for n in (character.name, character.slug, *character.aliases)}

    def memory(name: str | None) -> tuple[Character, Reader]:
        if name is not None and name.strip().casefold() not in names:
            raise ReverieMemError(f"This agent speaks as {character.name} only, not as {name!r}.")
        return character, reader

    return memory


class BookMemory:
    """The memory tool of a module that answers as any focus character of `book`: one reader each, opened once."""

    def __init__(self, book: Book, embedder: Embedder, uri: str | None = None) -> None:
        self.book, self.embedder, self.uri = book, embedder, uri
        self._readers: dict[str, MemoryReader] = {}
        self._lock = threading.Lock()

    def __call__(self, name: str | None) -> tuple[Character, Reader]:
        if name is None:
            raise ReverieMemError("Name the character: this agent answers as any focus character of the book.")
        character = self.book.character(name)
        with self._lock:
            if character.slug not in self._readers:
                self._readers[character.slug] = MemoryReader(self.book.slug, character.slug, self.embedder, self.uri)
            return character, self._readers[character.slug]


@dataclass(eq=False)
class Tools:
    """What every copy of a `ReverieInference` shares: DSPy copies the predictors, never these."""

    memory: Memory
    handle: ModelHandle
    gate: Callable[..., Any] = emotion_gate
    transition: Callable[..., Any] = emotion_transition
    rarity: Rarity | None = None  # the offline reasoner's term rarity (None: read from the reader's store)
    calibration: ReaderCalibration | None = None  # its floors (None: read from the reader's store)
    reader_lock: threading.Lock = field(default_factory=threading.Lock)  # the two tracks share a reader
    reasoners: dict[str, OfflineReasoner] = field(default_factory=dict)  # per character slug, read once

    def __deepcopy__(self, memo: dict[int, Any]) -> Tools:
        return self  # readers, model handle and caches are shared by every copy of the module


def option_probes(asked: Question) -> list[str]:
    """The offline chain's look-ups besides the question: the question read with each of its options."""
    return [f"{asked.text} {text}" for text in asked.answers.values()]


class ReverieInference(dspy.Module):
    """A book's characters answering from their own bounded memories (see the module docstring).

    `memory` is the retrieval tool (`Memory`); or a reader, with `character`, for an agent that
    speaks as that one character. `compiled` is the compiled state to load: True (the default)
    loads `reveriemem.inference.compiled.compiled_path()`, a path loads that file, False loads none.
    `emotion_model=True` asks the model for Emo-Gate and Emo-Transition (the `EmoGate` and
    `EmoTransition` prompts) instead of the deterministic track. `inline_personality=True` runs the
    personality track in the calling thread, one step after another.
    """

    def __init__(self, memory: Memory | Reader, handle: ModelHandle, character: Character | None = None,
                 max_rounds: int = 3, k: int = 8, *, anchor_k: int = ANCHOR_K, pattern_k: int = PATTERN_K,
                 backoff: float = 0.5, emotion_model: bool = False, layers: Iterable[str] = LAYERS,
                 compiled: bool | str | Path = True, inline_personality: bool = False,
                 rarity: Rarity | None = None, calibration: ReaderCalibration | None = None,
                 gate: Callable[..., Any] = emotion_gate, transition: Callable[..., Any] = emotion_transition) -> None:
        super().__init__()
        layers = frozenset(layers)
        if not layers <= LAYERS:
            raise ValueError(f"Unknown memory layer(s): {', '.join(sorted(layers - LAYERS))}.")
        if max_rounds < 1:
            raise ValueError("max_rounds must be at least 1.")
        if k < 1:
            raise ValueError("k must be at least 1.")
        if character is not None:
            memory = one_character(memory, character)  # type: ignore[arg-type]
        elif not callable(memory):
            raise ValueError("A reader needs the character it reads for: pass character=.")
        self.self_probe = PREDICTORS["self_probe"]()
        self.select_pattern = PREDICTORS["select_pattern"]()
        self.memory_fusion = PREDICTORS["memory_fusion"]()
        self.tools = Tools(memory, handle, gate, transition, rarity, calibration)  # type: ignore[arg-type]
        self.layers = layers
        self.max_rounds, self.k, self.anchor_k, self.pattern_k = max_rounds, k, anchor_k, pattern_k
        self.backoff = backoff
        self.emotion_model = emotion_model
        self.inline_personality = inline_personality
        self.state: AgentState | None = None  # the conversation's state, carried by `respond`
        self.compiled: Path | None = None  # the file the predictors' state was loaded from
        if compiled is True:
            self.compiled = load_default(self)
        elif compiled:
            self.compiled = load_compiled(self, compiled)
        listen_for_step_usage()

    # -- what the trace names ----------------------------------------------------------

    @property
    def handle(self) -> ModelHandle:
        return self.tools.handle

    @property
    def character(self) -> Character:
        """The character this agent speaks as by default."""
        return self.tools.memory(None)[0]

    @property
    def reader(self) -> Reader:
        """The default character's bounded reader."""
        return self.tools.memory(None)[1]

    @property
    def demos(self) -> dict[str, int]:
        return demos_of(self)

    @property
    def label(self) -> str | None:
        """The compiled file's name, "unsaved" for demos not loaded from a file, else None."""
        if self.compiled is not None:
            return self.compiled.name
        return "unsaved" if any(self.demos.values()) else None

    @property
    def method(self) -> str:
        if self.handle.lm is None:
            return EXTRACTIVE_METHOD
        label = self.label
        return f"model:{self.handle.name}" + (f"+compiled:{label}" if label else "")

    @property
    def compiled_file(self) -> str | None:
        """The compiled program file the model steps use (None: none, or no model)."""
        return str(self.compiled) if self.compiled is not None and self.handle.lm is not None else None

    def offline_reasoner(self, character: str | None = None) -> OfflineReasoner:
        """The offline reasoner of a character: rarity and floors from its reader's store when it has one
        (read once), else the pool's own rarity and the default floors."""
        who, reader = self.tools.memory(character)
        tools = self.tools
        if who.slug not in tools.reasoners:
            rarity, calibration = tools.rarity, tools.calibration
            book, uri = getattr(reader, "book", None), getattr(reader, "uri", None)
            if (rarity is None or calibration is None) and isinstance(book, str) and isinstance(uri, str):
                from reveriemem.core.storage import MemoryStore

                store = MemoryStore.for_home(lancedb=uri)
                rarity = rarity or load_rarity(book, store)
                calibration = calibration or load_calibration(book, who.slug, store)
            tools.reasoners[who.slug] = OfflineReasoner(rarity, calibration or DEFAULT_CALIBRATION, who.surface_forms)
        return tools.reasoners[who.slug]

    # -- one turn ---------------------------------------------------------------------------

    def forward(self, question: str, character: str | None = None, history: Sequence[str | tuple[str, str]] = (),
                as_of: int | None = None, state: AgentState | None = None, probes: Sequence[str] = ()) -> dspy.Prediction:
        """Answer `question` as `character` (None: the default one); `history` is the conversation so far,
        as lines or (speaker, text) pairs; `as_of` bounds memory to a point of the story; `state` is the
        previous turn's (None: a fresh conversation, from the character's latest recorded emotion).
        `probes` are further look-ups for the offline chain (no model), one round each after the question
        and the question read with each of its options; with a model Self-Probe writes the probes."""
        question = " ".join(question.split())
        if not question:
            raise ValueError("The question is empty: ask the character something.")
        who, reader = self.tools.memory(character)
        lines = [history_line(item) for item in history][-HISTORY_LINES:]
        run = TurnLog()
        chain, track = self._tracks(who, reader)
        offline: dict[str, Any] | None = None
        if self.handle.lm is None:
            asked = parse_options(question)
            reasoning = chain.recall_offline(run, asked.text or question, as_of, [*option_probes(asked), *probes])
            personality = track.decide(run, question, lines, state, as_of)
            following = self._following(reader, reasoning.pool, as_of)
            decision = self.offline_reasoner(who.slug).decide(asked, reasoning.pool, reasoning.anchored, following,
                                                              as_of)
            reply, used, offline = decision.reply, decision.used, decision.detail
            # a line quoted from those told just after a pool fact is one the reply rests on: the trace lists it
            # (round 0: read with a recalled fact, not retrieved by any probe)
            held = {str(r["fact_id"]) for r in reasoning.pool}
            told_after = {str(r["fact_id"]): r for rows in following.values() for r in rows}
            reasoning.pool += [dict(told_after[f], probe="told just after a recalled fact", round=0) for f in used
                               if f not in held and f in told_after]
            reasoning.stop_reason = decision.stop
        elif self.inline_personality:
            reasoning = chain.recall(run, question, as_of)
            personality = track.decide(run, question, lines, state, as_of)
            reply, used = self._fuse(run, who, question, lines, reasoning, personality.state)
        else:
            # the worker runs in a copy of this context: DSPy's settings (its trace) reach it
            context = contextvars.copy_context()
            with ThreadPoolExecutor(max_workers=1, thread_name_prefix="reverie-personality") as pool:
                decided = pool.submit(context.run, track.decide, run, question, lines, state, as_of)
                reasoning = chain.recall(run, question, as_of)
                personality = decided.result()
            reply, used = self._fuse(run, who, question, lines, reasoning, personality.state)
        trace = self._trace(run, who, as_of, reasoning, personality, used)
        trace.offline = offline
        return dspy.Prediction(reply=reply, state=personality.state, trace=trace)

    def prepare_offline(self, questions: Iterable[str]) -> int:
        """Embed ahead, in one batch, what the offline chain looks up for each of `questions` (the question
        and the question read with each of its options), when the embedder keeps query vectors (`prime`).
        A build's reader calibration asks a few hundred questions: encoding their look-ups in one batch
        costs a fraction of encoding them one turn at a time. Returns how many texts were encoded."""
        texts: list[str] = []
        for question in questions:
            asked = parse_options(" ".join(question.split()))
            texts += [asked.text or question, *option_probes(asked)]
        prime = getattr(getattr(self.reader, "embedder", None), "prime", None)
        return int(prime([" ".join(t.split()) for t in texts])) if callable(prime) else 0

    def respond(self, question: str, history: Sequence[str | tuple[str, str]] = (), state: AgentState | None = None,
                as_of: int | None = None, probes: Sequence[str] = (), character: str | None = None) -> Turn:
        """One turn of a conversation: `forward`, continuing from `state` or else from this agent's own
        previous turn (`self.state`; None on a first turn), which it then keeps."""
        start = state if state is not None else self.state
        pred = self(question=question, character=character, history=list(history), as_of=as_of, state=start,
                    probes=list(probes))
        self.state = pred.state
        return Turn(question=" ".join(question.split()), reply=pred.reply, state=pred.state, trace=pred.trace)

    def _following(self, reader: Reader, pool: Sequence[dict[str, Any]], as_of: int | None) -> dict[str, Any]:
        """The facts the character knows that the book tells close after each pool fact (`MemoryReader.follow`),
        by fact id; a reader that cannot say gives none."""
        follow = getattr(reader, "follow", None)
        if follow is None or not pool:
            return {}
        with self.tools.reader_lock:
            return dict(follow(pool, NEIGHBOUR_GAP, as_of))

    def _who(self, character: Character) -> str:
        others = [a for a in character.aliases if a != character.name]
        return character.name + (f" (also called {', '.join(others)})" if others else "")

    def _tracks(self, character: Character, reader: Reader) -> tuple[ReasoningChain, PersonalityTrack]:
        lock, who = self.tools.reader_lock, self._who(character)
        chain = ReasoningChain(reader, lock, character, who, self.handle, self.self_probe, self.layers,
                               self.max_rounds, self.k, self.anchor_k, self.backoff)
        track = PersonalityTrack(reader, lock, character, who, self.handle, self.select_pattern, self.layers,
                                 self.pattern_k, self.backoff, self.emotion_model, self.tools.gate,
                                 self.tools.transition)
        return chain, track

    # -- memory fusion -----------------------------------------------------------

    def _fuse(self, run: TurnLog, character: Character, question: str, lines: list[str], reasoning: Reasoning,
              state: AgentState) -> tuple[str, list[str]]:
        pattern = state.pattern
        inputs: dict[str, Any] = {
            "character": self._who(character), "question": question, "history": lines,
            "scene_memory": reasoning.scene_memory, "facts": numbered_facts(reasoning.pool),
            "pattern": pattern.description if pattern else "", "pattern_excerpts": list(pattern.excerpts) if pattern else [],
            "emotion_state": state.describe(),
        }
        with run.step("memory_fusion", "fusion", f"model:{self.handle.name}") as step:
            # run_program retries unparseable output and then raises ModelOutputError;
            # an empty reply gets one more try, sampled afresh and past the caches
            pred = run_program(self.handle, self.memory_fusion, backoff=self.backoff, **inputs)
            reply = " ".join(str(pred.reply or "").split())
            if not reply:
                step.degraded = "the model wrote an empty reply; asked again"
                pred = run_program(_fresh(self.handle), self.memory_fusion, backoff=self.backoff, **inputs)
                reply = " ".join(str(pred.reply or "").split())
            if not reply:
                raise ModelOutputError(f"The model {self.handle.name} wrote an empty reply as MemoryFusion twice.")
        numbers = {int(x) for x in (pred.used_facts or []) if isinstance(x, int) or str(x).isdigit()}
        used = [str(reasoning.pool[i - 1]["fact_id"]) for i in sorted(numbers) if 1 <= i <= len(reasoning.pool)]
        return reply, used

    # -- the trace -----------------------------------------------------------------

    def _trace(self, run: TurnLog, character: Character, as_of: int | None, reasoning: Reasoning,
               personality: Personality, used: list[str]) -> Trace:
        state = personality.state
        facts = [RecalledFact(
            fact_id=str(r["fact_id"]), text=str(r.get("text") or ""), visibility=list(r.get("visibility") or []),
            routes=list(r.get("routes") or []), evidence=str(r.get("evidence") or ""),
            route=r.get("route") or route_of(r, character.slug), source_start=r.get("source_start"),
            source_end=r.get("source_end"), known_from=r.get("known_from"), scene_id=r.get("scene_id"),
            score=score_of(r), similarity=similarity_of(r), probe=r.get("probe"), round=int(r.get("round", 1)),
        ) for r in reasoning.pool]
        return Trace(
            character=character.slug, character_name=character.name, method=self.method,
            model=self.handle.name, as_of=as_of, anchored=reasoning.anchored, rounds=reasoning.rounds, facts=facts,
            used_facts=used, exit_round=reasoning.exit_round, stop_reason=reasoning.stop_reason,
            gate=personality.gate, gate_reason=personality.gate_reason,
            emotion={"emotion": state.emotion, "intensity": state.intensity, "reason": state.reason,
                     "changed": personality.changed, "source": personality.emotion_source,
                     "method": personality.emotion_method, "record_steps": personality.record_steps},
            pattern=asdict(state.pattern) if state.pattern else None, pattern_source=personality.pattern_source,
            pattern_candidates=personality.candidates,
            steps=sorted(run.steps, key=lambda s: s.started_s), degraded=list(run.degraded),
            dropped_rows=reasoning.dropped, seconds=time.perf_counter() - run.t0, compiled=self.compiled_file,
        )


def _fresh(handle: ModelHandle) -> ModelHandle:
    """The same model, sampled afresh: no persistent or DSPy cache, a small temperature if it had none."""
    lm = handle.lm
    if lm is None:
        return handle
    changes: dict[str, Any] = {"cache": False}
    if not lm.kwargs.get("temperature"):
        changes["temperature"] = 0.7
    return replace(handle, lm=lm.copy(**changes), cache=False)
