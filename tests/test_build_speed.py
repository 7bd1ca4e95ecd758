"""What makes the offline build fast changes nothing it stores or answers: query vectors encoded once
(and ahead, in one batch, for a reader calibration) are the vectors a query would get, and a
calibration's train items read without the Personality layer read as the whole agent reads them."""

from __future__ import annotations

import numpy as np
import pytest

from eval.generate import generate_items
from eval.methods.reveriemem import calibration_agent, read_train_items
from reveriemem.core.embeddings import open_embedder
from reveriemem.core.registry import load_book
from reveriemem.core.storage import MemoryStore, PartitionRef
from reveriemem.inference.memory_reader import MemoryReader
from reveriemem.inference.module import ReverieInference
from reveriemem.models import open_model


def test_train_items_read_without_personality_read_as_the_whole_agent_reads_them(built_demo) -> None:
    book = load_book(built_demo)
    store = MemoryStore.for_home()
    facts = store.read("facts", PartitionRef(book.slug)).drop("vector").to_dicts()
    entities = store.read("entities", PartitionRef(book.slug)).to_dicts()
    embedder = open_embedder("hash")
    read = 0
    for character in book.characters:
        items = [i for i in generate_items(book, character, facts, entities) if i.provenance.get("part") == "train"]
        reader = MemoryReader(book.slug, character.slug, embedder, store.uri)
        whole = read_train_items(ReverieInference(reader, open_model("none"), character, compiled=False), items)
        lean = read_train_items(calibration_agent(reader, character), items)
        assert [r for _, r in lean] == [r for _, r in whole]
        read += len(whole)
    assert read  # some train items were read


class _Counting:
    """Counts the texts the numpy query encoder is asked to encode."""

    def __init__(self, encoder):
        self.encoder, self.texts = encoder, []

    def encode(self, texts):
        self.texts += texts
        return self.encoder.encode(texts)


@pytest.mark.slow
def test_query_vectors_are_encoded_once_and_primed_ones_agree() -> None:
    from reveriemem.core.embeddings import SentenceTransformerEmbedder, bundled_minilm_path

    embedder = SentenceTransformerEmbedder("all-MiniLM-L6-v2", str(bundled_minilm_path()), numpy_queries=True)
    counting = _Counting(embedder._numpy)
    embedder._numpy = counting  # type: ignore[assignment]
    question = "Who found the ring in Brixton Road?"
    first = embedder.embed([question])
    again = embedder.embed([question, "Lestrade"])
    assert counting.texts == [question, "Lestrade"]  # the repeated question was not encoded again
    assert np.array_equal(first[0], again[0])
    primed = ["Who wrote RACHE on the wall?", "Who wrote RACHE on the wall? Jefferson Hope"]
    alone = [_numpy_vector(t) for t in primed]
    assert embedder.prime(primed) == 2 and embedder.prime(primed) == 0
    got = embedder.embed(primed[:1])
    assert counting.texts == [question, "Lestrade"]  # found among the primed vectors
    assert np.abs(got[0] - alone[0]).max() < 1e-5 and float(got[0] @ alone[0]) > 0.99999


def _numpy_vector(text: str) -> np.ndarray:
    from reveriemem.core.embeddings import bundled_minilm_path
    from reveriemem.core.minilm import MiniLMNumpy

    return MiniLMNumpy(bundled_minilm_path()).encode([text])[0]
