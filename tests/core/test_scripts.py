"""Script-aware tokens: bigrams where no spaces are, a stemmer per script, Latin as before."""

from __future__ import annotations

import unicodedata

import numpy as np

from engram import scripts
from engram.embed import HashingEmbedder
from engram.store.lexicon import LexicalPartition, porter, query_terms, stem_set, tokens
from engram.store.words import stem


def test_runs_without_spaces_become_overlapping_bigrams() -> None:
    assert tokens("東京タワー") == ["東京", "京タ", "タワ", "ワー"]
    assert tokens("猫") == ["猫"]  # a one-character run is its own unigram
    assert tokens("我喜欢喝茶") == ["我喜", "喜欢", "欢喝", "喝茶"]


def test_a_latin_word_ends_where_a_run_without_spaces_begins() -> None:
    assert tokens("iPhone用のケース") == [porter("iphone"), "用の", "のケ", "ケー", "ース"]


def test_thai_bigrams_keep_each_letter_with_its_marks() -> None:
    grams = tokens("น้องสาว")
    assert grams[0] == "น้อ"  # น with its tone mark, then อ
    assert not any(unicodedata.category(gram[0]).startswith("M") for gram in grams)


def test_a_query_shares_the_bigrams_of_the_words_it_shares() -> None:
    memory = set(tokens("我的妹妹在上海的一家医院当护士。"))
    assert {"妹妹", "医院"} <= memory & set(query_terms("妹妹在哪家医院工作？"))


def test_each_script_has_its_stemmer() -> None:
    words = tokens("В больнице работает сестра")
    assert sorted(words) == sorted(tokens("сестра работает в больнице"))
    assert stem("работает") == stem("работать") == "работа"
    assert stem("ёлки") == stem("елки")
    assert stem("νοσοκομείο") == stem("νοσοκομειου")  # accents and endings
    assert stem("मेरी") == ""  # a Hindi stopword
    assert tokens("अस्पताल अस्पतालों") == [stem("अस्पताल")] * 2
    assert tokens("المستشفى") == tokens("مستشفى")


def test_combining_marks_stay_inside_their_word() -> None:
    """Python's \\w stops at a vowel sign: "किताबें" used to fall into fragments."""
    assert scripts.WORD.findall("किताबें पढ़ो") == ["किताबें", "पढ़ो"]
    assert scripts.WORD.findall("🧘\u200d♀\ufe0f ok") == ["ok"]  # an emoji's selector is no word


def test_latin_text_tokenises_as_before() -> None:
    assert tokens("Zoë’s café was discussed") == ["zoe", "cafe", porter("discussed")]
    assert stem_set("The running cats") == {porter("running"), porter("cats")}
    assert scripts.family("Ärztin") == "latin"


def test_the_index_finds_a_japanese_memory_by_its_words() -> None:
    part = LexicalPartition()
    part.append([(1, "m1", "u", "user", "", "私の猫の名前はミケです。"),
                 (2, "m2", "u", "user", "", "大阪の本社で会議があります。")])  # fmt: skip
    rows, _ = part.postings("名前", 10)
    assert rows.tolist() == [0]


def test_the_hashing_embedder_sees_cjk_and_devanagari_words() -> None:
    embedder = HashingEmbedder()
    memory, query, other = embedder.embed(
        ["私の猫の名前はミケです。", "猫の名前は何ですか", "大阪の本社で会議があります。"]
    )
    assert float(np.dot(memory, query)) > float(np.dot(other, query))
    hindi = embedder.embed(["मेरी किताबें", "किताबें कहाँ हैं", "दिल्ली में बारिश"])
    assert float(np.dot(hindi[0], hindi[1])) > float(np.dot(hindi[2], hindi[1]))
    assert embedder.model_id == "hashing-v2-384"
