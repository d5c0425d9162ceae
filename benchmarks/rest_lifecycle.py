"""What the lifecycle wiring costs on the REST app, in one run on one SQLite file.

* **export**: ``GET /v1/export`` (the JSON rows, the baseline) against
  ``GET /v1/export?format=jsonl`` (the export file, streamed) for one user of
  ``--records`` memories, both through the ASGI app in process (``TestClient``),
  and the SDK's ``export_jsonl`` to memory (what the route adds to it);
* **import**: ``POST /v1/import`` of those rows as JSON (the baseline) against the
  export file as ``application/x-ndjson``, each round into a new user (a store that
  already holds them would skip every row);
* **app start**: ``create_app`` without the MCP endpoint (the baseline) and with
  it mounted at ``/mcp`` (imports warm: what a worker pays per app), and the MCP
  SDK's first import in a fresh interpreter (what ``engram serve`` pays once).

Medians and 95th percentiles, each as a ratio of its baseline. The hashing
embedder keeps the model out of the figures.

    PYTHONPATH=src .venv/bin/python benchmarks/rest_lifecycle.py --records 1000 --rounds 5
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from common import machine, print_table, ratio, summarize, temp_dir, write_results
from engram import Context, Engram
from engram.surfaces.rest import KeyFile, KeyRing, RestSettings, create_app

RESULTS = Path(__file__).resolve().parent / "results" / "rest_lifecycle.json"
TENANT = "acme"


def _ms(call: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    result = call()
    return (time.perf_counter() - start) * 1000, result


def _fill(mem: Engram, records: int) -> None:
    ctx = Context(tenant_id=TENANT, user_id="u0", agent_id="coder")
    items = [{"content": f"Service {i} listens on port {9000 + i} behind proxy {i % 13}.",
              "type": "fact"} for i in range(records)]  # fmt: skip
    mem.remember_many(ctx, items)


def _exports(client: TestClient, rounds: int) -> tuple[dict[str, list[float]], bytes, Any]:
    times: dict[str, list[float]] = {"json": [], "jsonl": []}
    query = "user_id=u0&agent_id=coder"
    body: Any = None
    content = b""
    for _ in range(rounds):
        took, answer = _ms(lambda: client.get(f"/v1/export?{query}"))
        assert answer.status_code == 200, answer.text
        times["json"].append(took)
        body = answer.json()
        took, answer = _ms(lambda: client.get(f"/v1/export?{query}&format=jsonl"))
        assert answer.status_code == 200, answer.text
        times["jsonl"].append(took)
        content = answer.content
    return times, content, body


def _imports(client: TestClient, rows: Any, content: bytes, rounds: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {"json": [], "jsonl": []}
    for n in range(rounds):
        body = {"user_id": f"j{n}", "agent_id": "coder", "rows": rows["rows"]}
        took, answer = _ms(lambda: client.post("/v1/import", json=body))  # noqa: B023
        assert answer.status_code == 200, answer.text
        assert answer.json()["imported"], answer.text
        times["json"].append(took)
        path = f"/v1/import?user_id=l{n}&agent_id=coder&rehome=true"
        headers = {"Content-Type": "application/x-ndjson"}
        took, answer = _ms(lambda: client.post(path, content=content, headers=headers))  # noqa: B023
        assert answer.status_code == 200, answer.text
        assert answer.json()["imported"], answer.text
        times["jsonl"].append(took)
    return times


def _app_starts(mem: Engram, ring: KeyRing, rounds: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {"without_mcp": [], "with_mcp": []}
    create_app(mem, ring)  # warm the imports
    bare = RestSettings(mcp_path=None)
    for _ in range(rounds):
        times["without_mcp"].append(_ms(lambda: create_app(mem, ring, bare))[0])
        times["with_mcp"].append(_ms(lambda: create_app(mem, ring))[0])
    return times


def _cold_import() -> float:
    code = "import time; t = time.perf_counter(); import engram.surfaces.mcp.http; " \
           "print((time.perf_counter() - t) * 1000)"  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)  # fmt: skip
    return float(out.stdout.strip())


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1000, help="memories of the exported user")
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds of each step")
    parser.add_argument("--out", type=Path, default=RESULTS, help="results file")
    args = parser.parse_args(argv)
    with temp_dir("engram-bench-rest-lifecycle") as tmp:
        mem = Engram.open(f"sqlite:///{tmp / 'e.db'}", embedder="hashing")
        try:
            key = KeyFile(tmp / "keys.json").create(TENANT, admin=True)[1]
            ring = KeyRing(path=tmp / "keys.json")
            _fill(mem, args.records)
            sdk = [_ms(lambda: mem.export_jsonl(Context(TENANT, "u0", "coder"), _Sink()))[0]
                   for _ in range(args.rounds)]  # fmt: skip
            with TestClient(create_app(mem, ring)) as client:
                client.headers["Authorization"] = f"Bearer {key}"
                exports, content, rows = _exports(client, args.rounds)
                imports = _imports(client, rows, content, args.rounds)
            starts = _app_starts(mem, ring, args.rounds * 4)
        finally:
            mem.close()
    cold = [_cold_import() for _ in range(3)]
    results = {
        "export": {
            "json": summarize(exports["json"]),
            "jsonl": summarize(exports["jsonl"]),
            "sdk_export_jsonl": summarize(sdk),
        },
        "import": {"json": summarize(imports["json"]), "jsonl": summarize(imports["jsonl"])},
        "app_start": {k: summarize(v) for k, v in starts.items()},
        "mcp_cold_import": summarize(cold),
        "file_bytes": len(content),
    }
    _report(results, args.records)
    write_results(args.out, {"machine": machine(sys.argv), "records": args.records,
                             "rounds": args.rounds, "results": results})  # fmt: skip


class _Sink:
    """A text sink for ``export_jsonl`` (keeps nothing)."""

    def write(self, text: str) -> int:
        return len(text)

    def writelines(self, lines: Any) -> None:
        for _ in lines:
            pass


def _report(results: dict[str, Any], records: int) -> None:
    rows = []
    for step, baseline in (("export", "json"), ("import", "json"), ("app_start", "without_mcp")):
        base = results[step][baseline]["p50_ms"]
        for name, summary in results[step].items():
            rows.append((step, name, summary["p50_ms"], summary["p95_ms"],
                         ratio(summary["p50_ms"], base)))  # fmt: skip
    cold = results["mcp_cold_import"]
    rows.append(("mcp first import", "fresh interpreter", cold["p50_ms"], cold["p95_ms"], None))
    print_table(f"REST lifecycle wiring, {records} records (ms; ratio of p50 to the baseline)",
                ("step", "form", "p50", "p95", "ratio"), rows)  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1:])
