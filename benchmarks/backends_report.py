"""The stdout tables of ``backends.py``: each figure for SQLite and PostgreSQL side by
side with the ratio PG/SQLite (below 1: PostgreSQL is faster or smaller).

Not a test; reads the payload ``backends.py`` writes to its results file.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from common import print_table, ratio

__all__ = ["print_report"]

Row = list[object]


def _pair(label: str, sqlite: float | None, postgres: float | None) -> Row:
    both = sqlite is not None and postgres is not None
    return [label, sqlite, postgres, ratio(postgres, sqlite) if both else None]  # type: ignore[arg-type]


def _load_rows(load: Mapping[str, Any]) -> list[Row]:
    rate, apply_s = load["apply_records_per_s"], load["apply_s"]
    return [
        ["records (u-all + u-small)", load["records"], load["records"], 1.0],
        _pair("bulk load store.apply s", apply_s["sqlite"], apply_s["postgres"]),
        _pair("bulk load records/s", rate["sqlite"], rate["postgres"]),
        ["HNSW build s (once, after load)", None, load["hnsw_build_s"], None],
        ["VACUUM ANALYZE s", None, load["vacuum_analyze_s"], None],
    ]


def _recall_rows(recall: Mapping[str, Any]) -> list[Row]:
    rows = []
    for user, by in recall.items():
        for stat in ("p50_ms", "p95_ms"):
            rows.append(
                _pair(
                    f"recall {user} {stat}",
                    by["sqlite"]["recall"][stat],
                    by["postgres"]["recall"][stat],
                )
            )
        rows.append(
            _pair(
                f"recall {user} cold first ms",
                by["sqlite"]["cold_first_ms"],
                by["postgres"]["cold_first_ms"],
            )
        )
        rows.append(
            _pair(
                f"recall {user} source returned",
                by["sqlite"]["source_memory_returned"],
                by["postgres"]["source_memory_returned"],
            )
        )
    return rows


def _channel_rows(channels: Mapping[str, Any]) -> list[Row]:
    rows = []
    for user, by in channels.items():
        kinds = dict.fromkeys([*by["sqlite"], *by["postgres"]])
        for kind in kinds:
            s, p = by["sqlite"].get(kind, {}), by["postgres"].get(kind, {})
            rows.append(_pair(f"{kind} alone {user} p50_ms", s.get("p50_ms"), p.get("p50_ms")))
    return rows


def _probe_rows(probe: Mapping[str, Any]) -> list[Row]:
    rows = []
    for user, by in probe.items():
        for stat in ("p50_ms", "p95_ms"):
            rows.append(
                _pair(
                    f"vector probe {user} {stat}",
                    by["sqlite"]["latency"][stat],
                    by["postgres"]["latency"][stat],
                )
            )
        rows.append(
            _pair(
                f"vector probe {user} recall@10",
                by["sqlite"]["recall_at_10_mean"],
                by["postgres"]["recall_at_10_mean"],
            )
        )
        for key, value in by.items():
            if key.startswith("postgres_ef_search_"):
                label = f"vector probe {user} ef_search={key.rsplit('_', 1)[1]} p95_ms / recall@10"
                figure = f"{value['latency']['p95_ms']:.1f} / {value['recall_at_10_mean']:.3f}"
                rows.append([label, None, figure, None])
        rows.append(
            _pair(
                f"exact baseline {user} p50_ms",
                by["sqlite_exact_scan"]["latency"]["p50_ms"],
                by["postgres_exact_query"]["latency"]["p50_ms"],
            )
        )
        rows.append(
            _pair(
                f"exact baseline {user} recall@10",
                by["sqlite_exact_scan"]["recall_at_10_mean"],
                by["postgres_exact_query"]["recall_at_10_mean"],
            )
        )
    return rows


def _write_rows(writes: Mapping[str, Any], working: Mapping[str, Any]) -> list[Row]:
    s, p = writes["sqlite"], writes["postgres"]
    chunk = s["remember_many"]["chunk"]
    rows = [
        _pair(f"SDK remember {stat}", s["remember"].get(stat), p["remember"].get(stat))
        for stat in ("p50_ms", "p95_ms", "records_per_s")
    ]
    rows.append(
        _pair(
            f"SDK remember_many({chunk}) records/s",
            s["remember_many"]["records_per_s"],
            p["remember_many"]["records_per_s"],
        )
    )
    for name, figures in writes.items():
        if figures["error"]:
            rows.append([f"SDK writes on {name} FAILED", figures["error"][:90], None, None])
    for op in ("set", "get"):
        for stat in ("p50_ms", "p95_ms"):
            rows.append(
                _pair(
                    f"working {op} {stat} (SQLite | Redis)",
                    working["sqlite"][op][stat],
                    working["redis"][op][stat],
                )
            )
    return rows


def _memory_rows(memory: Mapping[str, Any]) -> list[Row]:
    return [
        [
            phase,
            m["seconds"],
            m["python_peak_rss_mb"],
            m["pg_rss_sum_peak_mb"],
            m["pg_pss_sum_end_mb"],
        ]
        for phase, m in memory.items()
    ]


def print_report(payload: Mapping[str, Any]) -> None:
    """The comparison table and the memory table of one size."""
    rows = [
        *_load_rows(payload["load"]),
        *_recall_rows(payload["recall"]),
        *_channel_rows(payload["channels"]),
        *_probe_rows(payload["vector_probe"]),
        *_write_rows(payload["writes"], payload["working_memory"]),
    ]
    print_table(
        f"Backends at {payload['size']:,} records of one user scope",
        ["figure", "SQLite", "PostgreSQL", "PG/SQLite"],
        rows,
    )
    print_table(
        "Peak memory per phase (MiB; PG RSS sum overcounts shared buffers, PSS does not)",
        ["phase", "seconds", "python peak RSS", "PG RSS sum peak", "PG PSS sum end"],
        _memory_rows(payload["memory"]),
    )
    check = payload["target_check"]
    print(
        f"\ntarget (1M records): PG recall p95 {check['pg_recall_p95_ms']} ms <= 25 ms: "
        f"{'met' if check['pg_recall_p95_met'] else 'NOT met'}; HNSW recall@10 "
        f"{check['hnsw_recall_at_10']} >= 0.95: {'met' if check['hnsw_recall_met'] else 'NOT met'}"
        f" (this run: {check['records']:,} records)"
    )
