"""txdag.faults: parsing TXDAG_FAULTS, the safety catch, and the crash itself (in a throwaway subprocess)."""

import logging
import signal
import subprocess
import sys

import pytest

import txdag.faults as faults
from txdag import TransactionAttempt
from txdag.errors import ConfigError
from txdag.faults import Fault, crash_if_requested, parse_faults, requested_faults

TX = TransactionAttempt(3, 2)


def test_parse_entries_with_and_without_attempt():
    assert parse_faults(" process:wc:3 , commit:t.x-1:5:2,,commit:wc:4:1:3") == (
        Fault("process", "wc", 3), Fault("commit", "t.x-1", 5, 2), Fault("commit", "wc", 4, 1, times=3)
    )
    assert parse_faults("") == ()


@pytest.mark.parametrize("text", ["process", "process:wc", "process:wc:0", "process:wc:x", "process:wc:3:0",
                                  "process:wc:3:1:0", "process:wc:3:1:9:9", ":wc:3", "process::3", "process:wc:-1",
                                  "process:wc:²"])
def test_a_malformed_entry_is_an_error_that_shows_the_format(text):
    with pytest.raises(ConfigError, match="TXDAG_FAULTS entry"):
        parse_faults(text)


def test_an_unknown_point_is_an_error_that_lists_the_points():
    points = "coordinate, process, staged, prepared, applying, commit, committed"
    with pytest.raises(ConfigError, match=f"unknown fault point 'comit'.*{points}"):
        parse_faults("comit:wc:3")
    assert [f.point for f in parse_faults(",".join(f"{p}:wc:1" for p in faults.POINTS))] == list(faults.POINTS)


def test_matching_is_by_point_topology_txid_and_optional_attempt():
    assert Fault("process", "wc", 3).matches("process", "wc", TX)
    assert Fault("process", "wc", 3, 2).matches("process", "wc", TX)
    assert not Fault("process", "wc", 3, 1).matches("process", "wc", TX)
    assert not Fault("process", "wc", 4).matches("process", "wc", TX)
    assert not Fault("commit", "wc", 3).matches("process", "wc", TX)
    assert not Fault("process", "other", 3).matches("process", "wc", TX)


def test_faults_are_ignored_with_a_warning_unless_allowed(caplog, monkeypatch):
    monkeypatch.setattr(faults, "_warned", False)
    with caplog.at_level(logging.WARNING, logger="txdag.faults"):
        assert requested_faults({"TXDAG_FAULTS": "process:wc:3"}) == ()
        assert requested_faults({"TXDAG_FAULTS": "process:wc:3", "TXDAG_FAULTS_ALLOWED": "true"}) == ()
    assert "TXDAG_FAULTS_ALLOWED is not 1" in caplog.text
    allowed = {"TXDAG_FAULTS": "process:wc:3", "TXDAG_FAULTS_ALLOWED": "1"}
    assert requested_faults(allowed) == (Fault("process", "wc", 3),)
    assert requested_faults({"TXDAG_FAULTS_ALLOWED": "1"}) == ()


def test_no_matching_fault_returns():
    crash_if_requested("process", "wc", TX, {"TXDAG_FAULTS": "process:wc:4", "TXDAG_FAULTS_ALLOWED": "1"})
    crash_if_requested("process", "wc", TX, {"TXDAG_FAULTS": "process:wc:3"})  # not allowed


def test_a_matching_fault_kills_the_process_with_sigkill_after_one_line():
    code = (
        "from txdag import TransactionAttempt; from txdag.faults import crash_if_requested\n"
        "try:\n"
        "    crash_if_requested('process', 'wc', TransactionAttempt(3, 2))\n"
        "finally:\n"
        "    print('cleanup ran')\n"
    )
    env = {"TXDAG_FAULTS": "process:wc:3:2", "TXDAG_FAULTS_ALLOWED": "1", "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == -signal.SIGKILL
    assert done.stderr == "TXDAG FAULT process topology=wc txid=3 attempt=2\n"
    assert done.stdout == "", "no cleanup: the process dies like a machine that loses power"


def test_with_a_fired_dir_each_fault_fires_once_per_attempt(tmp_path):
    code = ("import sys; from txdag import TransactionAttempt; from txdag.faults import crash_if_requested\n"
            "crash_if_requested('commit', 'wc', TransactionAttempt(3, int(sys.argv[1])))\n")
    env = {"TXDAG_FAULTS": "commit:wc:3", "TXDAG_FAULTS_ALLOWED": "1", "TXDAG_FAULTS_FIRED_DIR": str(tmp_path),
           "PATH": "/usr/bin:/bin"}
    codes = [subprocess.run([sys.executable, "-c", code, attempt], env=env, capture_output=True, timeout=60).returncode
             for attempt in ("1", "1", "2", "2")]
    assert codes == [-signal.SIGKILL, 0, -signal.SIGKILL, 0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["commit-wc-3-1", "commit-wc-3-2"]


def test_with_a_fired_dir_a_fault_with_times_fires_that_many_times(tmp_path):
    code = ("from txdag import TransactionAttempt; from txdag.faults import crash_if_requested\n"
            "crash_if_requested('commit', 'wc', TransactionAttempt(3, 1))\n")
    env = {"TXDAG_FAULTS": "commit:wc:3:1:3", "TXDAG_FAULTS_ALLOWED": "1", "TXDAG_FAULTS_FIRED_DIR": str(tmp_path),
           "PATH": "/usr/bin:/bin"}
    codes = [subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, timeout=60).returncode
             for _ in range(4)]
    assert codes == [-signal.SIGKILL] * 3 + [0], "every try of the attempt dies, three times, then it goes on"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["commit-wc-3-1", "commit-wc-3-1#2", "commit-wc-3-1#3"]
