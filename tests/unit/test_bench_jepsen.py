"""bench/jepsen's pure parts: the seeded schedule and the checker, over histories built by hand.

Each history here is the smallest that shows one rule: two txids of two tweets each, committed in turn, with the
samples a correct run would show; each test then breaks one thing and expects that rule's violation, and only it.
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

from jepsen import checker  # noqa: E402
from jepsen.schedule import KILLS, MAX_HOLD, MIN_HOLD, PAUSES, kinds_for, make_schedule, overlapping  # noqa: E402

TWEETS = ["@ann #a", "@bob #a", "@ann #b", "@ann #a"]  # ids 1..4; txid 1 = ids 1-2, txid 2 = ids 3-4


def record(start: int, steps: list[tuple[int, str, float]]) -> dict:
    return {"attempt": steps[-1][0], "status": steps[-1][1], "run_id": f"r{start}",
            "metadata": {"v": 1, "from": start, "quantity": 2},
            "history": [[a, s, at, None] for a, s, at in steps]}


def history() -> dict:
    """txid 1 commits at t=20, txid 2 at t=40; the last fault healed at t=10."""
    after1 = {"users": {"@ann": [1, 1], "@bob": [1, 1]}, "hashtags": {"#a": [2, 1]},
              "users_hashtags": {"@ann:#a": [1, 1], "@bob:#a": [1, 1]}}
    after2 = {"users": {"@ann": [3, 2], "@bob": [1, 1]}, "hashtags": {"#a": [3, 2], "#b": [1, 2]},
              "users_hashtags": {"@ann:#a": [2, 2], "@bob:#a": [1, 1], "@ann:#b": [1, 2]}}
    empty = {"users": {}, "hashtags": {}, "users_hashtags": {}}
    return {
        "v": 1, "seed": 7, "duration": 60, "bound": 30, "healed_at": 10.0,
        "base": {"committed": 0, "covered": 0, "states": copy.deepcopy(empty)},
        "tweets": {"first": 1, "texts": list(TWEETS)},
        "txids": {"1": record(1, [(1, "emitted", 5.0), (1, "processed", 15.0), (1, "committing", 19.5),
                                  (1, "committed", 20.0)]),
                  "2": record(3, [(1, "emitted", 6.0), (1, "failed", 16.0), (2, "emitted", 25.0),
                                  (2, "processed", 35.0), (2, "committing", 38.5), (2, "committed", 40.0)])},
        "committed": [[1.0, 0], [21.0, 1], [41.0, 2]],
        "samples": [{"t0": 1.0, "t1": 1.1, "states": copy.deepcopy(empty)},
                    {"t0": 21.0, "t1": 21.1, "states": copy.deepcopy(after1)},
                    {"t0": 39.0, "t1": 39.1, "states": copy.deepcopy(after2)},  # txid 2 written, not yet recorded
                    {"t0": 41.0, "t1": 41.1, "states": copy.deepcopy(after2)}],
        "final": copy.deepcopy(after2),
    }


def kinds(h: dict) -> list[str]:
    return [v.kind for v in checker.check(h)]


def test_a_correct_history_has_no_violation():
    assert checker.check(history()) == []
    assert checker.recovery_seconds(history()) == 10.0


def test_a_final_count_off_the_ground_truth_is_a_state_violation():
    h = history()
    h["final"]["hashtags"]["#a"] = [4, 2]
    assert kinds(h) == ["state"]


def test_a_tweet_no_committed_batch_covers_is_a_coverage_violation():
    h = history()
    h["tweets"]["texts"].append("@cy #c")  # appended, never in a batch: the final counts lack it too
    assert "coverage" in kinds(h) and "state" in kinds(h)


def test_a_txid_committing_before_its_predecessor_is_an_order_violation():
    h = history()
    h["txids"]["2"]["history"][-1][2] = 19.0
    h["samples"] = []
    assert kinds(h) == ["order"]


def test_a_gap_in_the_committed_txids_is_an_order_violation():
    h = history()
    h["txids"]["1"] = record(1, [(1, "emitted", 5.0), (1, "failed", 15.0)])
    h["samples"] = h["samples"][:1]
    assert "order" in kinds(h)


def test_the_committed_txid_going_back_is_an_order_violation():
    h = history()
    h["committed"].append([42.0, 1])
    assert "order" in kinds(h)


def test_a_second_commit_by_the_same_attempt_is_a_double_commit():
    h = history()
    h["txids"]["1"]["history"].append([1, "committed", 45.0, None])
    assert kinds(h) == ["double"]


def test_a_replay_of_a_committed_txid_with_a_higher_attempt_is_allowed():
    h = history()
    h["txids"]["1"]["history"].append([2, "committed", 45.0, None])
    assert kinds(h) == []


def test_a_value_of_another_batch_is_a_stale_write():
    h = history()
    h["samples"][3]["states"]["hashtags"]["#a"] = [4, 2]  # a stale attempt counted #a once more under txid 2
    assert kinds(h) == ["stale"]


def test_a_write_of_a_txid_before_its_predecessor_committed_is_a_stale_write():
    h = history()
    h["samples"].insert(1, {"t0": 12.0, "t1": 12.1, "states": copy.deepcopy(h["samples"][2]["states"])})
    h["samples"][1]["states"]["users"]["@bob"] = [1, 1]
    assert "stale" in kinds(h)


def test_a_write_of_a_txid_before_its_commit_began_is_a_stale_write():
    h = history()
    h["samples"][2]["t0"], h["samples"][2]["t1"] = 37.0, 37.1  # txid 1 committed, txid 2 not yet COMMITTING
    assert kinds(h) == ["stale"]


def test_a_write_of_a_txid_that_never_committed_is_a_stale_write():
    h = history()
    h["samples"][3]["states"]["users"]["@cy"] = [1, 3]
    assert kinds(h) == ["stale"]


def test_a_committed_write_missing_from_a_later_sample_is_a_stale_read():
    h = history()
    h["samples"][3]["states"]["users"]["@ann"] = [1, 1]  # txid 2 committed at 40, the read at 41 shows txid 1's
    assert kinds(h) == ["stale"]


def test_a_field_under_a_txid_whose_batch_lacks_it_is_a_stale_write():
    h = history()
    h["samples"][3]["states"]["users"]["@bob"] = [1, 2]  # txid 2's batch has no @bob
    assert kinds(h) == ["stale"]


def test_no_commit_within_the_bound_after_the_last_heal_is_a_liveness_violation():
    h = history()
    h["healed_at"] = 5.0  # the first commit after it, at 20, is 15 s later: within 30
    assert kinds(h) == []
    h["bound"] = 10
    assert kinds(h) == ["liveness"]
    h["healed_at"] = 50.0
    assert kinds(h) == ["liveness"]


def test_a_base_carries_the_earlier_schedules_counts():
    h = history()
    h["base"] = {"committed": 1, "covered": 2, "states": copy.deepcopy(h["samples"][1]["states"])}
    h["tweets"] = {"first": 3, "texts": TWEETS[2:]}
    del h["txids"]["1"]
    h["samples"] = h["samples"][1:]
    assert kinds(h) == []
    h["samples"][0]["states"]["users"]["@bob"] = [2, 1]
    assert kinds(h) == ["stale"]


def test_a_schedule_is_the_same_for_a_seed_and_differs_across_seeds():
    assert make_schedule(11, 300) == make_schedule(11, 300)
    assert make_schedule(11, 300) != make_schedule(12, 300)


@pytest.mark.parametrize("seed", range(40))
def test_a_schedule_heals_in_time_and_never_overlaps_a_kind_with_itself(seed):
    faults = make_schedule(seed, 240)
    assert len(faults) >= 2 or seed >= 0 and faults  # short draws may drop a fault that did not fit
    for f in faults:
        assert f.heals <= 240
        assert (MIN_HOLD <= f.hold <= MAX_HOLD) if f.kind in PAUSES else (f.kind in KILLS and f.hold == 0)
    for i, f in enumerate(faults):
        assert not any(g.kind == f.kind and g.at <= f.at <= g.heals for g in faults[:i])


def test_faults_of_different_kinds_overlap_in_some_schedules():
    assert sum(overlapping(make_schedule(seed, 300)) for seed in range(20)) > 0


def test_a_schedule_too_short_for_a_pause_is_refused():
    with pytest.raises(ValueError, match="no room"):
        make_schedule(1, 60)


def test_the_recorder_writes_a_txid_record_as_the_checker_reads_it():
    from jepsen.recorder import record_json

    from txdag.zk.records import TxidRecord, TxStatus

    rec = TxidRecord.new(1, "r1", {"v": 1, "from": 1, "quantity": 2}, "2026-11-29T01:00:00.000+00:00")
    rec = rec.moved(TxStatus.COMMITTED, "2026-11-29T01:00:20.500+00:00")
    h = history()
    h["txids"]["1"] = record_json(rec)
    assert checker.commit_times(h)[1] == 1795914020.5


def test_each_spark_mode_draws_only_the_faults_that_hit_something_in_it():
    assert "pause-connect" in kinds_for("connect") and "kill-connect" in kinds_for("connect")
    assert "kill-driver" not in kinds_for("connect")
    assert "kill-driver" in kinds_for("submit") and not {"pause-connect", "kill-connect"} & set(kinds_for("submit"))
    drawn = {f.kind for seed in range(40) for f in make_schedule(seed, 300, kinds_for("connect"))}
    assert "kill-driver" not in drawn and {"pause-connect", "kill-connect"} <= drawn
    with pytest.raises(ValueError, match="spark mode 'local'"):
        kinds_for("local")
