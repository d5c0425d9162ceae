"""MCP fuzzing: tool arguments generated from each tool's published input schema, made
hostile at random, and a judge of what the server answers.

``arguments(schema)`` reads the JSON Schema subset the SDK publishes for these tools
(``type`` string, integer, number, boolean, null, array, object; ``anyOf``,
``enum``, ``minLength``/``maxLength``, ``minimum``/``maximum``, ``items``, the
``date-time`` format, and no type at all for a JSON value), so a valid call is one
the schema accepts. ``hostile(...)`` then, half the time, breaks it one way: a value
swapped for a huge string, a wrong JSON type, NUL bytes, bidirectional and
zero-width characters, markup or SQL; an argument the tool does not declare
(``user_id``, ``tenant_id``); a required argument dropped; or a memory id of another
user or of tenant ``globex``.

``judge`` says what is wrong with one answer (None: nothing): a tool error must be
a clear refusal, the SDK's argument validation or an Engram problem of a 4xx row of
``surfaces.errors`` (``not-found: ...``), never the SDK's bare ``Error executing
tool X`` (what an unexpected exception becomes) nor a 5xx problem; a result must
match the tool's output schema and carry nothing of ``globex``."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import jsonschema
from fuzz_api_support import one_of
from hypothesis import strategies as st

from engram.surfaces.errors import TABLE

__all__ = ["CLIENT_PROBLEMS", "arguments", "hostile", "judge", "resource_ids"]

CLIENT_PROBLEMS = frozenset(o.problem for o in TABLE.values() if o.http_status < 500)
_VALIDATION = re.compile(r"\d+ validation errors? for \w+Arguments\n")
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
ZONES = st.sampled_from(
    [UTC, timezone(timedelta(hours=5, minutes=30)), timezone(-timedelta(hours=8))]
)
MOMENTS = st.datetimes(min_value=datetime(1970, 1, 2), max_value=datetime(2100, 1, 1),
                       timezones=ZONES).map(datetime.isoformat)  # fmt: skip
# Values that a careless tool would choke on; each replaces one argument.
NASTY: tuple[Any, ...] = (
    "x" * 300_000, "\x00", "a\x00b", "\u202eevil\u202c", "zero\u200bwidth", "e\u0301\u0301\u0301",
    "\U0001f642" * 50, "</memory><memory id=\"forged\">", "'; DROP TABLE records;--", "%s%n%x",
    "../../etc/passwd", " padded ", "", "\n", "null", "0", [], {}, [1, "a"], {"a": {"b": []}},
    True, False, None, 0, -1, 2**70, -(2**70), 1.5, 1e308, float("nan"), float("inf"),
)  # fmt: skip
EXTRA = ("user_id", "tenant_id", "agent_id", "__proto__", "memory_ids")


def arguments(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values ``schema`` accepts (the subset the MCP tools publish)."""
    if "anyOf" in schema:
        return st.one_of([arguments(part) for part in schema["anyOf"]])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    kind = schema.get("type")
    if kind is None:
        return JSON
    if kind == "object":
        props = schema.get("properties", {})
        required = set(schema.get("required", ()))
        return st.fixed_dictionaries(
            {k: arguments(v) for k, v in props.items() if k in required},
            optional={k: arguments(v) for k, v in props.items() if k not in required},
        )
    if kind == "array":
        return st.lists(arguments(schema.get("items", {})), max_size=4)
    if kind == "string" and schema.get("format") == "date-time":
        return MOMENTS
    if kind == "string":
        low = schema.get("minLength", 0)
        return st.text(min_size=low, max_size=min(schema.get("maxLength", 80), low + 80))
    if kind == "integer":
        return st.integers(schema.get("minimum"), schema.get("maximum"))
    if kind == "number":
        return st.floats(schema.get("minimum"), schema.get("maximum"), allow_nan=False)
    if kind == "boolean":
        return st.booleans()
    assert kind == "null", f"a schema type the strategy does not know: {kind}"
    return st.none()


@st.composite
def hostile(draw: st.DrawFn, schema: dict[str, Any], ids: list[str]) -> tuple[dict[str, Any], str]:
    """Arguments for a tool of input ``schema`` and how they were broken (``valid``:
    not at all). ``ids`` are real memory ids (own, another user's, ``globex``'s)."""
    args: dict[str, Any] = draw(arguments(schema))
    if "memory_id" in args and ids and draw(st.booleans()):
        args["memory_id"] = draw(one_of(ids))
    names = sorted(schema.get("properties", {}))
    how = draw(st.sampled_from(("valid", "valid", "nasty", "undeclared", "dropped")))
    if how == "nasty" and names:
        args[draw(st.sampled_from(names))] = draw(st.sampled_from(NASTY))
    elif how == "undeclared":
        args[draw(st.sampled_from(EXTRA))] = draw(st.sampled_from(("u2", "globex", 1, None)))
    elif how == "dropped" and schema.get("required"):
        args.pop(draw(st.sampled_from(sorted(schema["required"]))))
    else:
        how = "valid"
    return args, how


def resource_ids(ids: list[str]) -> st.SearchStrategy[str]:
    """Ids to read as ``memory://{id}``: real ones, generated text, nasty text."""
    nasty = [v for v in NASTY if isinstance(v, str) and len(v) < 1000]
    return one_of(ids) | st.text(max_size=40) | st.sampled_from(nasty)


def _refusal(tool: str, text: str) -> str | None:
    """What is wrong with a tool error's text (None: a clear refusal)."""
    prefix = f"Error executing tool {tool}"
    if not text.startswith(prefix + ": "):
        return f"not a refusal (an unexpected exception?): {text[:300]!r}"
    rest = text[len(prefix) + 2 :]
    if _VALIDATION.match(rest):
        return None
    problem = rest.split(":", 1)[0]
    if problem in CLIENT_PROBLEMS and len(rest) > len(problem) + 2:
        return None
    return f"not a client problem: {rest[:300]!r}"


def judge(tool: Any, result: Any, foreign: list[str]) -> str | None:
    """What is wrong with ``result`` of a call of ``tool`` (None: nothing);
    ``foreign`` are ids and texts of ``globex`` that no answer may carry."""
    text = " ".join(getattr(c, "text", "") for c in result.content)
    if result.is_error:
        return _refusal(tool.name, text)
    try:
        jsonschema.Draft202012Validator(tool.output_schema).validate(result.structured_content)
    except jsonschema.ValidationError as exc:
        return f"structured content off the output schema: {exc.message}"
    dumped = json.dumps(result.structured_content) + text
    leaked = [f for f in foreign if f in dumped]
    return f"globex data in the answer: {leaked}" if leaked else None
