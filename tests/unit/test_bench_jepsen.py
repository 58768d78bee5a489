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
from jepsen.schedule import HELD, KILLS, MAX_HOLD, MIN_HOLD, kinds_for, make_schedule, overlapping  # noqa: E402

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
        "final": copy.deepcopy(after2), "final_at": [42.0, 42.1],
    }


def kinds(h: dict) -> list[str]:
    return [v.kind for v in checker.check(h)]


def test_a_correct_history_has_no_violation():
    assert checker.check(history()) == []
    assert checker.recovery_seconds(history()) == 10.0


def test_a_final_count_off_the_ground_truth_is_a_state_violation():
    h = history()
    h["final"]["hashtags"]["#a"] = [4, 2]
    assert kinds(h) == ["state", "stale"]  # the final reading is checked as a sample too


def test_a_tweet_no_committed_batch_covers_is_a_coverage_violation():
    h = history()
    h["tweets"]["texts"].append("@cy #c")  # appended, never in a batch: the final counts lack it too
    assert "coverage" in kinds(h) and "state" in kinds(h)


def test_a_txid_committing_before_its_predecessor_is_an_order_violation():
    h = history()
    h["txids"]["2"]["history"][-1][2] = 19.0
    h["samples"] = h["samples"][:1] * 3
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
        assert (MIN_HOLD <= f.hold <= MAX_HOLD) if f.kind in HELD else (f.kind in KILLS and f.hold == 0)
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

# --- network cuts: the namespace plan (jepsen/network.py) and cuts in the schedule --------------------------------

def _addresses(cmds: list[list[str]]) -> list[str]:
    import re

    return [m for cmd in cmds for arg in cmd for m in re.findall(r"\b\d+\.\d+\.\d+\.\d+\b", arg)]


def test_the_plan_targets_only_its_own_loopback_addresses():
    import ipaddress

    from jepsen import network

    cmds = network.create_commands()
    nodes = {network.address(n) for n in network.NODES}
    assert len(nodes) == len(network.NODES)
    assert all(ipaddress.ip_address(a) in network.SUBNET for a in nodes)
    # besides the nodes' addresses, only each namespace's own local table is touched (never the root's)
    assert set(_addresses(cmds)) <= nodes | {"127.0.0.0", "127.0.0.1"}
    for cmd in cmds:
        if "table" in cmd:
            assert cmd[1] == "-n" and cmd[2].startswith("txj-"), cmd
        if cmd[:2] == ["ip", "addr"] or cmd[:2] == ["ip", "route"]:
            raise AssertionError(f"a command on the root namespace's addresses or routes: {cmd}")
    for node in network.NODES:  # 127/8 leaves the local table before the address comes, 127.0.0.1 stays local
        ns = network.netns(node)
        mine = [c for c in cmds if ns in c]
        order = [" ".join(c[3:5]) for c in mine if c[:3] == ["ip", "-n", ns]]
        assert order.index("route del") < order.index("route replace") < order.index("addr add"), order
    assert all(len(n) <= 15 for cmd in cmds for n in cmd if n.startswith(("txjv-", "txjp-")))  # IFNAMSIZ


def test_a_cut_is_a_dead_neighbour_per_direction_and_a_heal_deletes_it():
    from jepsen import network

    dead = ["lladdr", network.DEAD_MAC]
    both = network.cut_commands("airflow", "redis", one_way=False)
    assert both == [["ip", "-n", "txj-airflow", "neigh", "replace", "127.81.0.2", *dead, "dev", "txjv-airflow", "nud",
                     "permanent"],
                    ["ip", "-n", "txj-redis", "neigh", "replace", "127.81.0.5", *dead, "dev", "txjv-redis", "nud",
                     "permanent"]]
    assert network.cut_commands("zk", "airflow", one_way=True) == [
        ["ip", "-n", "txj-zk", "neigh", "replace", "127.81.0.5", *dead, "dev", "txjv-zk", "nud", "permanent"]]
    assert network.cut_commands("airflow", "redis", one_way=False, heal=True) == [
        ["ip", "-n", "txj-airflow", "neigh", "del", "127.81.0.2", "dev", "txjv-airflow"],
        ["ip", "-n", "txj-redis", "neigh", "del", "127.81.0.5", "dev", "txjv-redis"]]
    with pytest.raises(ValueError, match="twice"):
        network.cut_commands("zk", "zk", one_way=True)
    with pytest.raises(ValueError, match="unknown node 'kafka'"):
        network.cut_commands("zk", "kafka", one_way=True)


def test_teardown_deletes_only_txj_namespaces_and_veths():
    from jepsen import network

    netns = "txj-redis (id: 2)\nsomeone-elses\ntxj-hub (id: 0)\n"
    links = ("1: lo: <LOOPBACK,UP> mtu 65536 qdisc noqueue\n2: eth0: <BROADCAST> mtu 1500\n"
             "7: txjv-zk@txjp-zk: <BROADCAST,MULTICAST,M-DOWN> mtu 1500\n8: txjp-zk@txjv-zk: <BROADCAST> mtu 1500\n")
    assert network.teardown_commands(netns, links) == [
        ["ip", "netns", "del", "txj-redis"], ["ip", "netns", "del", "txj-hub"],
        ["ip", "link", "del", "txjv-zk"], ["ip", "link", "del", "txjp-zk"]]
    assert network.teardown_commands("", "") == []


def test_heal_all_deletes_every_dead_neighbour_and_refuses_an_address_not_its_own():
    from jepsen import network

    def entry(addr: str, node: str, mac: str = network.DEAD_MAC) -> str:
        return f"{addr} dev txjv-{node} lladdr {mac} PERMANENT\n"

    shown = {"txj-airflow": entry("127.81.0.2", "airflow") + entry("127.81.0.3", "airflow"),
             "txj-redis": entry("127.81.0.5", "redis") + entry("127.81.0.9", "redis", "0a:0b:0c:0d:0e:0f")}
    ran: list[list[str]] = []

    def fake(cmd: list[str]) -> str:
        ran.append(cmd)
        return shown.get(cmd[2], "") if cmd[3:5] == ["neigh", "show"] else ""

    net = network.Network(run=fake)
    assert net.heal_all() == [["ip", "-n", "txj-redis", "neigh", "del", "127.81.0.5", "dev", "txjv-redis"],
                              ["ip", "-n", "txj-airflow", "neigh", "del", "127.81.0.2", "dev", "txjv-airflow"],
                              ["ip", "-n", "txj-airflow", "neigh", "del", "127.81.0.3", "dev", "txjv-airflow"]]
    assert ran[-1] == ["ip", "-n", "txj-airflow", "neigh", "del", "127.81.0.3", "dev", "txjv-airflow"]
    with pytest.raises(network.NetworkError, match="10.0.0.1 is not a node address"):
        network.dead_neighbours("zk", entry("10.0.0.1", "zk"))


def test_create_kills_what_its_runner_lists_in_the_namespaces_and_tears_down_first_and_after_a_failure():
    import signal
    import subprocess

    from jepsen import network

    leftover = subprocess.Popen(["sleep", "60"])  # a dead run's server: the only pid the fake lists
    ran: list[list[str]] = []
    namespaces = "txj-zk (id: 3)\n"

    def fake(cmd: list[str]) -> str:  # no real `ip`: a unit test must not list (and kill) a real run's processes
        nonlocal namespaces
        ran.append(cmd)
        if cmd[:3] == ["ip", "netns", "list"]:
            return namespaces
        if cmd == ["ip", "netns", "pids", "txj-zk"]:
            return f"{leftover.pid}\n"
        if cmd == ["ip", "netns", "del", "txj-zk"]:
            namespaces = ""
        if cmd == ["ip", "-n", "txj-zk", "link", "set", "lo", "up"]:
            raise network.NetworkError("boom")
        return ""

    try:
        with pytest.raises(network.NetworkError, match="boom"):
            network.Network(nodes=("redis", "zk"), run=fake).create()
        assert leftover.wait(timeout=10) == -signal.SIGKILL
    finally:
        leftover.kill()
    assert ran[:2] == [["ip", "netns", "list"], ["ip", "netns", "pids", "txj-zk"]]
    assert ran[4] == ["ip", "netns", "del", "txj-zk"]  # the namespace of a run killed before
    assert ran[-2:] == [["ip", "netns", "list"], ["ip", "-o", "link", "show"]]  # torn down after the failure


def test_one_run_at_a_time_holds_the_namespaces_and_a_second_is_told_who(tmp_path):
    import os

    from jepsen import network

    lock = tmp_path / "lock"
    first = network.claim(lock)
    with pytest.raises(network.NetworkError, match=f"another jepsen run \\(pid {os.getpid()}, since .*kill -TERM"):
        network.claim(lock)
    first.close()  # the run ended (or was killed: the kernel drops the lock with the process)
    network.claim(lock).close()


def test_cuts_in_a_schedule_draw_their_link_and_direction_from_the_seed():
    from jepsen.schedule import CUT, KINDS, _holds, is_cut, parse_cut

    nodes = ("redis", "zk", "airflow")
    drawn = [f for seed in range(300) for f in make_schedule(seed, 300, (CUT,), nodes)]
    assert make_schedule(5, 300, KINDS + (CUT,), nodes) == make_schedule(5, 300, KINDS + (CUT,), nodes)
    assert make_schedule(5, 300) == make_schedule(5, 300, kinds_for("submit"))  # no cuts unless asked for
    assert all(is_cut(f.kind) and MIN_HOLD <= f.hold <= MAX_HOLD for f in drawn)
    ends = {frozenset(parse_cut(f.kind)[:2]) for f in drawn}
    assert ends == {frozenset(p) for p in (("redis", "zk"), ("redis", "airflow"), ("zk", "airflow"))}
    assert {parse_cut(f.kind)[2] for f in drawn} == {True, False}
    assert {f.kind for f in drawn} >= {"cut-airflow-redis", "cut-airflow->redis", "cut-redis->airflow"}
    assert not any("connect" in f.kind for f in drawn)
    assert any("connect" in f.kind for s in range(50) for f in make_schedule(s, 300, (CUT,), nodes + ("connect",)))
    for seed in range(300):  # two cuts of one link (either direction) never hold at once
        faults = make_schedule(seed, 600, (CUT,), ("redis", "airflow"))
        for i, f in enumerate(faults):
            assert not any(_holds(g.kind) == _holds(f.kind) and g.at <= f.at < g.heals for g in faults[:i]), faults
    with pytest.raises(ValueError, match="two nodes"):
        make_schedule(1, 300, (CUT,), ("redis",))


def test_the_scripts_and_the_stack_refuse_a_host_off_loopback(monkeypatch):
    import subprocess

    from tput.services import BenchError, Hosts, script_service

    lib = Path(__file__).resolve().parents[2] / "scripts" / "lib" / "common.sh"

    def host(value: str | None) -> subprocess.CompletedProcess:
        env = {"PATH": "/usr/bin:/bin", **({"TXDAG_ZK_HOST": value} if value is not None else {})}
        code = f'die() {{ echo "$*" >&2; exit 1; }}; source {lib}; loopback_host TXDAG_ZK_HOST'
        return subprocess.run(["bash", "-c", code], env=env, capture_output=True, text=True, check=False)

    assert host(None).stdout == "127.0.0.1\n" and host("127.81.0.3").stdout == "127.81.0.3\n"
    for bad in ("10.0.0.1", "127.0.0.256", "localhost", "127.1"):
        assert host(bad).returncode == 1 and "TXDAG_ZK_HOST" in host(bad).stderr
    for name in ("TXDAG_REDIS_HOST", "TXDAG_ZK_HOST", "TXDAG_PG_HOST", "TXDAG_AIRFLOW_HOST",
                 "TXDAG_SPARK_CONNECT_HOST"):
        monkeypatch.delenv(name, raising=False)
    assert Hosts.from_env() == Hosts()
    monkeypatch.setenv("TXDAG_REDIS_HOST", "127.81.0.2")
    assert Hosts.from_env().redis == "127.81.0.2"
    monkeypatch.setenv("TXDAG_PG_HOST", "192.168.1.2")
    with pytest.raises(BenchError, match="TXDAG_PG_HOST=192.168.1.2"):
        Hosts.from_env()
    assert [script_service(n, a) for n, a in [("services.sh", ("start", "redis")), ("postgres.sh", ("stop",)),
                                               ("airflow.sh", ("start",)), ("spark-connect.sh", ("stop",))]] == [
        "redis", "postgres", "airflow", "spark-connect"]


def test_with_the_network_cuts_are_drawn_often_and_only_from_its_nodes():
    from jepsen.schedule import CUT, LINK_NODES, is_cut

    kinds = kinds_for("connect", network=True)
    drawn = [f.kind for seed in range(100) for f in make_schedule(seed, 300, kinds, LINK_NODES + ("connect",))]
    cuts = [k for k in drawn if is_cut(k)]
    assert len(cuts) > len(drawn) / 5  # each link is cut now and then, not once in a long run
    assert any("connect" in k for k in cuts) and "cut" not in drawn
    assert CUT not in kinds_for("connect")  # no namespaces, no cut


def test_a_commit_begun_before_the_previous_txid_committed_is_an_order_violation_without_any_sample():
    h = history()
    h["txids"]["2"]["history"][-2][2] = 15.0  # COMMITTING of txid 2 before txid 1's COMMITTED at 20.0
    h["samples"] = h["samples"][:1] * 3
    assert kinds(h) == ["order"]


def test_a_drain_that_needed_a_replay_is_a_liveness_violation_even_with_exact_states():
    h = history()
    h["stuck"] = "drain timed out: replayed from txid 2"
    assert kinds(h) == ["liveness"]


def test_a_sampler_that_stopped_is_reported_not_taken_for_a_clean_run():
    h = history()
    h["samples"] = []
    assert kinds(h) == ["stale"]


def test_the_final_reading_must_show_every_committed_txid():
    h = history()
    h["final"]["users"]["@ann"] = [1, 1]  # txid 2's write lost, txid 1's value left: the states miss a commit
    assert kinds(h) == ["state", "stale"]


def test_a_careless_command_line_is_refused_before_anything_starts(tmp_path, capsys, monkeypatch):
    import runpy

    script = runpy.run_path(str(BENCH / "jepsen.py"), run_name="jepsen_cli")
    for name in script["PORTS"]:
        monkeypatch.delenv(name, raising=False)
    for argv, said in [(["--duration", "30"], "--duration 30: a schedule of 30 s leaves no room"),
                       (["--schedules", "0"], "--schedules must be above 0"),
                       (["--batch", "-5"], "--batch must be above 0"),
                       (["--redis-db", "-1"], "--redis-db must be 0 or above")]:
        with pytest.raises(SystemExit) as exit_:
            script["parse_args"]([*argv, "--no-network", "--out", str(tmp_path)])
        assert exit_.value.code == 2 and said in capsys.readouterr().err
    monkeypatch.setenv("TXDAG_REDIS_PORT", "6391")  # a run would be refused these; a check runs nothing
    assert script["main"](["--check", str(tmp_path / "nope.json")]) == 2
    assert "cannot read the history" in capsys.readouterr().err
    (tmp_path / "other.json").write_text('{"seed": 3}')
    assert script["main"](["--check", str(tmp_path / "other.json")]) == 2
    assert "is not a history this harness keeps" in capsys.readouterr().err


def test_after_a_signal_the_clean_up_is_not_cut_short_and_its_scripts_do_not_inherit_an_ignored_sigterm(capfd):
    import runpy
    import signal
    import subprocess

    from jepsen import interrupts

    def ignored_in_a_child() -> int:
        status = subprocess.run(["cat", "/proc/self/status"], capture_output=True, text=True, check=True).stdout
        return int(next(line for line in status.splitlines() if line.startswith("SigIgn:")).split()[1], 16)

    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        interrupts.arm()
        with pytest.raises(KeyboardInterrupt, match="signal 15"):
            signal.raise_signal(signal.SIGTERM)
        signal.raise_signal(signal.SIGTERM)  # a second one: said, and the clean-up goes on
        signal.raise_signal(signal.SIGINT)  # a second Ctrl-C: nothing
        assert "during the clean-up: it goes on" in capfd.readouterr().err
        mask = ignored_in_a_child()
        assert not mask & (1 << (signal.SIGTERM - 1))  # a stop script's `timeout` can still end its command
        assert mask & (1 << (signal.SIGINT - 1))  # and a Ctrl-C to the process group does not end the script
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)
    script = runpy.run_path(str(BENCH / "jepsen.py"), run_name="jepsen_cli")
    assert script["ended"](-9, 123, "/out") == 137
    assert "(pid 123) was ended by SIGKILL" in capfd.readouterr().out
    assert script["ended"](1, 123, "/out") == 1


def test_a_kill_connect_that_waited_past_the_end_of_the_run_kills_nothing():
    from jepsen.nemesis import Nemesis
    from jepsen.schedule import Fault

    nemesis = Nemesis(None, [], 1)  # type: ignore[arg-type]  - no stack: reaching for one would raise
    assert nemesis.heal_all() == []
    nemesis._inject(Fault("kill-connect", 1.0, 0.0))
    assert nemesis.injected[0]["skipped"] and "the run is ending" in nemesis.injected[0]["note"]


def test_a_crash_of_an_airflow_component_holds_it_down_and_never_overlaps_a_pause_of_it():
    from jepsen.schedule import CRASHES

    kinds = ("kill-scheduler", "pause-scheduler", "kill-triggerer", "pause-triggerer")
    drawn = [make_schedule(seed, 600, kinds) for seed in range(200)]
    crashes = [f for faults in drawn for f in faults if f.kind in CRASHES]
    assert crashes and all(MIN_HOLD <= f.hold <= MAX_HOLD for f in crashes)
    for faults in drawn:
        for component in ("scheduler", "triggerer"):
            held = sorted((f.at, f.heals) for f in faults if f.kind.endswith(component))
            assert all(end < start for (_, end), (start, _) in zip(held, held[1:])), faults
    assert set(CRASHES) <= set(kinds_for("submit")) and set(CRASHES) <= set(kinds_for("connect"))


def test_while_a_crashed_scheduler_is_down_a_pause_of_it_is_skipped_and_a_kill_waits_for_a_task(tmp_path):
    import types

    from jepsen.nemesis import Down, Nemesis, component_pids, task_pids
    from jepsen.schedule import Fault

    stack = types.SimpleNamespace(airflow_home=tmp_path)  # no scheduler.pid: airflow.sh crash removed it
    with pytest.raises(Down, match="no scheduler runs now"):
        component_pids(stack, "scheduler")  # type: ignore[arg-type]
    assert task_pids(stack) == []  # type: ignore[arg-type]  - nothing to kill yet, rather than an error
    nemesis = Nemesis(stack, [], 1)  # type: ignore[arg-type]
    nemesis._inject(Fault("pause-scheduler", 1.0, 5.0))
    assert nemesis.injected[0]["skipped"] and "crashed, not started again yet" in nemesis.injected[0]["note"]


def test_a_second_kill_connect_waits_until_the_first_ones_server_listens_again(monkeypatch):
    import threading
    import time as clock

    from jepsen import nemesis as nemesis_module
    from jepsen.schedule import Fault

    spans: list[tuple[float, float]] = []

    def kill_and_restart(_stack):  # the kill, then the restart until the server listens: half a second here
        began = clock.monotonic()
        clock.sleep(0.5)
        spans.append((began, clock.monotonic()))
        return began, "killed, listening again"

    monkeypatch.setattr(nemesis_module, "connect_pids", lambda _stack: [1])
    monkeypatch.setattr(nemesis_module, "kill_connect_server", kill_and_restart)
    nemesis = nemesis_module.Nemesis(None, [], 1)  # type: ignore[arg-type]
    threads = [threading.Thread(target=nemesis._inject, args=(Fault("kill-connect", 1.0, 0.0),)) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    (a0, a1), (b0, b1) = sorted(spans)
    assert a1 <= b0, spans  # the second began only once the first's server listened
    assert [e.get("skipped") for e in nemesis.injected] == [None, None]
