"""The paper's published KBF-QA figures, typed from its tables, as plain data.

Source: /work/shared/paper/reveriemem-paper.tex (the ReverieMem / KBF-QA paper).

- `POOLED` — tab:task1-pooled (the seven methods) and tab:ablation-task1 (the
  two ablations): KRf accuracy, KR accuracy and KBF in percent, pooled over all
  eight books (4,386 items: 2,442 KRf and 1,944 KR).
- `BY_BOOK` — tab:task1-by-book: each book's n_krf:n_kr and each method's KBF
  in percent (the paper gives no per-book KRf/KR accuracies, and no per-book
  figures for the ablations).
- `METHOD_TO_PAPER` — our method names (the report's row labels) to the
  paper's rows; None where the paper has no such row.

Every figure is from `PAPER_MODEL` (gpt-5-mini, greedy decoding), never from
this project's runs.
"""

from __future__ import annotations

from dataclasses import dataclass

PAPER_MODEL = "gpt-5-mini"
PAPER_N_KRF = 2442
PAPER_N_KR = 1944


@dataclass(frozen=True)
class PaperScore:
    """One pooled row of the paper: percentages, as printed."""

    row: str  # the paper's row label
    krf_acc: float
    kr_acc: float
    kbf: float
    table: str  # the paper's table label


@dataclass(frozen=True)
class PaperBook:
    """One row of tab:task1-by-book."""

    slug: str  # this project's book slug
    title: str
    language: str
    n_krf: int
    n_kr: int
    kbf: dict[str, float]  # paper row -> KBF in percent


DIRECT = "direct"
NAIVE_RAG = "naive RAG"
RAPTOR = "RAPTOR"
HIPPORAG = "HippoRAG"
COMORAG = "ComoRAG"
BOOKWORLD = "BookWorld"
REVERIEMEM = "ReverieMem"
NO_EPISODIC = "w/o Episodic Layer"
NO_SEMANTIC = "w/o Semantic Layer"

_POOLED_TABLE = "tab:task1-pooled"
_ABLATION_TABLE = "tab:ablation-task1"

POOLED: dict[str, PaperScore] = {
    score.row: score
    for score in (
        PaperScore(DIRECT, 36.4, 38.2, 37.2, _POOLED_TABLE),
        PaperScore(NAIVE_RAG, 63.8, 10.0, 18.9, _POOLED_TABLE),
        PaperScore(RAPTOR, 66.4, 8.7, 16.8, _POOLED_TABLE),
        PaperScore(HIPPORAG, 65.4, 11.3, 20.9, _POOLED_TABLE),
        PaperScore(COMORAG, 33.0, 45.9, 37.7, _POOLED_TABLE),
        PaperScore(BOOKWORLD, 41.6, 35.5, 38.7, _POOLED_TABLE),
        PaperScore(REVERIEMEM, 68.1, 81.2, 73.3, _POOLED_TABLE),
        PaperScore(NO_EPISODIC, 79.6, 47.0, 60.9, _ABLATION_TABLE),
        PaperScore(NO_SEMANTIC, 10.8, 93.1, 17.8, _ABLATION_TABLE),
    )
}

# Column order of tab:task1-by-book.
_BY_BOOK_COLUMNS = (DIRECT, BOOKWORLD, NAIVE_RAG, RAPTOR, HIPPORAG, COMORAG, REVERIEMEM)


def _book(slug: str, title: str, language: str, n_krf: int, n_kr: int, *kbf: float) -> PaperBook:
    return PaperBook(slug, title, language, n_krf, n_kr, dict(zip(_BY_BOOK_COLUMNS, kbf, strict=True)))


BY_BOOK: dict[str, PaperBook] = {
    book.slug: book
    for book in (
        _book("a-study-in-scarlet", "A Study in Scarlet", "English", 344, 256, 35.2, 30.3, 19.0, 20.7, 30.8, 37.1, 68.8),
        _book("tom-sawyer", "Tom Sawyer", "English", 142, 118, 20.5, 22.3, 11.5, 8.5, 13.2, 32.0, 63.5),
        _book("treasure-island", "Treasure Island", "English", 161, 90, 28.3, 32.5, 10.8, 10.7, 37.3, 28.7, 65.1),
        _book("around-the-world-in-80-days", "Around the World in 80 Days", "English", 485, 342,
              38.1, 36.5, 11.0, 12.2, 11.6, 36.3, 73.7),
        _book("dracula", "Dracula", "English", 502, 419, 29.1, 39.9, 18.8, 18.5, 22.4, 35.1, 75.5),
        _book("paradise-lost", "Paradise Lost", "English", 62, 66, 29.1, 13.0, 5.6, 0.0, 2.9, 27.9, 73.0),
        _book("solaris", "Solaris", "Chinese", 202, 97, 39.1, 32.0, 28.5, 24.9, 34.5, 42.2, 71.0),
        _book("ball-lightning", "Ball Lightning", "Chinese", 544, 556, 32.7, 35.0, 24.5, 18.7, 16.9, 28.4, 78.0),
    )
}

METHOD_TO_PAPER: dict[str, str | None] = {
    "direct": DIRECT,
    "naive-rag": NAIVE_RAG,
    "raptor": RAPTOR,
    "hipporag": HIPPORAG,
    "comorag": COMORAG,
    "bookworld": BOOKWORLD,
    "reveriemem": REVERIEMEM,
    "reveriemem-no-episodic": NO_EPISODIC,
    "reveriemem-no-semantic": NO_SEMANTIC,
    "reveriemem-no-personality": None,  # the paper ablates personality only on the narrative task
    "evidence": None,  # this project's deterministic evidence answerer; not in the paper
}


def paper_row(method: str) -> str | None:
    """The paper's row for one of our method names (None: the paper has none)."""
    return METHOD_TO_PAPER.get(method)


def paper_pooled(method: str) -> PaperScore | None:
    """The paper's pooled scores for one of our method names, if the paper reports that method."""
    row = paper_row(method)
    return POOLED.get(row) if row is not None else None


def paper_book_kbf(method: str, book: str) -> float | None:
    """The paper's KBF (percent) for one of our methods on one book slug, if the paper reports it."""
    row = paper_row(method)
    paper_book = BY_BOOK.get(book)
    if row is None or paper_book is None:
        return None
    return paper_book.kbf.get(row)
