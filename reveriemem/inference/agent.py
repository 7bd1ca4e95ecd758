"""The character agent: one perspective-bounded reply per turn (paper: "Inference Pipeline",
Algorithm 1).

Two tracks run for every turn, at the same time:

- the reasoning chain (`reveriemem.inference.reasoning_chain`), in the calling thread: Anchor
  recalls the character's own scene notes, then Self-Probe rounds each issue one probe to
  Vis-Retrieve, until the pool is Sufficient, `max_rounds` is reached, or no new probe is left;
- the personality track (`reveriemem.inference.personality_track`), in a worker thread:
  Emo-Gate, then only when it fires Emo-Transition, and Pattern.

**Memory-Fusion** then writes the reply from the scene notes, the pool and the pattern. Facts
reach it only through `reader.vis_retrieve` (`reveriemem.inference.memory_reader`), whose
visibility (and `as_of`) filter runs inside LanceDB; every row is checked again by the chain.

As in the paper, only three steps are model prompts: Self-Probe, Pattern and Memory-Fusion
(`reveriemem.inference.programs`); by default Emo-Gate and Emo-Transition are deterministic
(`reveriemem.inference.emotion_track`), and `emotion_model=True` asks the model for them too. A
turn therefore makes one Self-Probe call per round plus Memory-Fusion, and one more (Pattern)
when the gate fires or on a first turn: 3 calls for an exit at round 2 with a quiet gate, 4
when it fires. Every step but Memory-Fusion degrades rather than fails when the model's output
never parses (after `run_program`'s retries) and the trace lists each fallback in `degraded`;
Memory-Fusion raises `ModelOutputError` (an empty reply is asked for once more, sampled afresh).
The trace (`reveriemem.inference.trace`) says how each step was decided and carries its calls,
tokens and latency, taken from the handle's usage recorder. With compiled programs the trace's
`method` reads `model:<name>+compiled:<file name>` and `compiled` holds the file's path.

Without a model (`handle.lm is None`) the offline reasoner decides (`reveriemem.inference.offline`):
the chain probes with the question and, when the question carries options, with the question
read with each option; the reasoner reads the bounded pool and its own scene notes, and picks an
option, quotes a fact, or refuses below the floors calibrated with the build (term rarity and
floors are read from the reader's store; a stand-in reader gets the pool's rarity and the default
floors). The deterministic personality track runs all the same (Pattern then takes the closest
candidate by embedding).

For compiling, `inline_personality=True` runs the personality track in the calling thread; by
default it runs in a worker thread that inherits the caller's context (`contextvars`), DSPy
settings and trace included. A call answered from the persistent model cache never runs its
predictor, so DSPy does not trace it: compile with a handle whose `cache` is off.
"""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, replace
from typing import Any

from reveriemem.core.characters import Character
from reveriemem.core.errors import ModelOutputError
from reveriemem.inference.emotion_track import AgentState
from reveriemem.inference.memory_reader import Reader, score_of, similarity_of
from reveriemem.inference.offline import (
    DEFAULT_CALIBRATION,
    EXTRACTIVE_METHOD,
    MIN_SCORE,
    OfflineReasoner,
    ReaderCalibration,
    load_calibration,
    load_rarity,
    parse_options,
)
from reveriemem.inference.offline_reader import Rarity
from reveriemem.inference.personality_track import Personality, PersonalityTrack
from reveriemem.inference.programs import InferencePrograms, default_programs
from reveriemem.inference.reasoning_chain import Reasoning, ReasoningChain, route_of
from reveriemem.inference.trace import RecalledFact, Trace, Turn, TurnLog, listen_for_step_usage
from reveriemem.inference.turn_text import history_line, numbered_facts
from reveriemem.models import ModelHandle, run_program

ANCHOR_K = 3  # scenes recalled as the frame
PATTERN_K = 3  # candidate patterns offered to the Pattern step
HISTORY_LINES = 8  # conversation lines shown to the model
LAYERS = frozenset({"episodic", "semantic", "personality"})  # the three memory layers; ablations drop one


class ReverieAgent:
    """A character of a book answering from its own memory, as bounded by `reader`.

    `reader` is a `reveriemem.inference.memory_reader.MemoryReader` for the same book and
    character. `respond` with `state=None` continues from the agent's own
    previous turn (or, on the first turn, from the character's latest
    recorded emotion up to `as_of`). `emotion_model=True` asks the model for
    Emo-Gate and Emo-Transition (two more calls when the gate fires) instead
    of deciding them from the lexicon and the emotion record; without a model
    they are deterministic either way. `programs` are the three prompts
    (default: `default_programs()`, compiled state from
    `dspy_programs/compiled/inference.json` or `$REVERIEMEM_COMPILED` when
    present); `inline_personality=True` runs the personality track in the
    calling thread, one step after another (for compiling).
    """

    def __init__(self, reader: Reader, handle: ModelHandle, character: Character, max_rounds: int = 3,
                 k: int = 8, *, anchor_k: int = ANCHOR_K, pattern_k: int = PATTERN_K,
                 min_score: float = MIN_SCORE, backoff: float = 0.5, emotion_model: bool = False,
                 layers: Iterable[str] = LAYERS, programs: InferencePrograms | None = None,
                 inline_personality: bool = False, rarity: Rarity | None = None,
                 calibration: ReaderCalibration | None = None) -> None:
        self.layers = frozenset(layers)
        if not self.layers <= LAYERS:
            raise ValueError(f"Unknown memory layer(s): {', '.join(sorted(self.layers - LAYERS))}.")
        if max_rounds < 1:
            raise ValueError("max_rounds must be at least 1.")
        if k < 1:
            raise ValueError("k must be at least 1.")
        self.reader = reader
        self.handle = handle
        self.character = character
        self.max_rounds = max_rounds
        self.k = k
        self.anchor_k = anchor_k
        self.pattern_k = pattern_k
        self.min_score = min_score
        self.backoff = backoff
        self.emotion_model = emotion_model
        self.programs = programs if programs is not None else default_programs()
        self.inline_personality = inline_personality
        self.state: AgentState | None = None
        self._rarity = rarity
        self._calibration = calibration
        self._reader_lock = threading.Lock()  # the two tracks share the reader
        listen_for_step_usage()

    @property
    def method(self) -> str:
        if self.handle.lm is None:
            return EXTRACTIVE_METHOD
        label = self.programs.label
        return self._model_method + (f"+compiled:{label}" if label else "")

    @property
    def compiled(self) -> str | None:
        """The compiled program file the model steps use (None: none, or no model)."""
        path = self.programs.compiled
        return str(path) if path is not None and self.handle.lm is not None else None

    @property
    def _model_method(self) -> str:
        return f"model:{self.handle.name}"

    @property
    def _who(self) -> str:
        others = [a for a in self.character.aliases if a != self.character.name]
        return self.character.name + (f" (also called {', '.join(others)})" if others else "")

    def _reasoning_chain(self) -> ReasoningChain:
        return ReasoningChain(self.reader, self._reader_lock, self.character, self._who, self.handle,
                              self.programs.self_probe, self.layers, self.max_rounds, self.k, self.anchor_k,
                              self.backoff)

    def _personality_track(self) -> PersonalityTrack:
        return PersonalityTrack(self.reader, self._reader_lock, self.character, self._who, self.handle,
                                self.programs.select_pattern, self.layers, self.pattern_k, self.backoff,
                                self.emotion_model)

    def offline_reasoner(self) -> OfflineReasoner:
        """The offline reasoner over this agent's book: rarity and floors from the reader's store when
        it has one (read once), else the pool's own rarity and the default floors."""
        if self._rarity is None or self._calibration is None:
            book, uri = getattr(self.reader, "book", None), getattr(self.reader, "uri", None)
            if isinstance(book, str) and isinstance(uri, str):
                from reveriemem.core.storage import MemoryStore

                store = MemoryStore.for_home(lancedb=uri)
                self._rarity = self._rarity or load_rarity(book, store)
                self._calibration = self._calibration or load_calibration(book, self.character.slug, store)
            else:
                self._calibration = self._calibration or DEFAULT_CALIBRATION
        return OfflineReasoner(self._rarity, self._calibration or DEFAULT_CALIBRATION, self.character.surface_forms)

    def respond(self, question: str, history: Sequence[str | tuple[str, str]] = (),
                state: AgentState | None = None, as_of: int | None = None, probes: Sequence[str] = ()) -> Turn:
        """Answer `question` as the character; `history` is the conversation so far,
        as lines or (speaker, text) pairs; `as_of` bounds memory to a point of the story.
        `probes` are further look-ups for the deterministic chain (no model), issued after
        the question and the question read with each of its options, one round each; with a
        model, Self-Probe writes the probes and these are unused."""
        question = " ".join(question.split())
        if not question:
            raise ValueError("The question is empty: ask the character something.")
        lines = [history_line(item) for item in history][-HISTORY_LINES:]
        start = state if state is not None else self.state
        run = TurnLog()
        chain, track = self._reasoning_chain(), self._personality_track()
        offline: dict[str, Any] | None = None
        if self.handle.lm is None:
            asked = parse_options(question)
            option_probes = [f"{asked.text} {text}" for text in asked.answers.values()]
            reasoning = chain.recall_offline(run, asked.text or question, as_of, [*option_probes, *probes])
            personality = track.decide(run, question, lines, start, as_of)
            decision = self.offline_reasoner().decide(asked, reasoning.pool, reasoning.anchored)
            reply, used, offline = decision.reply, decision.used, decision.detail
            reasoning.stop_reason = decision.stop
        elif self.inline_personality:
            reasoning = chain.recall(run, question, as_of)
            personality = track.decide(run, question, lines, start, as_of)
            reply, used = self._fuse(run, question, lines, reasoning, personality.state)
        else:
            # the worker runs in a copy of this context: DSPy's settings (its trace) reach it
            context = contextvars.copy_context()
            with ThreadPoolExecutor(max_workers=1, thread_name_prefix="reverie-personality") as pool:
                decided = pool.submit(context.run, track.decide, run, question, lines, start, as_of)
                reasoning = chain.recall(run, question, as_of)
                personality = decided.result()
            reply, used = self._fuse(run, question, lines, reasoning, personality.state)
        self.state = personality.state
        trace = self._trace(run, as_of, reasoning, personality, used)
        trace.offline = offline
        return Turn(question=question, reply=reply, state=personality.state, trace=trace)

    # -- memory fusion -----------------------------------------------------------

    def _fuse(self, run: TurnLog, question: str, lines: list[str], reasoning: Reasoning,
              state: AgentState) -> tuple[str, list[str]]:
        pattern = state.pattern
        inputs: dict[str, Any] = {
            "character": self._who, "question": question, "history": lines,
            "scene_memory": reasoning.scene_memory, "facts": numbered_facts(reasoning.pool),
            "pattern": pattern.description if pattern else "", "pattern_excerpts": list(pattern.excerpts) if pattern else [],
            "emotion_state": state.describe(),
        }
        with run.step("memory_fusion", "fusion", self._model_method) as step:
            # run_program retries unparseable output and then raises ModelOutputError;
            # an empty reply gets one more try, sampled afresh and past the caches
            pred = run_program(self.handle, self.programs.memory_fusion, backoff=self.backoff, **inputs)
            reply = " ".join(str(pred.reply or "").split())
            if not reply:
                step.degraded = "the model wrote an empty reply; asked again"
                pred = run_program(_fresh(self.handle), self.programs.memory_fusion, backoff=self.backoff, **inputs)
                reply = " ".join(str(pred.reply or "").split())
            if not reply:
                raise ModelOutputError(f"The model {self.handle.name} wrote an empty reply as MemoryFusion twice.")
        numbers = {int(x) for x in (pred.used_facts or []) if isinstance(x, int) or str(x).isdigit()}
        used = [str(reasoning.pool[i - 1]["fact_id"]) for i in sorted(numbers) if 1 <= i <= len(reasoning.pool)]
        return reply, used

    # -- the trace -----------------------------------------------------------------

    def _trace(self, run: TurnLog, as_of: int | None, reasoning: Reasoning, personality: Personality,
               used: list[str]) -> Trace:
        state = personality.state
        facts = [RecalledFact(
            fact_id=str(r["fact_id"]), text=str(r.get("text") or ""), visibility=list(r.get("visibility") or []),
            routes=list(r.get("routes") or []), evidence=str(r.get("evidence") or ""),
            route=r.get("route") or route_of(r, self.character.slug), source_start=r.get("source_start"),
            source_end=r.get("source_end"), known_from=r.get("known_from"), scene_id=r.get("scene_id"),
            score=score_of(r), similarity=similarity_of(r), probe=r.get("probe"), round=int(r.get("round", 1)),
        ) for r in reasoning.pool]
        return Trace(
            character=self.character.slug, character_name=self.character.name, method=self.method,
            model=self.handle.name, as_of=as_of, anchored=reasoning.anchored, rounds=reasoning.rounds, facts=facts,
            used_facts=used, exit_round=reasoning.exit_round, stop_reason=reasoning.stop_reason,
            gate=personality.gate, gate_reason=personality.gate_reason,
            emotion={"emotion": state.emotion, "intensity": state.intensity, "reason": state.reason,
                     "changed": personality.changed, "source": personality.emotion_source,
                     "method": personality.emotion_method, "record_steps": personality.record_steps},
            pattern=asdict(state.pattern) if state.pattern else None, pattern_source=personality.pattern_source,
            pattern_candidates=personality.candidates,
            steps=sorted(run.steps, key=lambda s: s.started_s), degraded=list(run.degraded),
            dropped_rows=reasoning.dropped, seconds=time.perf_counter() - run.t0, compiled=self.compiled,
        )


# -- helpers -----------------------------------------------------------------------


def _fresh(handle: ModelHandle) -> ModelHandle:
    """The same model, sampled afresh: no persistent or DSPy cache, a small temperature if it had none."""
    lm = handle.lm
    if lm is None:
        return handle
    changes: dict[str, Any] = {"cache": False}
    if not lm.kwargs.get("temperature"):
        changes["temperature"] = 0.7
    return replace(handle, lm=lm.copy(**changes), cache=False)
