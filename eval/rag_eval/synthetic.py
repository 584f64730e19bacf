"""A synthetic corpus for load tests: unit vectors with topic structure, and text from a pseudo-word
vocabulary drawn so BM25 has realistic posting lists. Deterministic for a given seed.

Vectors. ``n_topics`` random unit centroids; document i has a primary topic ``t`` and a secondary
topic ``s`` and its vector is ``normalize(c_t + w * c_s + noise * g)`` with ``w ~ U(0, 0.5)`` and
``g ~ N(0, I / dim)`` (so ``|g| ≈ 1``). Neighbours therefore have graded similarities, as real
embeddings do, unlike isotropic random vectors (which make every point almost equidistant and are
a known worst case for any ANN index).

Text. A vocabulary of pseudo-words (syllable strings); each document mixes words drawn Zipf-like
from the whole vocabulary (common words → long posting lists) with words of its two topics' own
word lists, so a query made of a document's words matches it and its topical neighbours.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

_ONSETS = ["b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br", "st", "tr", "pl", "gr", "sh"]
_VOWELS = ["a", "e", "i", "o", "u", "ai", "ou"]
_CODAS = ["", "", "n", "r", "s", "l", "x", "nd"]


def pseudo_words(count: int, seed: int = 7) -> list[str]:
    """``count`` distinct pronounceable pseudo-words of 2-3 syllables."""
    rng = np.random.default_rng(seed)
    words: dict[str, None] = {}
    while len(words) < count:
        syllables = int(rng.integers(2, 4))
        word = "".join(
            _ONSETS[rng.integers(len(_ONSETS))] + _VOWELS[rng.integers(len(_VOWELS))] + _CODAS[rng.integers(len(_CODAS))]
            for _ in range(syllables)
        )
        words.setdefault(word, None)
    return list(words)


def unit(rows: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(rows, axis=-1, keepdims=True)
    return (rows / np.maximum(norms, 1e-12)).astype(np.float32)


@dataclass
class SyntheticCorpus:
    size: int
    dim: int = 384
    n_topics: int = 1000
    noise: float = 0.6
    vocabulary: int = 20_000
    topic_words: int = 40
    words_per_doc: int = 120
    topic_share: float = 0.3
    seed: int = 1

    def __post_init__(self) -> None:
        rng = np.random.default_rng(self.seed)
        self.words = np.array(pseudo_words(self.vocabulary, seed=self.seed + 6))
        self.centroids = unit(rng.standard_normal((self.n_topics, self.dim)))
        self.primary = rng.integers(self.n_topics, size=self.size)
        self.secondary = rng.integers(self.n_topics, size=self.size)
        self._topic_vocab = rng.integers(self.vocabulary // 20, self.vocabulary, size=(self.n_topics, self.topic_words))
        ranks = np.arange(1, self.vocabulary + 1, dtype=np.float64)
        zipf = 1.0 / ranks**1.05
        self._zipf_cdf = np.cumsum(zipf / zipf.sum())
        self._rng_seed = self.seed

    def vectors(self, start: int = 0, stop: int | None = None, batch: int = 20_000) -> np.ndarray:
        """Unit vectors of documents ``start..stop`` (each block from its own seed: any slice is stable)."""
        stop = self.size if stop is None else stop
        out = np.empty((stop - start, self.dim), dtype=np.float32)
        for block_start in range(start - start % batch, stop, batch):
            rng = np.random.default_rng((self.seed, 1, block_start))
            block_stop = min(block_start + batch, self.size)
            weights = rng.uniform(0.0, 0.5, size=(block_stop - block_start, 1))
            noise = rng.standard_normal((block_stop - block_start, self.dim)) / np.sqrt(self.dim)
            ids = np.arange(block_start, block_stop)
            block = unit(self.centroids[self.primary[ids]] + weights * self.centroids[self.secondary[ids]] + self.noise * noise)
            lo, hi = max(start, block_start), min(stop, block_stop)
            out[lo - start : hi - start] = block[lo - block_start : hi - block_start]
        return out

    def text(self, index: int) -> str:
        rng = np.random.default_rng((self.seed, 2, index))
        n_topic = int(self.words_per_doc * self.topic_share)
        background = np.searchsorted(self._zipf_cdf, rng.random(self.words_per_doc - n_topic))
        background = np.minimum(background, self.vocabulary - 1)
        topical = np.concatenate(
            [
                rng.choice(self._topic_vocab[self.primary[index]], size=n_topic - n_topic // 3),
                rng.choice(self._topic_vocab[self.secondary[index]], size=n_topic // 3),
            ]
        )
        words = np.concatenate([background, topical])
        rng.shuffle(words)
        return " ".join(self.words[words].tolist())

    def query_text(self, index: int, n_words: int = 4, seed: int = 0) -> str:
        """A short query made of document ``index``'s topical words (what a user would search for)."""
        rng = np.random.default_rng((self.seed, 3, index, seed))
        picked = rng.choice(self._topic_vocab[self.primary[index]], size=n_words, replace=False)
        return " ".join(self.words[picked].tolist())

    def query_vector(self, index: int, noise: float = 0.3, seed: int = 0) -> np.ndarray:
        """Document ``index``'s vector plus noise of norm ≈ ``noise``, normalised: a query near a data point."""
        rng = np.random.default_rng((self.seed, 4, index, seed))
        base = self.vectors(index, index + 1)[0]
        return unit(base + noise * rng.standard_normal(self.dim) / np.sqrt(self.dim))
