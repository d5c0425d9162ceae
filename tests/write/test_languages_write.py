"""The write path in every script: nothing rejected for its script, no proposer misfire.

Issue 11 item 4. The chatter detector's word list is English; a turn in another
script is never chatter. The rule proposer's rules are English; on a turn in
another script it proposes nothing and never fails, and where an English rule
captures words of another script the key still tells them apart.
"""

from __future__ import annotations

import hashlib
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from engram.types import Turn
from engram.write.detectors import is_transient_chatter
from engram.write.propose import RuleProposer, split_sentences
from engram.write.propose_rules import slug

KEY = re.compile(r"^[a-z0-9_]+(?:\.[a-z0-9_]+)+$")

TURNS = [
    "私の名前は田中です。東京に住んでいます。",  # Japanese
    "我叫李明，我喜欢喝茶。",  # Chinese
    "Меня зовут Иван. Я люблю чай.",  # Russian
    "اسمي أحمد وأحب القهوة.",  # Arabic
    "मेरा नाम अनीता है। मुझे चाय पसंद है।",  # Hindi
    "Με λένε Μαρία. Μου αρέσει ο καφές.",  # Greek
    "저는 서울에 살아요.",  # Korean
    "ฉันชอบชา",  # Thai
    "אני אוהב תה",  # Hebrew
    "ঠিক আছে",  # Bengali ("all right")
]
SHORT = ["猫", "はい", "好", "да", "نعم", "हाँ", "ναι", "네", "ค่ะ", "٣", "दिल्ली"]


def _keys(text: str, role: str = "user") -> list[str | None]:
    return [p.key for p in RuleProposer().propose([Turn(role=role, text=text)])]


def test_no_turn_is_chatter_for_its_script() -> None:
    for text in TURNS + SHORT:
        assert not is_transient_chatter(text), text


def test_the_proposer_proposes_nothing_from_turns_it_cannot_read() -> None:
    for text in TURNS:
        for role in ("user", "assistant"):
            assert _keys(text, role) == [], text


def test_names_in_other_scripts_are_names() -> None:
    assert _keys("My name is अनीता") == ["user.name"]  # a vowel sign is part of the word
    proposals = RuleProposer().propose([Turn(role="user", text="My name is अनीता")])
    assert proposals[0].value == "अनीता"


def test_words_of_other_scripts_keep_keys_apart() -> None:
    """Two Hindi words differing only in a vowel sign, or two phrases whose ascii
    words agree, used to share a key: the second statement superseded the first."""
    assert _keys("I like दाल") != _keys("I like दिल")
    assert _keys("I like 寿司 and sake") != _keys("I like ラーメン and sake")
    never_emoji = _keys("Never use 絵文字 in commits")
    never_dots = _keys("Never use 句点 in commits")
    assert never_emoji != never_dots
    assert all(KEY.match(key or "") for key in never_emoji + never_dots)


def test_keys_of_latin_and_of_single_script_text_are_unchanged() -> None:
    assert slug("Zoë's café") == "zoe_s_cafe"
    assert slug("Straße") == "strae"
    for word in ("日本語", "чай"):  # a digest of the letters, as before
        assert slug(word) == "u" + hashlib.sha256(word.encode()).hexdigest()[:8]


def test_chinese_and_japanese_full_stops_end_sentences() -> None:
    assert split_sentences("私の名前は田中です。東京に住んでいます。") == [
        "私の名前は田中です。",
        "東京に住んでいます。",
    ]
    proposals = RuleProposer().propose([Turn(role="user", text="I like 寿司。毎日食べます")])
    assert [p.content for p in proposals] == ["User likes 寿司."]


LETTERS = "私猫東京。、我喜欢茶сестраμουαρέσει" + "أختيमकिताबें Ii'mlkeprfovnt.?!"
ANY_SCRIPT = st.text(
    alphabet=st.sampled_from(list(LETTERS)),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(ANY_SCRIPT)
def test_the_proposer_never_fails_and_keys_stay_well_formed(text: str) -> None:
    for role in ("user", "assistant"):
        for proposal in RuleProposer().propose([Turn(role=role, text=text)]):
            assert proposal.content.strip()
            assert proposal.key is not None
            assert KEY.match(proposal.key), proposal.key
