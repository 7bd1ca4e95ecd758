"""The book registry: what `reveriemem add-book` records under the data home.

A registered book is a folder `<home>/books/<slug>/` holding the decoded text
(`source.txt`, UTF-8, offsets unchanged; a paragraph's opening word printed in
small capitals is set in its ordinary case, `core.text.fold_small_caps`, and speech printed in single
quotation marks is read in double ones, `core.quotes`), `book.json` (provenance and body
offsets) and `characters.json` (validated focus characters with narrator
spans as offsets). A folder is written under a temporary name and renamed
into place, so a failed registration never leaves half a book behind and
never touches books registered before.

With a shared store (`REVERIEMEM_STORE`), a registered book is also copied to
`<store>/books/<slug>/` (`book.json` last, so its presence marks a whole copy),
and a worker loading a book it lacks, or holds in another version, takes that
copy into its own registry first: workers on other machines build the same book.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
import shutil
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from reveriemem.core.characters import (
    RELATIONAL_DESCRIPTOR,
    Character,
    folded,
    load_character_file,
    slugify,
    validate_characters,
)
from reveriemem.core.errors import CharacterFileError, RegistryError
from reveriemem.core.layout import layout_name
from reveriemem.core.object_store import Files, join
from reveriemem.core.quotes import read_speech_quotes, speech_in_single_quotes, swap_speech_marks
from reveriemem.core.settings import data_home, store_uri
from reveriemem.core.text import book_shape_warnings, find_body, fold_small_caps, read_book_file, word_count


@dataclass
class Book:
    """A registered book: its text, body offsets and focus characters."""

    slug: str
    title: str
    text: str
    body_start: int
    body_end: int
    characters: list[Character]
    info: dict[str, Any]

    def character(self, name_or_alias: str) -> Character:
        """Find a focus character by canonical name, slug or alias (case and accents aside: "zoe" is Zoë).

        Quotation marks around the name are dropped ("“Mara”"), and a single word that is part of the
        name or an alias of exactly one focus character names that one ("Hope": Jefferson Hope).
        """
        wanted = folded(_unquoted(name_or_alias.strip()))  # accents aside: "Zoe" is Zoë Laurent
        for character in self.characters:
            names = {character.name, character.slug, *character.aliases}
            if wanted in {folded(n) for n in names}:
                return character
        # Then as a reader writes a name: with a title before it ("Mr Holmes", "Mrs. Mina Harker",
        # "Inspector Lestrade"), if the title fits the character ("Mrs. Hawkins" is not Jim) and the name
        # without it is one character's.
        bare = _untitled(wanted)
        found = [c for c in self.characters
                 if bare != wanted and _titles_agree(wanted, c.gender)
                 and any(_untitled(folded(n)) == bare and _same_title(wanted, folded(n)) for n in (c.name, *c.aliases))]
        if len(found) == 1:
            return found[0]
        # Then a descriptor the character file gives one character only, if it is no relation that changes its
        # referent ("the doctor" is Livesey; "my companion" is nobody in particular)
        found = [c for c in self.characters if any(folded(d) == wanted and not RELATIONAL_DESCRIPTOR.match(wanted)
                                                   for d in c.descriptors)]
        if len(found) == 1:
            return found[0]
        known = ", ".join(c.name for c in self.characters)
        # Then one word of a name ("Tobias", "Hope", "Mr. Hope" if the title fits), when it is part of one focus
        # character's names only.
        if re.fullmatch(r"[\w'’-]+", bare):
            found = [c for c in self.characters if bare in _name_words(c) and _titles_agree(wanted, c.gender)
                     and any(bare in _untitled(folded(n)).split() and _same_title(wanted, folded(n))
                             for n in (c.name, *c.aliases))]  # "Mrs. Murray" is not "Miss Murray"
            if len(found) == 1:
                return found[0]
            if found:
                raise RegistryError(f"{name_or_alias!r} is not a focus character of {self.slug}: it is part of the "
                                    f"names of {', '.join(c.name for c in found)}; give more of the name.")
        raise RegistryError(f"{name_or_alias!r} is not a focus character of {self.slug} (known: {known}).")


_TITLE = re.compile(r"^(?:(?:mr|mrs|miss|ms|dr|doctor|captain|capt|colonel|col|inspector|sergeant|sir|lady|lord|madam|"
                    r"professor|prof|monsieur|mister|squire|master|the)\.?\s+)+")
_FEMALE_TITLES = frozenset(("mrs", "miss", "ms", "madam", "lady"))
_MALE_TITLES = frozenset(("mr", "mister", "sir", "lord", "monsieur", "master"))


_QUOTES = "\"'“”‘’„«»"


def _unquoted(name: str) -> str:
    """A name without the quotation marks around it: '“Mara”', '"Mara"', "'Mara'" -> 'Mara'."""
    while len(name) >= 2 and name[0] in _QUOTES and name[-1] in _QUOTES:
        name = name[1:-1].strip()
    return name


def _name_words(character: Character) -> set[str]:
    """The first and last capitalised words of a character's name and aliases, titles left out ("Mr. Tobias
    Gregson": tobias, gregson), of three letters or more and no particle or common word: "long" is not Long John Silver, "van"
    not Van Helsing, "the" not God the Father."""
    out = set()
    for name in (character.name, *character.aliases):
        words = [w for w in re.findall(r"[\w'’-]+", name) if w[:1].isupper()]  # "my friend" names no one
        out |= {folded(w) for w in words[:1] + words[-1:]}
    return {w for w in out if len(w) >= 3 and _untitled(w + " x") == w + " x" and w not in _NOT_A_NAME}


# Words that open or close some names but name nobody alone.
_NOT_A_NAME = frozenset(("the", "of", "van", "von", "der", "den", "del", "della", "les", "las", "los", "long", "old",
                         "young", "little", "big", "black", "white", "red", "great", "good", "poor", "mistress", "master",
                         "count", "saint", "son", "father", "mother", "king", "queen", "lord", "lady", "captain", "friend",
                         "cap'n"))


def _untitled(name: str) -> str:
    """A lower-case name without the titles before it ("mrs. mina harker" -> "mina harker")."""
    return _TITLE.sub("", " ".join(name.split()))


def _titles(name: str) -> set[str]:
    return set(re.findall(r"[a-z]+", name[: len(name) - len(_untitled(name))])) & (_FEMALE_TITLES | _MALE_TITLES)


def _titles_agree(wanted: str, gender: str) -> bool:
    """A title said with a name fits the character's gender: "Mrs. Hawkins" is not Jim."""
    said = _titles(wanted)
    return not ((said & _FEMALE_TITLES and gender == "male") or (said & _MALE_TITLES and gender == "female"))


def _same_title(wanted: str, alias: str) -> bool:
    """No other title than the alias's own: "Mrs. Westenra" is not "Miss Westenra"."""
    said, own = _titles(wanted), _titles(alias)
    return not (said and own and not said & own)


def books_root(home: Path | None = None) -> Path:
    root = (home or data_home()) / "books"
    root.mkdir(parents=True, exist_ok=True)
    return root


def list_books(home: Path | None = None) -> list[str]:
    root = books_root(home)
    return sorted(p.name for p in root.iterdir() if p.is_dir() and (p / "book.json").exists())


def prepare_book(
    path: Path, characters_file: Path, slug: str | None = None
) -> tuple[Book, list[str]]:
    """Read, decode and validate a book and its character file, writing nothing."""
    decoded = read_book_file(path)
    # same offsets as the file; chapter openings in small capitals read as words, speech in single marks as double
    folded = fold_small_caps(decoded.text)
    single = speech_in_single_quotes(folded)
    text = swap_speech_marks(folded) if single else folded
    slug = slugify(slug or path.stem)
    title, characters = load_character_file(characters_file)
    body = find_body(text)
    if word_count(text[body[0] : body[1]]) < 20:
        raise RegistryError(f"The book file {path} has no story text once its framing is removed.")
    raw = path.read_bytes()
    warnings = [*decoded.warnings, *book_shape_warnings(text, len(raw), str(path))]
    warnings += validate_characters(characters, text, body, str(path))
    info = {
        "slug": slug,
        "title": title or slug.replace("-", " ").title(),
        "source_path": str(path.resolve()),
        "characters_file": str(characters_file.resolve()),
        "sha256": hashlib.sha256(raw).hexdigest(),
        "encoding": decoded.encoding,
        "body_start": body[0],
        "body_end": body[1],
        "chars": len(text),
        "body_words": word_count(text[body[0] : body[1]]),
        "paragraphs": layout_name(text),  # how paragraphs are told apart (core.layout)
        "speech_marks": "single" if single else "double",  # single ones are read as double (core.quotes)
        "registered_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    book = Book(
        slug=slug,
        title=str(info["title"]),
        text=text,
        body_start=body[0],
        body_end=body[1],
        characters=characters,
        info=info,
    )
    return book, warnings


def write_book(book: Book, home: Path | None = None) -> Path:
    """Store a prepared book; refuses a slug that is already registered."""
    root = books_root(home)
    target = root / book.slug
    if target.exists():
        raise RegistryError(
            f"A book named {book.slug!r} is already registered; pass --name to register this one "
            f"under another name, or run `reveriemem remove-book {book.slug}` first."
        )
    staging = Path(tempfile.mkdtemp(prefix=f".{book.slug}-", dir=root))
    try:
        with open(staging / "source.txt", "w", encoding="utf-8", newline="") as handle:
            handle.write(book.text)
        (staging / "book.json").write_text(json.dumps(book.info, indent=2), encoding="utf-8")
        records = [c.to_record() for c in book.characters]
        (staging / "characters.json").write_text(json.dumps(records, indent=2), encoding="utf-8")
        staging.rename(target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    publish_book(target)
    return target


REGISTRY_FILES = ("source.txt", "characters.json", "book.json")  # book.json last: it marks a complete copy


def _shared_books() -> Files | None:
    store = store_uri()
    return Files(join(store, "books")) if store else None


def publish_book(folder: Path) -> None:
    """Copy a registered book's folder to the shared store, when there is one."""
    shared = _shared_books()
    if shared is not None:
        for name in REGISTRY_FILES:
            shared.write_bytes(f"{folder.name}/{name}", (folder / name).read_bytes())


def _take_shared(slug: str, home: Path | None) -> None:
    """Bring the shared store's copy of `slug` into this registry when it is missing here or differs."""
    shared = _shared_books()
    info = shared.read_bytes(f"{slug}/book.json") if shared is not None else None
    if shared is None or info is None:
        return
    root = books_root(home)
    target = root / slug
    if (target / "book.json").exists() and (target / "book.json").read_bytes() == info:
        return
    staging = Path(tempfile.mkdtemp(prefix=f".{slug}-", dir=root))
    try:
        for name in REGISTRY_FILES:
            data = info if name == "book.json" else shared.read_bytes(f"{slug}/{name}")
            if data is None:
                raise RegistryError(f"The shared copy of {slug!r} lacks {name}; register the book again.")
            (staging / name).write_bytes(data)
        if target.exists():
            target.rename(Path(tempfile.mkdtemp(prefix=f".replaced-{slug}-", dir=root)) / slug)
        staging.rename(target)
    except OSError:
        if not (target / "book.json").exists():  # a lost race with another process taking the same copy is fine
            raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def remove_book(slug: str, home: Path | None = None) -> None:
    target = books_root(home) / slug
    if not target.exists():
        raise RegistryError(f"No book named {slug!r} is registered.")
    trash = target.with_name(f".removing-{slug}")
    target.rename(trash)
    shutil.rmtree(trash, ignore_errors=True)
    shared = _shared_books()
    if shared is not None:
        shared.delete_folder(slug)


def registered_slug(name: str, registered: Iterable[str] = (), titles: Mapping[str, str] | None = None) -> str:
    """The slug a book's name is registered under: "A Study in Scarlet" and "A-Study-In-Scarlet" are
    a-study-in-scarlet (what `add-book` makes of a name, `slugify`), and "The Lamplighter's Ledger" is
    the-lamplighters-ledger when that is among `registered` (a file name drops the apostrophe).

    With `titles` (slug -> title of each registered book), a name that is no registered slug as typed is
    also read as a title: the one book of that title, or a `RegistryError` listing the books that share it.
    """
    try:
        slug = slugify(name)
    except CharacterFileError:  # no letter or digit ("..", "/"): no book has that name, and it is no folder to read
        raise RegistryError(f"No book is named {name!r}: a book's name has a letter or a digit.") from None
    known = set(registered)
    if titles and name.strip() not in known:
        wanted = _title_keys(name)
        sharing = sorted(s for s, title in titles.items() if _title_keys(title) & wanted)
        if len(sharing) > 1:
            raise RegistryError(f"The title {name!r} is shared by {len(sharing)} registered books; name one by its "
                                f"slug: {', '.join(sharing)}.")
        if sharing:
            return sharing[0]
    if slug not in known:
        joined = slugify(_joined(name))
        slug = joined if joined in known else slug
    return slug


def _joined(name: str) -> str:
    """A name with the apostrophes inside its words dropped, as a file name writes it ("Lamplighters")."""
    return re.sub(r"(?<=\w)['’](?=\w)", "", name)


def _title_keys(title: str) -> set[str]:
    try:
        return {slugify(title), slugify(_joined(title))}
    except CharacterFileError:
        return set()


def book_titles(home: Path | None = None) -> dict[str, str]:
    """The title of each registered book, by slug (from its book.json)."""
    titles: dict[str, str] = {}
    for slug in list_books(home):
        try:
            titles[slug] = str(json.loads((books_root(home) / slug / "book.json").read_text(encoding="utf-8"))["title"])
        except (OSError, ValueError, KeyError):  # a damaged registration is reported when it is loaded
            continue
    return titles


def load_book(slug: str, home: Path | None = None) -> Book:
    """Load a registered book (named as written or by its slug); a clear error names what to run when it is missing."""
    registered = list_books(home)
    titles = book_titles(home) if slug.strip() not in registered else None  # a title only when it is no slug
    name, slug = slug, registered_slug(slug, registered, titles)
    _take_shared(slug, home)
    folder = books_root(home) / slug
    if not (folder / "book.json").exists():
        registered = list_books(home)
        known = ", ".join(registered) or "none yet"
        close = [b for b in registered if slug in b] + difflib.get_close_matches(slug, registered, n=3, cutoff=0.6)
        if close:
            raise RegistryError(
                f"No book named {name!r} is registered; did you mean "
                f"{' or '.join(map(repr, list(dict.fromkeys(close))[:3]))}? Registered: {known}."
            )
        raise RegistryError(
            f"No book named {name!r} is registered (registered: {known}); "
            f"run `reveriemem add-book PATH --characters FILE` first."
        )
    try:
        info = json.loads((folder / "book.json").read_text(encoding="utf-8"))
        records = json.loads((folder / "characters.json").read_text(encoding="utf-8"))
        with open(folder / "source.txt", encoding="utf-8", newline="") as handle:
            text = handle.read()
    except (OSError, ValueError) as exc:
        raise RegistryError(f"The registration of {slug!r} in {folder} is damaged: {exc}") from exc
    return Book(
        slug=slug,
        title=info["title"],
        # a book registered before openings were folded or its speech marks read (`speech_marks`, core.quotes)
        # reads as one registered now; since then source.txt holds the text as read
        text=fold_small_caps(text) if "speech_marks" in info else read_speech_quotes(fold_small_caps(text)),
        body_start=int(info["body_start"]),
        body_end=int(info["body_end"]),
        characters=[Character.from_record(r) for r in records],
        info=info,
    )
