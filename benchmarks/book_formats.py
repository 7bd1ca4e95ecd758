"""The annotated novels rewritten in the other forms users' books come in, to score the boundary on them.

    python benchmarks/book_formats.py --out /tmp/formats            # every novel annotated under eval/presence/
    python benchmarks/boundary.py --embedder hash --no-demo --book /tmp/formats/single/dracula.txt

Writes, for each annotated novel in ../shared/books, four rewrites under OUT (the file name keeps the
novel's name, so `benchmarks/boundary.py` finds its character file and its annotation):

- `single/`: speech in single quotation marks (“ ” and " printed as ‘ ’ and '), as many British editions;
- `lines/`: one paragraph to a line, no blank lines (each paragraph's lines joined), as an e-book exported
  to text;
- `both/`: the two together;
- `indented/`: wrapped lines, each paragraph's first line set in four spaces, no blank lines, as old
  electronic texts.

Then prints the `benchmarks/boundary.py` command for each rewrite. The figures measured so are in
docs/benchmarks.md, session 21. A quotation inside speech and the speech of a letter quoted whole stay
single in `single/`, where a book printed with single marks would mark them double.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "books"
_BLANK = re.compile(r"\r?\n[ \t]*\r?\n")


def single(text: str) -> str:
    return text.replace("“", "‘").replace("”", "’").replace('"', "'")


def lines(text: str) -> str:
    return "\r\n".join(" ".join(line.strip() for line in p.splitlines()) for p in _BLANK.split(text) if p.strip())


def indented(text: str) -> str:
    out = []
    for paragraph in (p for p in _BLANK.split(text) if p.strip()):
        first, *rest = paragraph.splitlines()
        out.append("\r\n".join([first if first.startswith("   ") else "    " + first.lstrip(), *rest]))
    return "\r\n".join(out)


FORMS: dict[str, Callable[[str], str]] = {
    "single": single, "lines": lines, "both": lambda text: single(lines(text)), "indented": indented}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="folder to write the rewrites into")
    parser.add_argument("--book", action="append", help="a novel's name (default: every annotated novel)")
    args = parser.parse_args()
    annotated = sorted({p.name.split(".")[0] for p in (REPO / "eval" / "presence").glob("*.jsonl")})
    names = args.book or [n for n in annotated if (SHARED / f"{n}.txt").exists() and n != "paradise-lost"]
    for name in names:
        text = (SHARED / f"{name}.txt").read_bytes().decode("utf-8-sig")
        for form, rewrite in FORMS.items():
            target = args.out / form / f"{name}.txt"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(rewrite(text).encode("utf-8"))
            print(f"python benchmarks/boundary.py --embedder hash --no-demo --book {target}")


if __name__ == "__main__":
    main()
