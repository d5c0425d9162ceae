"""The parser tree: every command explains itself, optional modules plug in by name,
root options survive a command that declares them again, and the exit codes are
distinct per error class and documented."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from engram import errors
from engram.cli import EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_NO, EXIT_USAGE
from engram.cli.registry import OPTIONAL, build_parser
from engram.surfaces.errors import TABLE

DOCS = Path(__file__).resolve().parents[3] / "docs" / "cli.md"


def _walk(
    parser: argparse.ArgumentParser, path: str = "engram"
) -> Iterator[tuple[str, argparse.ArgumentParser, str | None]]:
    """(command path, its parser, the help its parent lists it with), depth first."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help for choice in action._choices_actions}
            for name, sub in action.choices.items():
                yield f"{path} {name}", sub, helps.get(name)
                yield from _walk(sub, f"{path} {name}")


def test_every_command_and_subcommand_has_help_text() -> None:
    commands = list(_walk(build_parser()))
    assert len(commands) >= 25  # the built-ins alone
    missing = [path for path, _, text in commands if not (text or "").strip()]
    assert missing == []


def test_every_option_of_every_command_has_help_text() -> None:
    silent = [
        f"{path} {action.option_strings or action.dest}"
        for path, parser, _ in _walk(build_parser())
        for action in parser._actions
        if not isinstance(action, (argparse._HelpAction, argparse._SubParsersAction))
        and not (action.help or "").strip()
    ]
    assert silent == []


def test_the_commands_of_the_issue_are_all_there() -> None:
    paths = {path for path, _, _ in _walk(build_parser())}
    wanted = {
        "remember",
        "recall",
        "list",
        "get",
        "history",
        "correct",
        "retract",
        "expire",
        "forget",
        "erase",
        "export",
        "import",
        "index rebuild",
        "migrate",
        "audit verify",
        "quickstart",
        "working set",
        "working get",
        "working list",
        "working delete",
        "working clear",
        "mcp",
        "eval golden",
    }
    assert {f"engram {w}" for w in wanted} <= paths


def test_every_read_command_has_json_output() -> None:
    reads = (
        "get",
        "list",
        "history",
        "recall",
        "working get",
        "working list",
        "audit verify",
        "index rebuild",
        "migrate",
        "import",
        "remember",
        "forget",
        "erase",
    )
    parsers = {path: parser for path, parser, _ in _walk(build_parser())}
    without = [r for r in reads if "--json" not in parsers[f"engram {r}"]._option_string_actions]
    assert without == []


def _plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, body: str) -> str:
    (tmp_path / f"{name}.py").write_text(body)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, name, raising=False)
    return name


_REDECLARES_DB = """
def add_command(commands):
    p = commands.add_parser("plug", help="a plugin command")
    p.add_argument("--db", default="sqlite:///plugin-default.db", help="store URL")
    p.set_defaults(func=lambda args: 0)
"""


def test_a_root_option_a_plugin_declares_again_is_never_lost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = _plugin(tmp_path, monkeypatch, "engram_cli_plugin_db", _REDECLARES_DB)
    parser = build_parser(((name, "add_command"),))
    assert parser.parse_args(["--db", "sqlite:///root.db", "plug"]).db == "sqlite:///root.db"
    assert parser.parse_args(["plug", "--db", "sqlite:///after.db"]).db == "sqlite:///after.db"
    assert parser.parse_args(["plug"]).db == "sqlite:///engram.db"  # the root's default


def test_an_option_that_only_shares_a_root_name_keeps_its_default() -> None:
    golden = build_parser().parse_args(["eval", "golden"])
    assert golden.embedder_name == "hashing"  # eval's --embedder has a destination of its own
    assert golden.embedder == "local"


def test_an_absent_optional_module_is_skipped_quietly() -> None:
    parser = build_parser((("engram.surfaces.not_merged_yet.cli", "add_command"),))
    assert parser.epilog is None
    assert parser.parse_args(["migrate"]).command == "migrate"


def test_a_missing_third_party_library_skips_the_module_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = "import no_such_library_for_engram_tests\n\ndef add_command(commands): ...\n"
    name = _plugin(tmp_path, monkeypatch, "engram_cli_plugin_lib", body)
    parser = build_parser(((name, "add_command"),))
    assert "no_such_library_for_engram_tests" in (parser.epilog or "")
    assert name in parser.format_help()


@pytest.mark.parametrize(
    "body",
    [
        "import engram.no_such_module\n",
        "from engram.errors import NoSuchError\n",
        "raise RuntimeError('a bug at import')\n",
    ],
)
def test_a_bug_in_an_optional_module_is_not_swallowed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str
) -> None:
    name = _plugin(tmp_path, monkeypatch, "engram_cli_plugin_bug", body)
    with pytest.raises((ImportError, RuntimeError)):
        build_parser(((name, "add_command"),))


def test_the_optional_modules_that_exist_here_register_their_commands() -> None:
    loaded = {module for module, _ in OPTIONAL if _importable(module)}
    paths = {path for path, _, _ in _walk(build_parser())}
    assert "engram.eval.cli" in loaded
    assert "engram eval" in paths
    assert "engram.surfaces.mcp.cli" in loaded
    assert "engram mcp" in paths


def _importable(module: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


def _documented_codes() -> dict[int, str]:
    rows = re.findall(r"^\| (\d+) \| (.+?) \|", DOCS.read_text(), flags=re.MULTILINE)
    return {int(code): text for code, text in rows}


def test_each_error_class_has_its_own_exit_code_except_bad_input() -> None:
    by_code: dict[int, set[type[BaseException]]] = {}
    for cls, row in TABLE.items():
        by_code.setdefault(row.exit_code, set()).add(cls)
    for code, classes in by_code.items():
        roots = {c for c in classes if not any(c is not o and issubclass(c, o) for o in classes)}
        assert len(roots) == 1, f"exit {code} means several unrelated errors: {classes}"
    assert by_code[EXIT_USAGE] == {errors.InvalidArgument, errors.IncompleteIdentity}
    reserved = {0, EXIT_NO, EXIT_INTERRUPTED}
    assert not reserved & set(by_code)
    assert TABLE[errors.EngramError].exit_code == EXIT_INTERNAL


def test_docs_list_every_exit_code() -> None:
    documented = _documented_codes()
    used = {row.exit_code for row in TABLE.values()} | {
        0,
        EXIT_NO,
        EXIT_USAGE,
        EXIT_INTERNAL,
        EXIT_INTERRUPTED,
    }
    assert used == set(documented)
    for cls, row in TABLE.items():
        assert cls.__name__ in documented[row.exit_code], (cls.__name__, row.exit_code)


def test_docs_describe_every_command() -> None:
    text = "\n".join(p.read_text() for p in DOCS.parent.glob("*.md"))
    for path, _, _ in _walk(build_parser()):
        if path.startswith("engram eval "):
            continue  # eval's suites are documented in docs/evaluation.md
        assert f"`{path}" in text, f"{path} is in no docs/*.md (docs/cli.md lists them)"
