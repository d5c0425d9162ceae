"""Bad input gets a clear ``InvalidArgument`` and loses nothing, on both backends."""

from __future__ import annotations

from datetime import timedelta

import pytest

from engram import ConfigError, Context, Engram, InvalidArgument
from engram.working import WorkingConfig

CTX = Context(tenant_id="acme", user_id="u1", session_id="s1")

BAD_KEYS = [
    ("", "1-200"), (" step", "whitespace"), ("step\n", "whitespace"), ("a\u200bb", "printable"),
    ("k" * 201, "1-200"), (7, "string"), (None, "string"),
]  # fmt: skip
BAD_VALUES = [
    (float("nan"), "finite"), ({1: "x"}, "non-string key"), (object(), "must be JSON"),
    ("x" * 20_000, "16384"), ("\ud800", "surrogate"), (2**64, "64-bit"),
]  # fmt: skip
BAD_TTLS = [
    (0, "1 ms"), (-5, "1 ms"), (timedelta(days=8), "168 hours"), (float("inf"), "1 ms"),
    (float("nan"), "1 ms"), (True, "timedelta"), ("60", "timedelta"), (0.0004, "1 ms"),
]  # fmt: skip


@pytest.mark.parametrize(("key", "message"), BAD_KEYS)
def test_a_bad_key_is_refused(wmem: Engram, key: object, message: str) -> None:
    wm = wmem.working(CTX)
    wm.set("kept", 1)
    for call in (lambda: wm.set(key, 1), lambda: wm.get(key), lambda: wm.delete(key)):  # type: ignore[arg-type]
        with pytest.raises(InvalidArgument, match=message):
            call()
    assert [i.key for i in wm.list()] == ["kept"]


@pytest.mark.parametrize(("value", "message"), BAD_VALUES)
def test_a_bad_value_is_refused_and_the_old_one_kept(
    wmem: Engram, value: object, message: str
) -> None:
    wm = wmem.working(CTX)
    wm.set("step", "old")
    with pytest.raises(InvalidArgument, match=message):
        wm.set("step", value)
    item = wm.get("step")
    assert item is not None
    assert item.value == "old"


@pytest.mark.parametrize(("ttl", "message"), BAD_TTLS)
def test_a_bad_ttl_is_refused(wmem: Engram, ttl: object, message: str) -> None:
    wm = wmem.working(CTX)
    with pytest.raises(InvalidArgument, match=message):
        wm.set("step", 1, ttl=ttl)  # type: ignore[arg-type]
    assert wm.get("step") is None


def test_values_round_trip_as_canonical_json(wmem: Engram) -> None:
    wm = wmem.working(CTX)
    value = {"list": (1, 2.5, None, True), "text": "naïve 界", "nested": {"a": [{}]}}
    wm.set("v", value)
    item = wm.get("v")
    assert item is not None
    assert item.value == {"list": [1, 2.5, None, True], "text": "naïve 界", "nested": {"a": [{}]}}


def test_the_value_limit_is_configurable(open_working_mem: object) -> None:
    mem = open_working_mem(max_value_bytes=10)  # type: ignore[operator]
    wm = mem.working(CTX)
    wm.set("k", "12345678")  # 10 bytes with its quotes
    with pytest.raises(InvalidArgument, match="at most 10"):
        wm.set("k", "123456789")


@pytest.mark.parametrize(
    "fields",
    [{"default_ttl_hours": 0}, {"default_ttl_hours": 200}, {"max_ttl_hours": float("inf")},
     {"max_key_chars": 0}, {"max_value_bytes": 10**6}, {"max_items": 0},
     {"redis_prefix": "a:b"}, {"redis_prefix": "*"}, {"redis_timeout_seconds": 0}],
)  # fmt: skip
def test_a_bad_working_config_is_refused(fields: dict[str, object]) -> None:
    with pytest.raises(ConfigError, match="working"):
        WorkingConfig(**fields)  # type: ignore[arg-type]


@pytest.mark.parametrize("working", ["postgres://x", "memory", 42])
def test_a_bad_working_argument_is_refused(working: object) -> None:
    with pytest.raises(ConfigError, match="working"):
        Engram.open("sqlite://:memory:", embedder="hashing", working=working)  # type: ignore[arg-type]
