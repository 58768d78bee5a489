"""The persisted records: round trips, format versions, malformed bytes, history, znode names."""

from __future__ import annotations

import json

import pytest

from txdag.errors import FormatVersionError
from txdag.zk.records import HISTORY_LIMIT, OwnerRecord, RunRecord, TopologyRecord, TxidRecord, TxStatus
from txdag.zk.store import run_node, txid_node

PATH = "/txdag/topo/txids/00000000000000000007"
AT = "2024-01-01T00:00:00.000+00:00"


def record(**changes: object) -> TxidRecord:
    rec = TxidRecord.new(7, "manual__2024-01-01T00:00:00+00:00", {"start": 0, "end": 10}, AT)
    return rec.moved(**changes) if changes else rec  # type: ignore[arg-type]


def test_topology_record_round_trips_with_a_format_version() -> None:
    data = TopologyRecord(5, 3).to_bytes()
    assert json.loads(data) == {"v": 1, "last_txid": 5, "committed_txid": 3}
    assert TopologyRecord.from_bytes(data, "/t") == TopologyRecord(5, 3)


def test_txid_record_round_trips_with_status_history_and_failure() -> None:
    rec = record(status=TxStatus.FAILED, at=AT, failed_by=6, error="txid 6 failed")
    again = TxidRecord.from_bytes(rec.to_bytes(), PATH)
    assert again == rec
    assert json.loads(rec.to_bytes())["v"] == 1
    assert [(h.status, h.error) for h in again.history] == [(TxStatus.EMITTED, None),
                                                             (TxStatus.FAILED, "txid 6 failed")]


def test_the_digest_a_batch_was_planned_after_round_trips_and_an_older_record_has_none() -> None:
    from txdag.zk.records import digest_of

    rec = record(status=TxStatus.PROCESSED, at=AT, planned_on=digest_of({"from": 1, "quantity": 5}))
    assert TxidRecord.from_bytes(rec.to_bytes(), PATH).planned_on == rec.planned_on
    assert digest_of({"quantity": 5, "from": 1}) == rec.planned_on != digest_of({"from": 1, "quantity": 6})
    older = json.loads(rec.to_bytes())
    del older["planned_on"]
    assert TxidRecord.from_bytes(json.dumps(older).encode(), PATH).planned_on is None


def test_an_automatic_replay_mark_round_trips_and_an_older_record_has_none() -> None:
    rec = record(status=TxStatus.FAILED, at=AT, failed_by=6, error="txid 6 was re-emitted", auto_replay=True)
    assert TxidRecord.from_bytes(rec.to_bytes(), PATH).auto_replay
    older = json.loads(rec.to_bytes())
    del older["auto_replay"]
    assert not TxidRecord.from_bytes(json.dumps(older).encode(), PATH).auto_replay


def test_run_record_round_trips() -> None:
    assert RunRecord.from_bytes(RunRecord(12).to_bytes(), "/r") == RunRecord(12)


def test_owner_record_round_trips_with_its_definition() -> None:
    rec = OwnerRecord("dags/word_count.py", "7fc614879c90ef59", {"state words.namespace": "word_count"}, AT)
    assert OwnerRecord.from_bytes(rec.to_bytes(), "/o") == rec
    assert json.loads(rec.to_bytes()) == {"v": 1, "dag_file": "dags/word_count.py", "fingerprint": "7fc614879c90ef59",
                                          "definition": {"state words.namespace": "word_count"}, "since": AT,
                                          "how": "adopted", "scheme": 1}
    unknown = OwnerRecord(None, "f", {}, AT, "accepted", 2)
    assert OwnerRecord.from_bytes(unknown.to_bytes(), "/o") == unknown


@pytest.mark.parametrize("field,value", [("definition", "x"), ("how", "stolen"), ("fingerprint", None),
                                         ("scheme", "1"), ("dag_file", 3)])
def test_an_owner_record_of_the_wrong_shape_is_refused_naming_the_znode(field: str, value: object) -> None:
    obj = json.loads(OwnerRecord("d.py", "f", {}, AT).to_bytes())
    obj[field] = value
    with pytest.raises(FormatVersionError, match="/t/owner"):
        OwnerRecord.from_bytes(json.dumps(obj).encode(), "/t/owner")


@pytest.mark.parametrize("reader", [TopologyRecord.from_bytes, TxidRecord.from_bytes, RunRecord.from_bytes,
                                    OwnerRecord.from_bytes])
def test_unknown_format_version_is_refused_naming_the_znode(reader) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(FormatVersionError, match=f"znode {PATH} .*format version 2.*reads version 1"):
        reader(b'{"v": 2, "txid": 1}', PATH)


@pytest.mark.parametrize("data", [b"\xff\xfe garbage", b"", b"[1, 2]", b'{"txid": 1}', b"not json"])
def test_malformed_bytes_are_refused_naming_the_znode(data: bytes) -> None:
    with pytest.raises(FormatVersionError, match=PATH):
        TxidRecord.from_bytes(data, PATH)


@pytest.mark.parametrize("field,value", [("txid", "7"), ("attempt", True), ("status", "lost"),
                                         ("metadata", [1]), ("run_id", 3), ("history", [1])])
def test_a_field_of_the_wrong_type_is_refused(field: str, value: object) -> None:
    obj = json.loads(record().to_bytes())
    obj[field] = value
    with pytest.raises(FormatVersionError, match=f"{PATH}.*zkCli.sh get {PATH}"):
        TxidRecord.from_bytes(json.dumps(obj).encode(), PATH)


def test_topology_with_more_committed_than_allocated_is_refused() -> None:
    with pytest.raises(FormatVersionError, match="committed_txid 4 > last_txid 3"):
        TopologyRecord.from_bytes(b'{"v":1,"last_txid":3,"committed_txid":4}', "/t")


def test_new_record_is_attempt_1_emitted() -> None:
    rec = record()
    assert (rec.tx.txid, rec.tx.attempt, rec.status) == (7, 1, TxStatus.EMITTED)
    assert not rec.commit_begun and rec.failed_by is None


def test_leaving_failed_clears_the_failure_fields() -> None:
    failed = record(status=TxStatus.FAILED, at=AT, failed_by=7, error="boom")
    again = failed.moved(TxStatus.EMITTED, AT, attempt=2)
    assert (again.failed_by, again.error, again.attempt) == (None, None, 2)
    assert [h.attempt for h in again.history] == [1, 1, 2]


def test_commit_begun_sticks_once_committing() -> None:
    rec = record(status=TxStatus.PROCESSED, at=AT).moved(TxStatus.COMMITTING, AT)
    assert rec.commit_begun
    failed = rec.moved(TxStatus.FAILED, AT, failed_by=7, error="commit failed")
    assert failed.moved(TxStatus.EMITTED, AT, attempt=2).commit_begun


def test_history_is_capped() -> None:
    rec = record()
    for attempt in range(2, 40):
        rec = rec.moved(TxStatus.EMITTED, AT, attempt=attempt)
    assert len(rec.history) == HISTORY_LIMIT
    assert rec.history[-1].attempt == 39
    assert TxidRecord.from_bytes(rec.to_bytes(), PATH) == rec


def test_txid_node_names_sort_in_txid_order() -> None:
    names = [txid_node(t) for t in (1, 10, 2, 10**12)]
    assert sorted(names) == [txid_node(t) for t in (1, 2, 10, 10**12)]
    assert txid_node(7) == "00000000000000000007"


@pytest.mark.parametrize("run_id", ["scheduled__2024-01-01T00:00:00+00:00", "a/b", ".", "..", "manual ü"])
def test_run_node_names_are_znode_safe_and_distinct(run_id: str) -> None:
    name = run_node(run_id)
    assert "/" not in name and name not in (".", "..") and name.isascii()
    assert run_node(run_id + "x") != name
