"""Proposers: the deterministic rule proposer and the checked LLM proposer.

The LLM proposer is exercised against a real HTTP server on 127.0.0.1 that returns
canned chat completions: well-formed, fenced, malformed, failing, slow, and one that
tries to claim the user's authority without quoting the user.
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engram import Context, Engram
from engram.errors import ConfigError, EngramError
from engram.types import Authority, SourceKind, Turn
from engram.write.propose import LLMProposer, RuleProposer, split_sentences, to_first_person
from engram.write.propose_rules import extract, normalise_timezone, slug

T0 = datetime(2024, 5, 1, 9, 0, tzinfo=UTC)
KEY = re.compile(r"^[a-z0-9_]+(?:\.[a-z0-9_]+)+$")


def propose(text: str, role: str = "user") -> list[tuple[str, str | None, Any]]:
    proposals = RuleProposer().propose([Turn(role=role, text=text, time=T0, ref="m1")])
    return [(p.type, p.key, p.value) for p in proposals]


# -- rule proposer: what it proposes -----------------------------------------------------

PROPOSED = [
    ("I prefer tabs over spaces.", ("preference", "preference.spaces_vs_tabs", "tabs")),
    (
        "I prefer spaces over tabs because they align.",
        ("preference", "preference.spaces_vs_tabs", "spaces"),
    ),
    ("I like Python better than Java.", ("preference", "preference.java_vs_python", "Python")),
    (
        "I'd rather use Postgres than MySQL.",
        ("preference", "preference.mysql_vs_postgres", "Postgres"),
    ),
    ("I prefer to work in the morning.", ("preference", "preference.work_in_the_morning", True)),
    ("I prefer not to use ORMs.", ("preference", "preference.use_orms", False)),
    (
        "I'd rather not have meetings on Mondays.",
        ("preference", "preference.have_meetings_on_mondays", False),
    ),
    ("I really like dark mode.", ("preference", "preference.dark_mode", True)),
    (
        "I don't like emojis in commit messages.",
        ("preference", "preference.emojis_in_commit_messages", False),
    ),
    ("Please use pytest for testing.", ("preference", "preference.testing", "pytest")),
    ("Please use British spelling.", ("preference", "preference.british_spelling", True)),
    ("I prefer C# over C++.", ("preference", "preference.c_plus_plus_vs_c_sharp", "C#")),
    ("My name is Ana Lopez.", ("profile", "user.name", "Ana Lopez")),
    ("Hi, my name is bob smith and I work at Acme.", ("profile", "user.name", "Bob Smith")),
    ("Call me Sam.", ("profile", "user.name", "Sam")),
    ("My timezone is Europe/Berlin.", ("profile", "user.timezone", "Europe/Berlin")),
    ("I'm in PST.", ("profile", "user.timezone", "America/Los_Angeles")),
    ("I'm in UTC+2", ("profile", "user.timezone", "UTC+02:00")),
    ("I am based in america/new_york timezone", ("profile", "user.timezone", "America/New_York")),
    ("Please set my time zone to GMT-05:30.", ("profile", "user.timezone", "UTC-05:30")),
    ("We use Postgres for the backend.", ("decision", "project.backend", "Postgres")),
    ("We're using React for our frontend.", ("decision", "project.frontend", "React")),
    ("We switched to GitHub Actions for CI.", ("decision", "project.ci", "GitHub Actions")),
    ("Never deploy on Fridays.", ("constraint", "rule.deploy_on_fridays", "never")),
    ("Don't use tabs.", ("constraint", "rule.use_tabs", "never")),
    (
        "Do not commit secrets to the repo.",
        ("constraint", "rule.commit_secrets_to_the_repo", "never"),
    ),
    (
        "Always run the tests before pushing.",
        ("rule", "rule.run_the_tests_before_pushing", "always"),
    ),
    ("From now on, answer in French.", ("rule", "rule.answer_in_french", "always")),
    ("From now on, never use semicolons.", ("constraint", "rule.use_semicolons", "never")),
    (
        "When deploying, always notify the team.",
        ("rule", "rule.when_deploying_notify_the_team", "always"),
    ),
    ("If tests fail, never merge.", ("constraint", "rule.if_tests_fail_merge", "never")),
    ("Remember that I prefer dark mode.", ("preference", "preference.dark_mode", True)),
]


@pytest.mark.parametrize(("text", "expected"), PROPOSED, ids=[t for t, _ in PROPOSED])
def test_rule_proposer_proposes(text: str, expected: tuple[str, str, Any]) -> None:
    assert propose(text) == [expected]


NOTHING = [
    "Do you prefer tabs?",
    "Would you like me to use tabs",
    "What is my timezone?",
    "If I ever switch to Go, I'd prefer gofmt.",
    "I might prefer vim.",
    "Maybe we use Redis for caching.",
    "I used to like Java.",
    "I don't prefer tabs.",
    "My name is not Bob.",
    "Call me later.",
    "I'm in Berlin.",
    "I'm in a meeting.",
    "We don't use Docker for local dev.",
    "Never mind.",
    "Don't worry about it.",
    "I like it.",
    "ok thanks",
    "The build takes ten minutes.",
    "",
]


@pytest.mark.parametrize("text", NOTHING)
def test_rule_proposer_ignores(text: str) -> None:
    assert propose(text) == []


def test_negated_preferences_never_come_out_positive() -> None:
    for text in (
        "I don't like tabs.",
        "I do not want tabs.",
        "I hate tabs.",
        "I prefer not to use tabs.",
    ):
        assert [value for _, _, value in propose(text)] == [False], text


def test_reverse_choice_lands_on_the_same_key() -> None:
    first, second = propose("I prefer tabs over spaces."), propose("I prefer spaces to tabs.")
    assert first[0][1] == second[0][1]
    assert first[0][2] != second[0][2]
    assert propose("Always use tabs.")[0][1] == propose("Never use tabs.")[0][1]


def test_multi_sentence_turns_give_one_candidate_per_statement() -> None:
    text = "Thanks! My name is Zoë. I prefer tea over coffee. Never call me after 9pm."
    assert [kind for kind, _, _ in propose(text)] == ["profile", "preference", "constraint"]


def test_user_statements_are_explicit_with_provenance() -> None:
    turn = Turn(role="user", text="I prefer tabs over spaces.", time=T0, ref="D1:3")
    (proposal,) = RuleProposer().propose([turn])
    assert proposal.content == "User prefers tabs over spaces."
    assert proposal.authority is Authority.EXPLICIT_USER
    assert proposal.confidence >= 0.95
    assert proposal.observed_at == T0
    assert proposal.source.kind is SourceKind.CONVERSATION
    assert proposal.source.ref == "D1:3"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Your timezone is PST.", ("profile", "user.timezone", "America/Los_Angeles")),
        ("You prefer tabs over spaces.", ("preference", "preference.spaces_vs_tabs", "tabs")),
        ("You're in CET.", ("profile", "user.timezone", "Europe/Berlin")),
        ("We use Postgres for the backend.", ("decision", "project.backend", "Postgres")),
    ],
)
def test_other_speakers_give_inferences_about_the_user(
    text: str, expected: tuple[str, str, Any]
) -> None:
    (proposal,) = RuleProposer().propose([Turn(role="assistant", text=text)])
    assert (proposal.type, proposal.key, proposal.value) == expected
    assert proposal.authority is Authority.MODEL_INFERENCE
    assert proposal.confidence <= 0.7


@pytest.mark.parametrize(
    "text",
    [
        "I prefer tabs over spaces.",
        "My name is Claude.",
        "Please use pytest.",
        "I'm in PST.",
        "Never deploy on Fridays.",
        "From now on, always answer in French.",
        "You should always run the tests.",
    ],
)
def test_other_speakers_cannot_set_rules_or_speak_for_the_user(text: str) -> None:
    assert propose(text, role="assistant") == []


def test_same_statement_twice_gives_the_same_key_and_content() -> None:
    turns = [
        Turn(role="user", text="Never deploy on Fridays."),
        Turn(role="user", text="never deploy on fridays"),
    ]
    first, second = RuleProposer().propose(turns)
    assert first.key == second.key == "rule.deploy_on_fridays"


WORDS = st.sampled_from(
    "I i'd my we you prefer rather like hate use never always don't please call me name is "
    "timezone in for over than not the tabs spaces Postgres PST UTC+2 backend Bob ? . , ! "
    "from now on if when maybe".split()
)


@settings(max_examples=400, deadline=None)
@given(st.lists(WORDS, max_size=12))
def test_proposals_always_have_content_and_stable_slug_keys(words: list[str]) -> None:
    text = " ".join(words)
    for proposal in RuleProposer().propose([Turn(role="user", text=text)]):
        assert proposal.content.strip()
        assert proposal.content.endswith(".")
        assert proposal.key is not None
        assert KEY.match(proposal.key)
    assert propose(text) == propose(text)


# -- rule helpers ---------------------------------------------------------------------


def test_split_sentences_spares_abbreviations_and_decimals() -> None:
    text = "I use Python 3.12, e.g. for scripts. Call me Dr. Who! Is it ok?\nNew line"
    assert split_sentences(text) == [
        "I use Python 3.12, e.g. for scripts.",
        "Call me Dr. Who!",
        "Is it ok?",
        "New line",
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Our Backend", "backend"),
        ("the iOS app!", "ios_app"),
        ("Zoë's café", "zoe_s_cafe"),
        ("C++", "c_plus_plus"),
        ("???", ""),
        (
            "one two three four five six seven eight nine",
            "one_two_three_four_five_six_seven_eight_",
        ),
    ],
)
def test_slug(text: str, expected: str) -> None:
    assert slug(text).startswith(expected) if expected.endswith("_") else slug(text) == expected
    assert re.fullmatch(r"[a-z0-9_]*", slug(text))


def test_slug_of_other_scripts_is_a_stable_digest() -> None:
    assert re.fullmatch(r"u[0-9a-f]{8}", slug("日本語"))
    assert slug("日本語") == slug("日本語") != slug("中文")
    assert propose("I prefer 日本語.")[0][1] == "preference." + slug("日本語")


def test_typographic_apostrophes_and_odd_spacing_are_understood() -> None:
    assert propose("I\u2019m   in PST.") == [("profile", "user.timezone", "America/Los_Angeles")]
    assert propose("Don\u2019t use tabs!") == [("constraint", "rule.use_tabs", "never")]


@pytest.mark.parametrize(
    ("raw", "zone"),
    [
        ("Europe/Berlin", "Europe/Berlin"),
        ("europe/berlin", "Europe/Berlin"),
        ("PST", "America/Los_Angeles"),
        ("Pacific Standard Time", "America/Los_Angeles"),
        ("UTC", "UTC"),
        ("UTC+2", "UTC+02:00"),
        ("gmt -05:30", "UTC-05:30"),
        ("UTC+05:45", "UTC+05:45"),
        ("UTC+15", None),
        ("UTC+02:17", None),
        ("Berlin", None),
        ("and/or", None),
    ],
)
def test_normalise_timezone(raw: str, zone: str | None) -> None:
    assert normalise_timezone(raw) == zone


def test_to_first_person() -> None:
    assert to_first_person("Your name is Ana") == "my name is Ana"
    assert to_first_person("You\u2019re in CET") == "I'm in CET"
    assert to_first_person("Yours truly") is None
    assert extract("Is it true that I prefer tabs?") is None


# -- LLM proposer against a real local server ------------------------------------------------


@dataclass
class Endpoint:
    """What the local server answers, and what it was asked."""

    url: str = ""
    status: int = 200
    body: bytes = b""
    delay: float = 0.0
    requests: list[tuple[str, dict[str, str], Any]] = field(default_factory=list)

    def reply(self, content: str) -> None:
        self.body = json.dumps(
            {"choices": [{"message": {"role": "assistant", "content": content}}]}
        ).encode()

    def reply_items(self, items: list[Any]) -> None:
        self.reply(json.dumps(items))


@pytest.fixture
def endpoint() -> Iterator[Endpoint]:
    state = Endpoint()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            state.requests.append((self.path, dict(self.headers), json.loads(body)))
            time.sleep(state.delay)
            try:
                self.send_response(state.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(state.body)))
                self.end_headers()
                self.wfile.write(state.body)
            except (BrokenPipeError, ConnectionResetError):
                pass

        def log_message(self, format: str, *args: Any) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    yield state
    server.shutdown()
    server.server_close()


TURNS = [
    Turn(role="user", text="Hi! I  PREFER tabs over spaces.", time=T0, ref="m1"),
    Turn(role="assistant", text="Noted. Your timezone is probably Europe/Berlin.", ref="m2"),
    Turn(role="user", text="Yes. We use Postgres for the backend.", ref="m3"),
]
TABS = {
    "content": "User prefers tabs over spaces.",
    "type": "preference",
    "key": "preference.indentation",
    "value": "tabs",
    "stated_by_user": True,
    "evidence": "i prefer tabs over   spaces",
    "turn": 0,
    "confidence": 0.95,
}


def test_llm_verified_quote_gives_explicit_user_and_sends_a_proper_request(
    endpoint: Endpoint,
) -> None:
    endpoint.reply("Here you go:\n```json\n" + json.dumps([TABS]) + "\n```")
    (proposal,) = LLMProposer(endpoint.url + "/", "tiny", api_key="k-123").propose(TURNS)
    assert proposal.authority is Authority.EXPLICIT_USER
    assert proposal.confidence == 0.95
    assert (proposal.type, proposal.key, proposal.value) == (
        "preference",
        "preference.indentation",
        "tabs",
    )
    assert proposal.source.ref == "m1"
    assert proposal.observed_at == T0
    path, headers, body = endpoint.requests[0]
    assert path == "/v1/chat/completions"
    assert headers["Authorization"] == "Bearer k-123"
    assert body["model"] == "tiny"
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert "I  PREFER tabs" in body["messages"][1]["content"]


@pytest.mark.parametrize(
    "claim",
    [
        {"evidence": "I prefer tabs, always and forever"},  # not verbatim
        {
            "evidence": "Your timezone is probably Europe/Berlin",
            "content": "User's timezone is Europe/Berlin.",
        },
        {"evidence": "I"},  # too short to prove anything
        {
            "evidence": "We use Postgres for the backend",
            "content": "User prefers tabs over spaces.",
        },
        {"stated_by_user": "yes"},  # not the boolean true
        {"evidence": None},
    ],
    ids=[
        "not-verbatim",
        "assistant-turn",
        "too-short",
        "unrelated-quote",
        "not-bool",
        "no-evidence",
    ],
)
def test_llm_cannot_claim_the_users_authority_without_a_user_quote(
    endpoint: Endpoint, claim: dict[str, Any]
) -> None:
    endpoint.reply_items([{**TABS, "confidence": 0.99, **claim}])
    (proposal,) = LLMProposer(endpoint.url, "tiny").propose(TURNS)
    assert proposal.authority is Authority.MODEL_INFERENCE
    assert proposal.confidence <= 0.7


def test_llm_malformed_items_are_dropped_and_keys_normalised(endpoint: Endpoint) -> None:
    good = {
        "content": "The team uses Postgres for the backend.",
        "type": "Decision",
        "key": "Project.Back End",
        "value": "Postgres",
        "turn": 2,
    }
    endpoint.reply_items(
        [
            "just a string",
            {"type": "fact"},
            {"content": "   ", "type": "fact"},
            {"content": "ok", "type": "not a type!"},
            {"content": "ok", "key": 42},
            {"content": "ok", "confidence": "high"},
            {"content": "ok", "confidence": True},
            good,
        ]
    )
    (proposal,) = LLMProposer(endpoint.url, "tiny").propose(TURNS)
    assert (proposal.type, proposal.key, proposal.value) == (
        "decision",
        "project.back_end",
        "Postgres",
    )
    assert proposal.authority is Authority.MODEL_INFERENCE
    assert proposal.confidence == 0.6
    assert proposal.source.ref == "m3"


def test_llm_accepts_an_object_wrapping_the_list_and_empty_answers(endpoint: Endpoint) -> None:
    endpoint.reply(json.dumps({"memories": [{"content": "User likes tea.", "type": "preference"}]}))
    assert [p.content for p in LLMProposer(endpoint.url, "tiny").propose(TURNS)] == [
        "User likes tea."
    ]
    endpoint.reply("[]")
    assert LLMProposer(endpoint.url, "tiny").propose(TURNS) == []


@pytest.mark.parametrize(
    ("status", "body", "message"),
    [
        (200, b'{"choices": [{"message": {"content": "[{\\"content\\": "}}]}', "no JSON list"),
        (200, b'{"choices": [{"message": {"content": "Sorry, I cannot help."}}]}', "no JSON list"),
        (200, b'{"choices": []}', "choices"),
        (200, b'{"choices": [{"message": {"content": null}}]}', "not text"),
        (200, b"<html>oops</html>", "not JSON"),
        (500, b'{"error": "boom"}', "HTTP 500"),
        (401, b'{"error": "bad key"}', "HTTP 401"),
    ],
    ids=["malformed-json", "prose", "no-choices", "null-content", "html", "http-500", "http-401"],
)
def test_llm_failures_raise_engram_error(
    endpoint: Endpoint, status: int, body: bytes, message: str
) -> None:
    endpoint.status, endpoint.body = status, body
    with pytest.raises(EngramError, match=message) as raised:
        LLMProposer(endpoint.url, "tiny", api_key="k-secret").propose(TURNS)
    assert "k-secret" not in str(raised.value)


def test_llm_timeout_and_unreachable_endpoint_raise_engram_error(endpoint: Endpoint) -> None:
    endpoint.delay = 0.5
    endpoint.reply("[]")
    late = r"did not answer within 0\.05 s|could not be reached \(timed out\)"  # whichever first
    with pytest.raises(EngramError, match=late):
        LLMProposer(endpoint.url, "tiny", timeout=0.05).propose(TURNS)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    with pytest.raises(EngramError, match="could not be reached"):
        LLMProposer(f"http://127.0.0.1:{closed_port}/v1", "tiny", timeout=2).propose(TURNS)


def test_llm_sends_nothing_for_no_turns(endpoint: Endpoint) -> None:
    assert LLMProposer(endpoint.url, "tiny").propose([]) == []
    assert endpoint.requests == []


@pytest.mark.parametrize(
    ("url", "model", "timeout"),
    [
        ("file:///etc/passwd", "m", 1.0),
        ("", "m", 1.0),
        ("http://h/v1", "", 1.0),
        ("http://h/v1", "m", 0),
    ],
)
def test_llm_rejects_bad_configuration(url: str, model: str, timeout: float) -> None:
    with pytest.raises(ConfigError):
        LLMProposer(url, model, timeout=timeout)


def test_llm_items_the_store_would_refuse_are_dropped_not_the_whole_observe(
    endpoint: Endpoint,
) -> None:
    """A model's item holding a NUL (PostgreSQL's text cannot) or a value past the
    limits is malformed output: it is dropped, and ``observe`` writes the others rather
    than refusing the caller's turns, which hold neither."""
    deep: Any = "x"
    for _ in range(100):
        deep = [deep]
    endpoint.reply_items(
        [
            {"content": "User likes\x00 tea.", "type": "preference"},
            {"content": "User likes green tea.", "type": "preference", "value": deep},
            {"content": "The team uses Postgres for the backend.", "type": "decision", "turn": 2},
        ]
    )
    proposals = LLMProposer(endpoint.url, "tiny").propose(TURNS)
    assert [p.content for p in proposals] == [
        "User likes green tea.",
        "The team uses Postgres for the backend.",
    ]
    assert proposals[0].value is None
    ctx = Context(tenant_id="acme", user_id="u1")
    with Engram.open("sqlite://:memory:", embedder="hashing") as mem:
        written = mem.observe(ctx, TURNS, proposer=LLMProposer(endpoint.url, "tiny"), now=T0)
        assert {r.record.content for r in written if r.record} == {
            "User likes green tea.",
            "The team uses Postgres for the backend.",
        }


def test_llm_keys_are_cut_to_what_remember_takes(endpoint: Endpoint) -> None:
    """A model's key of many long dotted parts is cut to its leading parts within a
    key's 200 characters, so the fact is still written, under a well-formed key."""
    long_key = ".".join(f"section {n} of the user's very detailed settings tree" for n in range(9))
    endpoint.reply_items([{"content": "User likes green tea.", "type": "preference",
                           "key": long_key}])  # fmt: skip
    (proposal,) = LLMProposer(endpoint.url, "tiny").propose(TURNS)
    assert proposal.key is not None
    assert 100 < len(proposal.key) <= 200
    assert long_key.split(".")[0].split()[0] in proposal.key.split(".")[0]
    ctx = Context(tenant_id="acme", user_id="u1")
    with Engram.open("sqlite://:memory:", embedder="hashing") as mem:
        written = mem.observe(ctx, TURNS, proposer=LLMProposer(endpoint.url, "tiny"), now=T0)
        assert [r.record.key for r in written if r.record] == [proposal.key]
