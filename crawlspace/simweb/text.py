"""The word text that page bodies are cut from, so that bodies are derived, never stored.

One corpus per web: a vocabulary (common English function words first, then pronounceable
pseudo-words) whose use follows Zipf's law, written out once as a few thousand paragraphs.
A page picks its paragraphs by a stride through the corpus fixed by a hash of (seed, page),
so two pages share almost no text (no accidental near-duplicates) and rendering a 20 KB page
is a handful of string joins. The corpus depends only on its own constant seed: it is the
same for every web, and the generator's seed decides which pieces a page gets.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

CORPUS_SEED = 20_261_130
PARAGRAPHS = 4093
"""A prime, so that any stride in 1..PARAGRAPHS-1 walks through distinct paragraphs."""
VOCABULARY = 6000
ZIPF_EXPONENT = 1.05

_COMMON_WORDS = (
    "the of and to a in is it you that he was for on are with as his they be at one have this from or "
    "had by not word but what some we can out other were all there when up use your how said an each "
    "she which do their time if will way about many then them write would like so these her long make "
    "thing see him two has look more day could go come did number sound no most people my over know "
    "water than call first who may down side been now find any new work part take get place made live "
    "where after back little only round man year came show every good me give our under name very "
    "through just form sentence great think say help low line differ turn cause much mean before move "
    "right boy old too same tell does set three want air well also play small end put home read hand "
    "port large spell add even land here must big high such follow act why ask men change went light"
)
_ONSETS = "b c d f g h j k l m n p r s t v w z br ch cl dr fl gr pl pr sh st th tr"
_VOWELS = "a e i o u ai ea io ou"
_CODAS = ("", "", "", "", "n", "r", "s", "t", "l", "m", "nd", "st")


@dataclass(frozen=True, slots=True)
class Corpus:
    """Vocabulary (most frequent first) and paragraphs of plain text (no markup)."""

    words: tuple[str, ...]
    paragraphs: tuple[str, ...]

    @classmethod
    def build(cls) -> Corpus:
        rng = np.random.default_rng(CORPUS_SEED)
        words = list(dict.fromkeys(_COMMON_WORDS.split()))
        seen = set(words)
        onsets, vowels = _ONSETS.split(), _VOWELS.split()
        while len(words) < VOCABULARY:
            syllables = 1 + int(rng.random() > 0.45) + int(rng.random() > 0.85)
            word = "".join(
                onsets[int(rng.integers(len(onsets)))]
                + vowels[int(rng.integers(len(vowels)))]
                + _CODAS[int(rng.integers(len(_CODAS)))]
                for _ in range(syllables)
            )
            if word not in seen:
                seen.add(word)
                words.append(word)
        ranks = np.arange(1, VOCABULARY + 1, dtype=np.float64)
        probabilities = ranks**-ZIPF_EXPONENT
        probabilities /= probabilities.sum()
        sentence_lengths = rng.integers(6, 19, size=PARAGRAPHS * 12)
        total = int(sentence_lengths.sum())
        drawn = rng.choice(VOCABULARY, size=total, p=probabilities)
        vocabulary = np.array(words, dtype=object)
        tokens: list[str] = vocabulary[drawn].tolist()
        sentences_per_paragraph = rng.integers(4, 12, size=PARAGRAPHS)
        paragraphs: list[str] = []
        position = 0
        sentence = 0
        for count in sentences_per_paragraph.tolist():
            sentences: list[str] = []
            for _ in range(count):
                length = int(sentence_lengths[sentence])
                sentence += 1
                text = " ".join(tokens[position : position + length])
                position += length
                sentences.append(text[0].upper() + text[1:] + ".")
            paragraphs.append(" ".join(sentences))
        return cls(words=tuple(words), paragraphs=tuple(paragraphs))

    def paragraph_bytes(self) -> list[int]:
        return [len(paragraph) for paragraph in self.paragraphs]
