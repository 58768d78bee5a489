"""The id of a topology's shared Spark Connect session: the same for every txid of a day, a new one for another
topology, day or generation, and appended after the connection's own parameters."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from txdag.spark.connect import session_closed, shared_session_url

DAY = datetime(2026, 11, 23, 8, tzinfo=UTC)


def session_id(url: str) -> str:
    return url.rsplit(";session_id=", 1)[1]


def test_every_txid_of_a_day_shares_one_session():
    late = datetime(2026, 11, 23, 23, 59, tzinfo=UTC)
    assert shared_session_url("sc://h:1", "tweets", DAY) == shared_session_url("sc://h:1", "tweets", late)


def test_another_topology_day_or_generation_gets_another_session():
    ids = {session_id(shared_session_url("sc://h:1", "tweets", DAY)),
           session_id(shared_session_url("sc://h:1", "words", DAY)),
           session_id(shared_session_url("sc://h:1", "tweets", datetime(2026, 11, 24, tzinfo=UTC))),
           session_id(shared_session_url("sc://h:1", "tweets", DAY, generation=1))}
    assert len(ids) == 4


def test_the_id_is_a_uuid4_as_the_server_requires():
    parsed = uuid.UUID(session_id(shared_session_url("sc://h:1", "tweets", DAY)))
    assert parsed.version == 4


def test_the_session_follows_the_connections_parameters():
    plain = shared_session_url("sc://127.0.0.1:15092/", "t", DAY)
    assert plain.startswith("sc://127.0.0.1:15092/;user_id=txdag;session_id="), "one user, whoever runs the client"
    with_token = shared_session_url("sc://h:1/;user_id=me;token=s3cret", "t", DAY)
    assert with_token.startswith("sc://h:1/;user_id=me;token=s3cret;session_id=")
    assert session_id(with_token) == session_id(shared_session_url("sc://h:1", "t", DAY))


def test_only_a_closed_or_unknown_session_is_taken_for_one():
    assert session_closed(RuntimeError("[INVALID_HANDLE.SESSION_CLOSED] The handle x is invalid."))
    assert session_closed(RuntimeError("[INVALID_HANDLE.SESSION_NOT_FOUND] The handle x is invalid."))
    assert not session_closed(RuntimeError("UNAVAILABLE: failed to connect to all addresses"))


def test_the_shipped_code_is_part_of_the_session_id(tmp_path):
    from txdag.spark.connect import py_files, py_files_digest

    zip_file = tmp_path / "txdag-pyfiles.zip"
    zip_file.write_bytes(b"one")
    files = py_files({"spark.submit.pyFiles": f" file://{zip_file} "})
    assert files == [zip_file]
    first = py_files_digest(files)
    zip_file.write_bytes(b"two")
    assert py_files_digest(files) != first and py_files_digest([]) == ""
    ids = {session_id(shared_session_url("sc://h:1", "tweets", DAY, shipped=s)) for s in ("", first)}
    assert len(ids) == 2


def test_py_files_the_task_cannot_read_are_refused_before_connecting(tmp_path):
    import pytest

    from txdag.errors import ConfigError
    from txdag.spark.connect import py_files

    refused = r"\['hdfs://nn/txdag.zip', .*missing.zip'\] not a file here; .*txdag pyfiles"
    with pytest.raises(ConfigError, match=refused):
        py_files({"spark.submit.pyFiles": f"hdfs://nn/txdag.zip,{tmp_path / 'missing.zip'}"})
    assert py_files({}) == []
