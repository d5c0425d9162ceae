"""Stems of words in scripts other than Latin: a Snowball stemmer per script.

The lexical index reads Latin words with Porter2 (English) as it always has; a
word of another script is stemmed by the Snowball stemmer of that script's main
language: Cyrillic by Russian, Greek by Greek, Arabic script by Arabic,
Devanagari by Hindi, Armenian by Armenian, Tamil by Tamil. Other languages that
share a script (Ukrainian, Persian, Marathi) get that stemmer too: stems are
then rougher, but a word and its query still meet, because both sides of the
index stem the same way. Scripts without a stemmer keep the whole word.

Greek, Arabic and Hebrew lose their accents and vowel points first (their
readers usually omit them); the marks of other scripts are letters and stay.
Each language has a short list of its commonest function words, dropped like
the English stopwords: they would match almost every memory.
"""

from __future__ import annotations

import functools
import threading
import unicodedata

import snowballstemmer

from engram import scripts

__all__ = ["STOPWORDS", "snowball", "stem"]

_LANGUAGE = {
    "cyrillic": "russian", "greek": "greek", "arabic": "arabic", "devanagari": "hindi",
    "armenian": "armenian", "tamil": "tamil",
}  # fmt: skip
_UNMARKED = frozenset({"greek", "arabic", "hebrew"})

#: Function words of the stemmed languages, as written after the marks above are
#: dropped (Greek final sigma as sigma).
STOPWORDS = frozenset(
    """
    и в во не что он она оно они на я с со как а то все но да ты к у же вы за бы по
    ее мне меня от из о об до для мы их его ей ему или ни быть был была было были
    это этот эта эти там тут где когда кто чем есть нет ли уже вот мой моя мое мои
    ο η το οι τα του τησ των τον την στο στη στην στον στα στουσ σε και να με για
    απο ωσ που μου σου μασ σασ ειναι ενα μια θα δεν μη αλλα η ποιοσ ποια τι
    في من على الى إلى عن مع هذا هذه ذلك تلك التي الذي هو هي ان أن إن كان ما لا
    او أو ثم قد منذ اين أين كيف ماذا متى هل
    का की के को में से है हैं था थी थे और या पर भी यह वह एक कि नहीं तो ही ने
    क्या कौन कहाँ कहां किस मेरा मेरी मेरे
    """.split()
)

_STEMMERS = threading.local()  # a Snowball stemmer keeps state while it works


def snowball(language: str) -> snowballstemmer.stemmer:
    """This thread's Snowball stemmer for ``language``."""
    stemmer = getattr(_STEMMERS, language, None)
    if stemmer is None:
        stemmer = snowballstemmer.stemmer(language)
        setattr(_STEMMERS, language, stemmer)
    return stemmer


def _unmarked(word: str) -> str:
    """``word`` without combining marks (accents, harakat, niqqud), NFC again."""
    bare = "".join(c for c in unicodedata.normalize("NFD", word) if not unicodedata.combining(c))
    return unicodedata.normalize("NFC", bare)


@functools.lru_cache(maxsize=65_536)
def stem(word: str) -> str:
    """The stem of a lowercased word of a non-Latin script; empty for a stopword.

    Cached: a vocabulary is small (the cache is cleared with the English one
    after a forget or an erasure, see ``lexicon.forget_cached_words``).
    """
    kind = scripts.family(word)
    if kind in _UNMARKED:
        word = _unmarked(word).replace("ς", "σ")
    if word in STOPWORDS:
        return ""
    language = _LANGUAGE.get(kind)
    return str(snowball(language).stemWord(word)) if language else word
