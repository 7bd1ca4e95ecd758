"""Plot scripts for Task 2: our YAML format, its validation, and import of BookWorld presets.

A script names a book, a cast of characters, the point of the story at which every
character's memory is bounded (`as_of`: a scene or a chapter), the world and its
locations, and either stages (with-script mode: what must happen, in order) or an
opening intervention (without-script mode). The format is documented in
docs/narrative.md. A BookWorld preset (its experiment preset JSON with the world,
location and role files it points to) imports to the same `Script`; its single
script paragraph becomes stages of one or two sentences each.

Invariants: a script has at least one cast member and, in with-script mode, at least
one stage; every stage's location and every starting location is one of the script's
locations; stage casts are drawn from the script's cast.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from reveriemem.core.errors import ReverieMemError
from reveriemem.core.text import split_sentences

SCRIPTS_DIR = Path(__file__).resolve().parents[1] / "data" / "scripts"
MODES = ("script", "free")


class ScriptError(ReverieMemError):
    """A plot script or BookWorld preset is missing, malformed or inconsistent."""


@dataclass(frozen=True)
class Location:
    code: str
    name: str
    description: str = ""


@dataclass(frozen=True)
class Stage:
    text: str  # what must happen
    location: str | None = None  # a location code; None: wherever the cast already is
    cast: tuple[str, ...] = ()  # who takes part; empty: the whole cast


@dataclass
class Script:
    id: str
    title: str
    book: str  # a registered book's slug ("" for a world with no book, e.g. an imported preset)
    cast: list[str]
    mode: str = "script"
    as_of_scene: int | None = None
    as_of_chapter: int | None = None
    world: str = ""  # the setting, a few sentences
    locations: list[Location] = field(default_factory=list)
    start: dict[str, str] = field(default_factory=dict)  # character -> location code
    stages: list[Stage] = field(default_factory=list)
    intervention: str = ""  # without-script mode: the opening event
    profiles: dict[str, str] = field(default_factory=dict)  # character -> profile (for profile-driven methods and the judge)
    rounds: int = 0  # without-script mode: how many rounds to play (0: 2)
    turns: int = 2  # moves per character in a stage (a round)
    source: str = ""  # where the script came from (file path, BookWorld preset)

    @property
    def with_script(self) -> bool:
        return self.mode == "script"

    @property
    def round_count(self) -> int:
        return len(self.stages) if self.with_script else (self.rounds or 2)

    def stage(self, index: int) -> Stage:
        """The stage played in round `index` (without a script: the intervention, then free play)."""
        if self.with_script:
            return self.stages[index]
        return Stage(self.intervention if index == 0 else "The scene goes on from what has happened.")

    def stage_cast(self, index: int) -> list[str]:
        members = self.stage(index).cast
        return [c for c in self.cast if not members or c in members]

    def location_name(self, code: str | None) -> str:
        for location in self.locations:
            if location.code == code:
                return location.name
        return code or "an unnamed place"

    def plot_text(self) -> str:
        """The plot as a judge or a one-call writer reads it."""
        if self.with_script:
            return "\n".join(f"{i}. {s.text}" for i, s in enumerate(self.stages, 1))
        return self.intervention

    def profile_lines(self) -> list[str]:
        return [f"{name}: {self.profiles.get(name, '') or 'a character of the book'}" for name in self.cast]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# -- our YAML format ---------------------------------------------------------------------


def _as_list(value: Any, what: str, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ScriptError(f"{where}: '{what}' must be a list.")
    return value


def script_from_dict(data: Any, *, source: str = "", default_id: str = "script") -> Script:
    """A validated `Script` from the parsed YAML (or JSON) of our format."""
    where = source or default_id
    if not isinstance(data, dict):
        raise ScriptError(f"{where}: a script must be a mapping of fields (title, book, cast, stages ...).")
    cast = [str(c) for c in _as_list(data.get("cast"), "cast", where)]
    if not cast:
        raise ScriptError(f"{where}: the script names no cast (a list of the characters who take part).")
    mode = str(data.get("mode") or ("free" if data.get("intervention") and not data.get("stages") else "script"))
    if mode not in MODES:
        raise ScriptError(f"{where}: mode must be 'script' or 'free', not {mode!r}.")
    as_of = data.get("as_of") or {}
    if not isinstance(as_of, dict) or not set(as_of) <= {"scene", "chapter"}:
        raise ScriptError(f"{where}: 'as_of' must be a mapping with 'scene' or 'chapter' (a number).")
    locations = []
    for raw in _as_list(data.get("locations"), "locations", where):
        if not isinstance(raw, dict) or not raw.get("code"):
            raise ScriptError(f"{where}: every location needs a 'code' (and a 'name').")
        locations.append(Location(str(raw["code"]), str(raw.get("name") or raw["code"]), str(raw.get("description") or "")))
    codes = {loc.code for loc in locations}
    stages = []
    for raw in _as_list(data.get("stages"), "stages", where):
        stage = Stage(raw) if isinstance(raw, str) else Stage(
            str(raw.get("text") or ""), raw.get("location"), tuple(str(c) for c in raw.get("cast") or ()))
        if not stage.text.strip():
            raise ScriptError(f"{where}: a stage has no text (what must happen).")
        if stage.location is not None and stage.location not in codes:
            raise ScriptError(f"{where}: stage location {stage.location!r} is not among the script's locations.")
        if set(stage.cast) - set(cast):
            raise ScriptError(f"{where}: a stage names {sorted(set(stage.cast) - set(cast))} outside the cast.")
        stages.append(stage)
    if mode == "script" and not stages:
        raise ScriptError(f"{where}: a with-script script needs at least one stage.")
    if mode == "free" and not str(data.get("intervention") or "").strip():
        raise ScriptError(f"{where}: a without-script script needs an 'intervention' (the opening event).")
    start = {str(k): str(v) for k, v in (data.get("start") or {}).items()}
    if set(start.values()) - codes:
        raise ScriptError(f"{where}: a starting location is not among the script's locations.")
    profiles = {str(k): str(v) for k, v in (data.get("profiles") or {}).items()}
    try:
        return Script(
            id=str(data.get("id") or default_id), title=str(data.get("title") or default_id),
            book=str(data.get("book") or ""), cast=cast, mode=mode,
            as_of_scene=_int_or_none(as_of.get("scene")), as_of_chapter=_int_or_none(as_of.get("chapter")),
            world=str(data.get("world") or ""), locations=locations, start=start, stages=stages,
            intervention=str(data.get("intervention") or ""), profiles=profiles,
            rounds=int(data.get("rounds") or 0), turns=max(1, int(data.get("turns") or 2)), source=source)
    except (TypeError, ValueError) as exc:
        raise ScriptError(f"{where}: a number field (as_of, rounds, turns) is not a number.") from exc


def _int_or_none(value: Any) -> int | None:
    return None if value is None else int(value)


def load_script(path: str | Path) -> Script:
    """A script from a YAML file of our format, or from a BookWorld experiment preset (JSON)."""
    path = Path(path)
    if not path.is_file():
        raise ScriptError(f"No script file at {path}.")
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        data = json.loads(text)
        if isinstance(data, dict) and "role_agent_codes" in data:
            return import_bookworld_preset(path)
    else:
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ScriptError(f"{path} is not valid YAML ({exc.__class__.__name__}).") from exc
    return script_from_dict(data, source=str(path), default_id=path.stem)


def shipped_scripts(book: str) -> list[Path]:
    """The hand-written scripts shipped for a book (reveriemem/data/scripts/<book>/*.yaml)."""
    return sorted((SCRIPTS_DIR / book).glob("*.yaml"))


def dump_script(script: Script) -> str:
    """The script in our YAML format."""
    data: dict[str, Any] = {"id": script.id, "title": script.title, "book": script.book, "mode": script.mode,
                            "cast": script.cast}
    as_of = {k: v for k, v in (("scene", script.as_of_scene), ("chapter", script.as_of_chapter)) if v is not None}
    if as_of:
        data["as_of"] = as_of
    if script.world:
        data["world"] = script.world
    if script.locations:
        data["locations"] = [{"code": loc.code, "name": loc.name, "description": loc.description}
                             for loc in script.locations]
    if script.start:
        data["start"] = script.start
    if script.stages:
        data["stages"] = [{k: v for k, v in (("text", s.text), ("location", s.location), ("cast", list(s.cast)))
                           if v} for s in script.stages]
    if script.intervention:
        data["intervention"] = script.intervention
    if script.profiles:
        data["profiles"] = script.profiles
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)


# -- BookWorld presets ---------------------------------------------------------------------


def _read_json(path: Path, what: str) -> Any:
    if not path.is_file():
        raise ScriptError(f"The BookWorld preset names a {what} at {path}, which does not exist.")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ScriptError(f"The BookWorld {what} {path} is not valid JSON.") from exc


def _preset_path(base: Path, value: str) -> Path:
    return (base / value).resolve()


def stages_from_paragraph(text: str, per_stage: int = 2) -> list[Stage]:
    """A script paragraph cut into stages of `per_stage` sentences, in order."""
    sentences = [s.strip() for s in split_sentences(text) if s.strip()]
    return [Stage(" ".join(sentences[i:i + per_stage])) for i in range(0, len(sentences), per_stage)]


def import_bookworld_preset(path: str | Path, *, book: str = "") -> Script:
    """A `Script` from a BookWorld experiment preset and the world, location and role files it names.

    Paths in the preset are read relative to the preset's folder's parent (BookWorld's
    repository root, where presets sit in `experiment_presets/`). Roles become the cast
    (by `role_name`'s first part, their nickname, or their code) with their profiles and
    relations; `script` gives with-script stages, `intervention` the without-script opening.
    """
    path = Path(path)
    preset = _read_json(path, "preset")
    root = path.resolve().parent.parent
    world = _read_json(_preset_path(root, preset["world_file_path"]), "world file") if preset.get("world_file_path") else {}
    locations: list[Location] = []
    if preset.get("loc_file_path"):
        raw_locations = _read_json(_preset_path(root, preset["loc_file_path"]), "location file")
        for code, raw in (raw_locations or {}).items():
            locations.append(Location(str(raw.get("location_code") or code), str(raw.get("location_name") or code),
                                      str(raw.get("description") or "")))
    role_dir = _preset_path(root, preset.get("role_file_dir") or "./data/roles/")
    source = str(preset.get("source") or world.get("source") or "")
    cast, profiles, by_code = [], {}, {}
    for code in preset.get("role_agent_codes") or []:
        role = _read_json(role_dir / source / code / "role_info.json", "role file")
        name = str(role.get("nickname") or role.get("role_name") or code)
        by_code[code] = name
        cast.append(name)
        profiles[name] = str(role.get("profile") or "")
        for other, relation in (role.get("relation") or {}).items():
            if other in preset.get("role_agent_codes", []):
                kinds = ", ".join(relation.get("relation") or [])
                profiles[name] += f" Relation to {other}: {kinds}. {relation.get('detail') or ''}".rstrip()
    for name in profiles:  # relation codes to names
        for code, other_name in by_code.items():
            profiles[name] = profiles[name].replace(f"Relation to {code}:", f"Relation to {other_name}:")
    if not cast:
        raise ScriptError(f"The BookWorld preset {path} names no roles (role_agent_codes).")
    script_text = str(preset.get("script") or "").strip()
    world_text = " ".join(x for x in (str(world.get("world_name") or ""), str(world.get("description") or "")) if x)
    sub = re.sub(r"[^a-z0-9]+", "-", str(preset.get("experiment_subname") or path.stem).lower()).strip("-")
    return Script(
        id=f"bookworld-{source or 'world'}-{sub}", title=f"{source or path.stem} ({sub})", book=book, cast=cast,
        mode="script" if script_text else "free", world=world_text, locations=locations,
        start={name: locations[0].code for name in cast} if locations else {},
        stages=stages_from_paragraph(script_text) if script_text else [],
        intervention="" if script_text else str(preset.get("intervention") or ""),
        profiles=profiles, source=str(path))
