"""``Maintenance`` on PostgreSQL: traces under their visibility, erasure lookups and
evidence, audit pseudonyms, the vector model, and index rebuilds."""

from __future__ import annotations

from typing import Any

import numpy as np
import psycopg
import pytest
from pg_records import MODEL, later, make_record, vector_for

from engram.store import contract
from engram.store.audit import AuditEntry
from engram.store.postgres import PostgresConfig, PostgresStore
from engram.store.predicate import Subject, Tenant, Visibility
from engram.store.traces import TraceRow

VIS = Visibility("acme", "u1", "coder", ("session:s1", None, None, None))
ACTIVE = ("active",)


def test_traces_are_read_only_under_their_visibility_and_kept_per_tenant(store: Any) -> None:
    record = make_record("traced")
    rows = [TraceRow.of(VIS, f"t{i}", later(i), {"selected": [record.id]}) for i in range(4)]
    store.put_traces(rows, keep=3)
    assert store.get_trace(VIS, "t0") is None  # retention kept the newest three
    assert store.get_trace(VIS, "t3") is not None
    other_agent = Visibility("acme", "u1", "a2", VIS.named)
    assert store.get_trace(other_agent, "t3") is None
    assert store.delete_traces_naming(Tenant("acme"), [record.id]) == 3
    store.put_traces([TraceRow.of(VIS, "t9", later(9), {})], keep=3)
    assert store.delete_traces(VIS.partition) == 1


def test_erasure_lookups_follow_derivations_and_successors(store: Any) -> None:
    origin = make_record("origin text that is long enough", key="k")
    copy = make_record("derived copy", user="u2", derived_from=(origin.id,))
    successor = make_record("next version", supersedes=origin.id, version=2)
    store.apply([contract.Insert(r, vector_for(r.content)) for r in (origin, copy, successor)])
    tenant = Tenant("acme")
    assert store.subject_ids(Subject("acme", "u1")) == sorted([origin.id, successor.id])
    assert store.derived_ids(tenant, [origin.id]) == [copy.id]
    assert store.successors(tenant, [origin.id]) == [successor.id]
    assert store.derived_ids(Tenant("globex"), [origin.id]) == []
    assert set(store.erasure_strings(tenant, [origin.id])) == {"origin text that is long enough",
                                                                 "k"}  # fmt: skip
    before = store.residue(tenant, [origin.id])
    assert before["records rows"] == before["vectors rows"] == 1
    assert before["derived rows"] == 2
    store.apply([contract.Delete(tenant, (origin.id, copy.id, successor.id))])
    assert set(store.residue(tenant, [origin.id]).values()) == {0}
    assert store.subject_residue(Subject("acme", "u1")) == 0
    scrub = store.scrub(["origin text that is long enough"])
    # the test server is local: its relation files are scanned too
    assert {"vacuum", "dead tuples", "relation file bytes"} <= set(scrub.checked)
    assert scrub.failed == ()
    assert scrub.scanned == 1
    assert store.counter_rows(Subject("acme", "u1")) == 0
    assert not store.holds_cached("acme")


def test_forgetting_the_audit_subject_unlinks_its_entries(store: Any) -> None:
    entry = AuditEntry(later(1), "acme", "u1", "user:u1", "ADD", ["x"], "t")
    store.apply([contract.Audit(entry)])
    subject = Subject("acme", "u1")
    name = store.audit_name(subject)
    assert name is not None
    (row,) = store.audit_entries(subject)
    assert (row["user_id"], row["actor"]) == (name, f"user:{name}")
    assert store.forget_audit_subject(subject) == 1
    assert store.audit_name(subject) is None
    assert store.audit_entries(subject) == []
    assert store.verify_audit().ok  # the entries stay in the chain


def test_the_audit_log_refuses_updates_and_verify_finds_tampering(store: Any, pg_url: str) -> None:
    store.apply([contract.Audit(AuditEntry(later(1), "acme", "u1", "admin", "ADD", ["x"], "t"))])
    with psycopg.connect(pg_url) as conn:
        with pytest.raises(psycopg.errors.RaiseException, match="append-only"):
            conn.execute("UPDATE audit SET reason = 'edited'")
        conn.rollback()
        conn.execute("ALTER TABLE audit DISABLE TRIGGER audit_no_change")
        conn.execute("UPDATE audit SET reason = 'edited'")
        conn.commit()
    report = store.verify_audit()
    assert not report.ok
    assert "hash does not match" in str(report.problem)


def test_reset_and_put_vectors_rebuild_the_index(store: Any) -> None:
    record = make_record("to re-embed")
    store.apply([contract.Insert(record, vector_for("old"))])
    assert store.vector_model() == MODEL
    store.reset_vectors()
    assert store.vector_model() is None
    assert store.vectors(VIS, [record.id], MODEL) == {}
    renamed = record.replace(embedding_model="other-model")
    store.put_vectors([renamed], np.stack([vector_for("new")[:128]]))
    assert store.vector_model() == "other-model"
    store.check_vector_model("other-model")
    (hits,) = store.candidates(
        VIS, [contract.VectorProbe(vector_for("new")[:128], "other-model", ACTIVE, 3)]
    )
    assert [r.id for r, _ in hits] == [record.id]
    store.rebuild_vector_index()


def test_meta_and_iter_all(store: Any) -> None:
    store.meta_set("k", "v1")
    store.meta_set("k", "v2")
    assert store.meta_get("k") == "v2"
    assert store.meta_get("missing") is None
    made = [make_record(f"r{i}", tenant=t) for i, t in enumerate(["b", "a", "b", "c", "a"])]
    store.apply([contract.Insert(r) for r in made])
    batches = list(store.iter_all(2))
    assert [len(b) for b in batches] == [2, 2, 1]
    assert sorted(r.id for b in batches for r in b) == sorted(r.id for r in made)


def test_rebuild_lexical_switches_the_text_search_configuration(pg_url: str) -> None:
    english = PostgresStore.open(pg_url)
    record = make_record("running shoes")
    english.apply([contract.Insert(record)])
    (stemmed,) = english.candidates(VIS, [contract.LexicalProbe("run", ACTIVE, 5)])
    assert [r.id for r, _ in stemmed] == [record.id]  # english stems running -> run
    english.close()
    simple = PostgresStore.open(pg_url, PostgresConfig(text_search="simple"))
    try:
        assert simple.text_config == "english"  # the schema's, until rebuilt
        simple.rebuild_lexical()
        (plain,) = simple.candidates(VIS, [contract.LexicalProbe("run", ACTIVE, 5)])
        (exact,) = simple.candidates(VIS, [contract.LexicalProbe("running", ACTIVE, 5)])
        assert plain == []
        assert [r.id for r, _ in exact] == [record.id]
    finally:
        simple.close()
