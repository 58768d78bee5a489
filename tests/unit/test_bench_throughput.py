"""bench/throughput.py's pure parts: the generated DAG folder, the ground truth, the profile summary, the report.

The measurements themselves need the whole stack and are run by hand (README, Benchmark); these tests check that
what they are built on says what it should, without any server.
"""

from __future__ import annotations

import json
import py_compile
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

from tput import dags, data, profile, report  # noqa: E402

from txdag.topology.topology import load_definitions  # noqa: E402


@pytest.mark.parametrize("module", sorted((BENCH / "tput").glob("*.py")), ids=lambda p: p.name)
def test_every_bench_module_compiles(module, tmp_path):
    py_compile.compile(str(module), cfile=str(tmp_path / "out.pyc"), doraise=True)


def test_the_generated_copies_keep_the_shipped_topology_and_take_the_parameters(tmp_path):
    roles = dags.variants(batch=1234, mat=3, poke=2.5, db_base=4)
    chosen = [roles["p1_warm"], roles["p1_cold"], roles["p4_4"]]
    dags.write_folder(tmp_path, chosen)
    found, errors = load_definitions(tmp_path)
    assert errors == {}
    shipped = dags.shipped()
    for v in chosen:
        t = found[v.topology_id]
        assert (t.source.max_transaction_size, t.max_active_transactions, t.spark_mode) == (v.batch, v.mat, v.mode)
        assert (t.job, t.states, t.marker_key) == (shipped.job, shipped.states, shipped.marker_key)
        assert t.schedule is None and t.commit_poke_interval == 2.5
        assert t.redis_conn_id == t.source.redis_conn_id == v.conn_id
    assert found["bench_p1_cold"].spark_mode == "submit" and found["bench_p4_mat4"].max_active_transactions == 4
    assert len({v.db for v in roles.values()}) == len(roles)  # each copy has a Redis database of its own
    text = (tmp_path / "bench_tweets.py").read_text().lower()
    assert "airflow" in text and "dag" in text  # else Airflow's safe mode skips the file


def test_the_ground_truth_counts_each_user_and_hashtag_once_per_tweet():
    expected = data.expected_counts(["@a #x #x hi", "@a @b #y", "no tags", "@b:#y"])
    assert expected["users"] == {"@a": 2, "@b": 1, "@b:#y": 1}
    assert expected["hashtags"] == {"#x": 1, "#y": 1}
    assert expected["users_hashtags"] == {"@a:#x": 1, "@a:#y": 1, "@b:#y": 1}


def _stack(ti: str, *frames: str, main: bool = True) -> str:
    head = ['process 1:"airflow scheduler"', f'process 2:"airflow worker -- LocalExecutor: {ti}"']
    root = ["<module> (airflow:6)"] if main else ["_bootstrap (threading.py:1002)"]
    return ";".join(head + root + ["_subprocess_main (airflow/sdk/execution_time/supervisor.py:254)", *frames])


def test_the_profile_gives_each_stack_to_its_task_and_names_the_calls_out_of_txdag():
    ti_p, ti_c = "01a207a0-af68-7071-9a04-c404094e6d6f", "01a207a0-b189-7d87-8981-1f7cdf109e88"
    execute = "_execute_task (airflow/sdk/execution_time/task_runner.py:2234)"
    lines = [
        _stack(ti_p, execute, "process_txid (txdag/airflow/operators.py:90)",
               "collect_partials (txdag/spark/runner.py:99)", "collect (pyspark/sql/connect/dataframe.py:1)") + " 30",
        _stack(ti_p, execute, "process_txid (txdag/airflow/operators.py:91)") + " 10",
        _stack(ti_p, "parse (airflow/dag_processing/x.py:1)") + " 20",  # outside execute: start-up
        _stack(ti_p, execute, "process_txid (txdag/airflow/operators.py:90)", main=False) + " 99",  # a thread
        _stack(ti_c, execute, "commit_transaction (txdag/commit.py:5)") + " 4",
        _stack("ffffffff-0000-0000-0000-000000000000", execute) + " 7",  # a task of another DAG
    ]
    summary = profile.summarize(lines, {ti_p: "process", ti_c: "commit"})
    assert set(summary) == {"process", "commit"}
    process = summary["process"]
    assert process["seconds"] == 3.0 and process["outside_execute"] == 1.0
    assert dict(process["txdag"])["process_txid (txdag/airflow/operators.py)"] == 2.0
    assert process["calls"][0] == ("collect_partials (txdag/spark/runner.py) -> "
                                   "collect (pyspark/sql/connect/dataframe.py)", 1.5)
    assert summary["commit"]["seconds"] == 0.2
    assert "process: 3.0 s (0.30 s per txid)" in profile.format_summary(summary, 10)


def _results() -> dict:
    drain = {"tweets": 1000, "txids": 10, "batch": 100, "mat": 2, "mode": "connect", "seconds": 20.0, "rate": 50.0,
             "median_per_txid": {"coordinate": 1.0, "process": 2.0, "commit": 0.5, "gap c>p": 1.0, "gap p>c": 1.5,
                                 "total": 6.0},
             "job_per_txid": {"import": 0.3, "connect": 0.02, "read": 0.05, "plan": 0.1, "stage": 0.6, "seal": 0.01,
                              "airflow": 0.92},
             "commits": [2.0 * i for i in range(1, 11)],
             "cpu": {"seconds": 20.0, "cores": 2, "busy_share": 0.85, "busy_core_seconds": 34.0,
                     "core_seconds": {"airflow scheduler": 20.0, "spark-connect": 10.0}, "other_core_seconds": 4.0},
             "cpu_per_txid": {"airflow scheduler": 2.0, "spark-connect": 1.0, "other": 0.4, "all": 3.4}}
    part = {"median": 1.0, "min": 0.5, "max": 2.0}
    return {
        "started": "2026-11-23T00:00:00Z", "settings": {"tweets": 1000, "batch": 100, "command": "x"},
        "p1": {"txdag_warm": drain, "baseline": {"tweets": 1000, "seconds": 0.1, "rate": 10000.0},
               "peer": {"tweets": 1000, "seconds": 10.0, "rate": 100.0, "micro_batches": 10},
               "ratios": {"txdag/baseline": 0.005, "txdag/peer": 0.5}},
        "p2": {"warm": {"samples": [{}, {}, {}], "summary": {k: part for k in
                                                             ("total", "wait", "coordinate", "process", "commit")},
                        "job": {"read": 0.01, "stage": 0.4, "airflow": 0.59},
                        "cpu": {"seconds": 9.0, "cores": 2, "busy_share": 0.4, "busy_core_seconds": 7.2,
                                "core_seconds": {"airflow scheduler": 4.5, "spark-connect": 2.1},
                                "other_core_seconds": 0.6},
                        "cpu_per_txid": {"airflow scheduler": 1.5, "spark-connect": 0.7, "other": 0.2, "all": 2.4},
                        "idle_cpu": {"seconds": 15.0, "cores": 2, "busy_share": 0.05, "busy_core_seconds": 1.5,
                                     "core_seconds": {"airflow scheduler": 1.0, "spark-connect": 0.5},
                                     "other_core_seconds": 0.0},
                        "cpu_per_txid_above_idle": {"airflow scheduler": 1.3, "spark-connect": 0.6, "other": 0.2,
                                                    "all": 2.1}}},
        "p3": {"keys": 100, "repeat": 1, "rows": [["txdag commit", 5.0], ["redis-benchmark -t hset -P 16", 10.0]],
               "ratios": {"txdag commit / redis-benchmark HSET": 0.5}},
        "p4": {"tweets": 1000, "drains": {"1": drain, "2": drain, "4": drain}, "ratio_4_1": 1.0},
        "memory": {"Spark Connect server JVM": {"peak_mb": 800.0, "peak_process_mb": 800.0, "processes": 1}},
    }


def test_the_table_has_every_figure_and_the_chart_is_a_png(tmp_path, capsys):
    results = _results()
    text = report.print_table(results)
    for figure in ("P1 txdag, warm Spark", "P1 ratio txdag/peer", "P2 warm: scheduler wait", "P3 ratio",
                   "P4 ratio mat=4 / mat=1", "peak RSS: Spark Connect server JVM", "P1 warm, per txid",
                   "P1 warm, process task: import / connect / read / plan / stage / seal / airflow",
                   "0.30 / 0.02 / 0.05 / 0.10 / 0.60 / 0.01 / 0.92 s", "P2 warm, process task: read / stage",
                   "P1 warm: cores busy", "P4 max_active_transactions = 4: cores busy", "P2 warm: cores busy",
                   "P2 warm: core-s per txid above idle", "idle: 0.10 core-s per second (15 s before the samples)",
                   "core-s per txid 3.40: airflow scheduler + tasks 2.00, Spark Connect (JVM + Python workers) 1.00, "
                   "other 0.40"):
        assert figure in text
    assert "50 tweets/s" in text and "0.5x" in text
    assert json.loads(report.write_json(results, tmp_path).read_text())["p1"]["ratios"]["txdag/peer"] == 0.5
    chart = report.write_chart(results, tmp_path)
    assert chart is not None and chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_cpu_panel_has_each_drain_with_its_busy_share_and_components():
    rows = report.cpu_rows(_results())
    assert list(rows) == ["P1 warm", "P4 mat=1", "P4 mat=2", "P4 mat=4"]
    assert rows["P1 warm"] == (0.85, {"airflow scheduler + tasks": 2.0, "Spark Connect (JVM + Python workers)": 1.0,
                                      "other": 0.4})


def test_a_txid_splits_into_its_phases_in_order():
    rows = report.phase_rows(_results())
    assert list(rows) == ["P1 warm", "P2 warm"]
    assert rows["P1 warm"] == {"scheduler wait": 2.5, "coordinate": 1.0, "process: import": 0.3,
                               "process: connect": 0.02, "process: read": 0.05, "process: plan": 0.1,
                               "process: stage": 0.6, "process: seal": 0.01, "process: airflow": 0.92, "commit": 0.5}
    assert sum(v for k, v in rows["P1 warm"].items() if k.startswith("process")) == pytest.approx(2.0)
    assert list(rows["P2 warm"]) == ["scheduler wait", "coordinate", "process: read", "process: stage",
                                     "process: airflow", "commit"]


def test_the_job_steps_come_from_the_process_tasks_last_try():
    from tput import drain

    class Api:
        def task_log(self, dag, run, task, try_number):
            assert (run, task, try_number) == ("r", "process", 2)
            return ("... txdag job done: topology=t txid=1 attempt=1 batch=5 rejected=0 partials: none; timings: "
                    "import 0.250 s, connect 0.030 s, read 0.100 s, stage 0.500 s, seal 0.020 s\nnext line\n"
                    "... topology=t txid=2: waited 0.40s for txid 1 to commit or fail (it did)")

    steps = drain.job_steps(Api(), "d", {"run": "r", "process": 1.5, "process_try": 2})
    assert steps == {"import": 0.25, "connect": 0.03, "read": 0.1, "stage": 0.5, "seal": 0.02, "predecessor": 0.4,
                     "airflow": pytest.approx(0.2)}
    assert drain.median_steps([{"a": 1.0, "b": 2.0}, {"a": 3.0}, {"b": 4.0, "c": 1.0}]) == {"a": 2.0, "b": 3.0,
                                                                                              "c": 1.0}


def test_the_sampler_files_a_process_and_its_children_under_their_groups():
    import subprocess as sp

    from tput import memory

    child = sp.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        sampler = memory.RssSampler({"airflow scheduler": __import__("os").getpid()})
        sampler.sample()
        peaks = sampler.stop()
    finally:
        child.kill()
        child.wait()
    assert peaks["airflow scheduler"]["processes"] == 1 and peaks["airflow scheduler"]["peak_mb"] > 1
    task = peaks["Airflow task processes (executor workers, tasks)"]
    assert task["processes"] >= 1 and task["peak_process_mb"] <= task["peak_mb"]


def test_the_cpu_meter_counts_a_child_that_ran_and_exited_under_its_tree():
    import os
    import subprocess as sp

    from tput import cpu

    meter = cpu.CpuMeter({"this test": os.getpid()}).start()
    burn = "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end: pass"
    sp.run([sys.executable, "-c", burn], check=True)  # reaped: its time is in this process's children_* times
    used = meter.stop()
    assert 0.3 <= used["core_seconds"]["this test"] < 5
    assert used["busy_core_seconds"] >= 0.3 and 0 < used["busy_share"] <= 1
    assert cpu.per_txid(used, 2)["this test"] == pytest.approx(used["core_seconds"]["this test"] / 2, abs=0.01)


# --- --kafka (issue 32): P1 over a Kafka topic beside the Redis source -----------------------------------------------


def test_kafka_adds_to_p1_and_takes_a_batch_that_holds_its_partitions():
    import throughput

    args = throughput.parse_args(["--quick", "--only", "P1", "--kafka", "--kafka-port", "9999", "--out", "/tmp/x"])
    assert args.kafka and args.kafka_partitions == 4 and args.kafka_port == 9999 and args.batch == 2000
    assert not throughput.parse_args(["--only", "P1", "--out", "/tmp/x"]).kafka
    for argv in (["--kafka", "--only", "P2"], ["--kafka", "--batch", "3", "--kafka-partitions", "4"]):
        with pytest.raises(SystemExit):
            throughput.parse_args([*argv, "--out", "/tmp/x"])


def test_the_kafka_copy_reads_the_topic_and_keeps_its_keys_under_kafka_in_p1s_database(tmp_path):
    roles = dags.variants(batch=1003, mat=2, poke=None, db_base=4, kafka=("txdag-bench-t", 4))
    v = roles["p1_kafka"]
    assert (v.db, v.batch, v.prefix, v.kafka_topic) == (roles["p1_warm"].db, 1000, "kafka:", "txdag-bench-t")
    assert "p1_kafka" not in dags.variants(batch=1003, mat=2, poke=None, db_base=4)
    dags.write_folder(tmp_path, [roles["p1_warm"], v])
    found, errors = load_definitions(tmp_path)
    assert errors == {}
    t, shipped = found["bench_p1_kafka"], dags.shipped()
    assert (t.source.topic, t.source.kind.value, t.source.max_per_partition) == ("txdag-bench-t", "transactional", 250)
    assert t.source.kafka_conn_id == "kafka_default" and t.redis_conn_id == v.conn_id
    assert [s.redis_key for s in t.states] == ["kafka:" + s.redis_key for s in shipped.states]
    assert t.commit_marker == v.marker_key == "kafka:" + shipped.marker_key and t.job == shipped.job
    keys = {(r.db, r.prefix) for r in roles.values()}
    assert len(keys) == len(roles)  # each copy's keys apart from every other's


def test_the_kafka_figures_sit_beside_the_redis_ones_with_their_ratios(tmp_path, capsys):
    results = _results()
    p1 = results["p1"]
    p1["txdag_kafka"] = {**p1["txdag_warm"], "rate": 25.0, "partitions": 4}
    p1["peer_kafka"] = {"tweets": 1000, "seconds": 5.0, "rate": 200.0, "micro_batches": 10, "batch": 100}
    p1["ratios"].update({"txdag kafka/txdag redis": 0.5, "txdag kafka/peer kafka": 0.125})
    text = report.print_table(results)
    figures = [line.split("  ")[0] for line in text.splitlines()]
    assert figures.index("P1 txdag, warm Spark (connect)") + 1 == figures.index(
        "P1 txdag over Kafka, warm Spark (connect)")
    for figure in ("P1 Spark Structured Streaming peer over Kafka", "P1 ratio txdag kafka/txdag redis",
                   "P1 ratio txdag kafka/peer kafka", "P1 kafka, per txid", "P1 kafka: cores busy",
                   "10 txids of 100, 2 in flight, 4 partitions", "0.125x"):
        assert figure in text
    assert list(report.cpu_rows(results))[:2] == ["P1 warm", "P1 kafka"]
    assert report.write_chart(results, tmp_path) is not None


# --- --pg-states (issue 33): P1 with the states in PostgreSQL beside Redis -------------------------------------------


def test_pg_states_adds_to_p1_only():
    import throughput

    assert throughput.parse_args(["--quick", "--only", "P1", "--pg-states", "--out", "/tmp/x"]).pg_states
    assert not throughput.parse_args(["--only", "P1", "--out", "/tmp/x"]).pg_states
    with pytest.raises(SystemExit):
        throughput.parse_args(["--pg-states", "--only", "P2,P3", "--out", "/tmp/x"])


def test_the_pg_copy_keeps_its_states_as_tables_of_the_bench_pg_connection(tmp_path):
    from txdag.airflow.stores import PostgresStore

    roles = dags.variants(batch=1000, mat=2, poke=None, db_base=4, pg_states=True)
    v, warm = roles["p1_pg"], roles["p1_warm"]
    assert "p1_pg" not in dags.variants(batch=1000, mat=2, poke=None, db_base=4)
    assert (v.db, v.batch, v.prefix, v.pg_schema) == (warm.db, 1000, "pg:", "bench")
    dags.write_folder(tmp_path, [warm, v])
    found, errors = load_definitions(tmp_path)
    assert errors == {}
    t, shipped = found["bench_p1_pg"], dags.shipped()
    assert t.source.prefix == "pg:" and t.job == shipped.job and t.commit_marker == "pg:" + shipped.marker_key
    assert [(s.name, s.kind, s.key_fields) for s in t.states] == [(s.name, s.kind, s.key_fields)
                                                                  for s in shipped.states]
    assert all(s.store == PostgresStore(dags.PG_CONN_ID, schema="bench") and s.separator is None for s in t.states)
    assert v.pg_tables["users_hashtags"] == ('"bench"."bench_p1_pg__users_hashtags"', 2)
    assert found["bench_p1_warm"].states == shipped.states  # the copy beside it keeps its Redis hashes
    assert len({(r.db, r.prefix) for r in roles.values()}) == len(roles)


# --- --by-source (issue 34 item 3): P1 with the runs started by the topology's source, triggered by nobody ---------


def test_by_source_adds_to_p1_only():
    import throughput

    assert throughput.parse_args(["--only", "P1", "--by-source", "--out", "/tmp/x"]).by_source
    with pytest.raises(SystemExit):
        throughput.parse_args(["--by-source", "--only", "P2", "--out", "/tmp/x"])


def test_the_by_source_copy_drains_by_itself_a_batch_at_a_time_beside_the_triggered_one(tmp_path):
    from datetime import timedelta

    from txdag import Backlog

    roles = dags.variants(batch=1000, mat=2, poke=None, db_base=4, by_source=True)
    v, warm = roles["p1_source"], roles["p1_warm"]
    assert "p1_source" not in dags.variants(batch=1000, mat=2, poke=None, db_base=4)
    assert (v.db, v.batch, v.mat, v.prefix, v.by_source) == (warm.db, 1000, 2, "source:", True)
    dags.write_folder(tmp_path, [warm, v])
    found, errors = load_definitions(tmp_path)
    assert errors == {}
    assert found["bench_p1_source"].drain == Backlog(entries=1000, wait=timedelta(seconds=1), poll=0.5)
    assert found["bench_p1_source"].source.prefix == "source:" and found["bench_p1_warm"].drain is None
    assert len({(r.db, r.prefix) for r in roles.values()}) == len(roles)


def test_counts_by_key_tuple_name_the_keys_that_differ():
    truth = data.Backlog(0)
    truth.tweets = ["@a #x", "@a @b #y"]
    want = truth.partials(2)
    assert want["users_hashtags"] == {("@a", "#x"): 1, ("@a", "#y"): 1, ("@b", "#y"): 1}
    data.compare({s: dict(c) for s, c in want.items()}, want, "copy", "PostgreSQL schema bench")
    got = {s: dict(c) for s, c in want.items()}
    got["users"][("@a",)] = 3
    del got["hashtags"][("#y",)]
    with pytest.raises(data.CountMismatch, match=r"users: 1 of 2 keys differ \(\('@a',\): expected 2, got 3\).*"
                                                  r"hashtags: 1 of 2 keys differ \(\('#y',\): expected 1, got None"):
        data.compare(got, want, "copy", "PostgreSQL schema bench")


def test_the_pg_figures_sit_beside_the_redis_ones_with_their_ratio(tmp_path, capsys):
    results = _results()
    p1 = results["p1"]
    p1["txdag_pg"] = {**p1["txdag_warm"], "rate": 40.0}
    p1["ratios"]["txdag pg states/txdag redis states"] = 0.8
    text = report.print_table(results)
    figures = [line.split("  ")[0] for line in text.splitlines()]
    assert figures.index("P1 txdag, warm Spark (connect)") + 1 == figures.index(
        "P1 txdag, states in PostgreSQL, warm Spark (connect)")
    for figure in ("P1 ratio txdag pg states/txdag redis states", "P1 pg, per txid", "P1 pg: cores busy", "0.8x"):
        assert figure in text
    assert list(report.cpu_rows(results))[:2] == ["P1 warm", "P1 pg"]
    assert report.write_chart(results, tmp_path) is not None


# --- --cluster (issue 17): P1 cold and P4 on scripts/cluster.sh's loopback cluster ---------------------------------


def test_cluster_implies_cold_p1_and_needs_p1_or_p4():
    import throughput

    args = throughput.parse_args(["--cluster", "--only", "P1,P4", "--out", "/tmp/x"])
    assert args.cluster and args.cold and args.phases == ["P1", "P4"]
    assert not throughput.parse_args(["--cluster", "--only", "P4", "--out", "/tmp/x"]).cold  # no P1: nothing cold
    assert not throughput.parse_args(["--only", "P1", "--out", "/tmp/x"]).cold
    with pytest.raises(SystemExit):
        throughput.parse_args(["--cluster", "--only", "P2,P3", "--out", "/tmp/x"])


def test_the_cluster_copies_take_the_cluster_dags_connections_and_a_key_prefix_each(tmp_path, monkeypatch):
    roles = dags.cluster_variants(batch=1234, mat=3, poke=2.5)
    assert list(roles) == ["warm_up", "p1_cold", "p4_1", "p4_2", "p4_4"]
    dags.write_folder(tmp_path, list(roles.values()))
    monkeypatch.setenv(dags.CLUSTER_SPARK_CONF, '{"spark.cores.max": "1"}')  # as cluster.sh gives its Airflow
    found, errors = load_definitions(tmp_path)
    assert errors == {}
    shipped = dags.shipped(cluster=True)
    assert (shipped.redis_conn_id, shipped.spark_conn_id) == ("redis_cluster", "spark_cluster")
    for v in roles.values():
        t = found[v.topology_id]
        assert (t.source.max_transaction_size, t.max_active_transactions, t.spark_mode) == (v.batch, v.mat, "submit")
        assert (t.redis_conn_id, t.spark_conn_id, t.source.redis_conn_id) == (
            shipped.redis_conn_id, shipped.spark_conn_id, shipped.source.redis_conn_id)
        assert t.spark_conf == {"spark.cores.max": "1"} and t.job == shipped.job and t.schedule is None
        # a Redis Cluster has database 0 only: every key of a copy starts with its id
        prefix = f"{v.topology_id}:"
        assert v.prefix == t.source.prefix == prefix and t.commit_marker == v.marker_key == prefix + shipped.marker_key
        assert [s.name for s in t.states] == [s.name for s in shipped.states]
        assert [s.redis_key for s in t.states] == [prefix + s.redis_key for s in shipped.states]
    prefixes = [v.prefix for v in roles.values()]
    assert not any(a != b and b.startswith(a) for a in prefixes for b in prefixes)
    text = (tmp_path / "bench_tweets.py").read_text()
    assert "dags_cluster/tweets_analytics.py" in text and "redis_bench_" not in text
    single = dags.render([dags.variants(batch=10, mat=1, poke=None, db_base=4)["p1_warm"]])
    assert "CLUSTER_SPARK_CONF" not in single and "prefix=''" in single  # the single node's copies as they were


def _with_cluster() -> dict:
    results = _results()
    results["p1"]["txdag_cold"] = {**results["p1"]["txdag_warm"], "mode": "submit", "rate": 20.0}
    cold = {**results["p1"]["txdag_cold"], "rate": 10.0,
            "cpu_per_txid": {"celery worker": 3.0, "spark worker": 1.5, "zookeeper": 0.2, "other": 0.1, "all": 4.8}}
    results["cluster"] = {
        "p1": {"txdag_cold": cold},
        "p4": {"tweets": 1000, "drains": {"1": {**cold, "rate": 5.0}, "2": {**cold, "rate": 7.5},
                                          "4": {**cold, "rate": 10.0}}, "ratio_4_1": 2.0},
        "memory": {"celery worker": {"peak_mb": 300.0, "peak_process_mb": 150.0, "processes": 2}},
    }
    return results


def test_the_cluster_figures_sit_beside_the_single_nodes_as_ratios(tmp_path, capsys):
    results = _with_cluster()
    ratios = report.cluster_ratios(results)
    assert [(figure, value) for figure, value, _ in ratios] == [
        ("P1 cold", 0.5), ("P4 max_active_transactions = 1", 0.1), ("P4 max_active_transactions = 2", 0.15),
        ("P4 max_active_transactions = 4", 0.2)]
    assert ratios[0][2] == "10 tweets/s (spark-submit) / 20 (spark-submit), 1,000 tweets each"
    assert ratios[1][2].startswith("5 tweets/s (spark-submit) / 50 (warm Spark Connect)")
    text = report.print_table(results)
    for figure in ("cluster: P1 txdag, cold spark-submit", "cluster: P1 cold, per txid: coordinate / process / commit",
                   "cluster: P4 max_active_transactions = 4", "cluster: P4 ratio mat=4 / mat=1",
                   "cluster: peak RSS: celery worker", "cluster / single node: P1 cold",
                   "cluster / single node: P4 max_active_transactions = 2", "Celery workers + tasks 3.00",
                   "Spark workers + executors 1.50"):
        assert figure in text
    assert "cluster: P1 ratio" not in text and "cluster / single node: P1 warm" not in text
    assert list(report.phase_rows(results)) == ["P1 warm", "P1 cold", "P2 warm", "cluster P1 cold"]
    rows = report.cpu_rows(results)
    assert list(rows)[-4:] == ["cluster P1 cold", "cluster P4 mat=1", "cluster P4 mat=2", "cluster P4 mat=4"]
    assert rows["cluster P1 cold"][1]["Celery workers + tasks"] == 3.0
    assert rows["P1 warm"][1]["airflow scheduler + tasks"] == 2.0  # the single node's labels stay
    chart = report.write_chart(results, tmp_path)
    assert chart is not None and chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert report.cluster_ratios(_results()) == [] and "cluster" not in report.print_table(_results())


def test_the_cluster_is_read_from_cluster_sh_env_and_its_nodes_from_their_pid_files(tmp_path, monkeypatch):
    from tput import cluster, services

    env = services.exports("export TXDAG_CLUSTER_ZK_HOSTS=127.0.0.1:2291,127.0.0.1:2292\n"
                           "export TXDAG_CLUSTER_REDIS_NODES=127.0.0.1:7301,127.0.0.1:7302\n"
                           "export TXDAG_CLUSTER_SPARK_MASTER=spark://127.0.0.1:7377\n"
                           "export TXDAG_CLUSTER_SINGLE_REDIS=127.0.0.1:7391\n"
                           "export TXDAG_CLUSTER_AIRFLOW_URL=http://127.0.0.1:8891\n"
                           f"export TXDAG_CLUSTER_AIRFLOW_HOME={tmp_path}/airflow-8891\n")
    assert [cluster.port_of(a) for a in ("127.0.0.1:2291", env["TXDAG_CLUSTER_SPARK_MASTER"],
                                         env["TXDAG_CLUSTER_AIRFLOW_URL"])] == [2291, 7377, 8891]
    monkeypatch.setattr(cluster, "RUN", tmp_path)
    for path in ("airflow-8891/celery/worker1.pid", "airflow-8891/celery/worker2.pid", "spark-7377-master/spark.pid",
                 "spark-7377-worker-1/spark.pid", "spark-7477-worker-1/spark.pid", "zk-2291/zookeeper.pid",
                 "zk-2391/zookeeper.pid", "redis-7302/redis.pid"):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("123\n")
    c = cluster.Cluster(stack=None, addresses=env)  # type: ignore[arg-type]
    assert sorted(c.pid_files()) == ["celery worker #1", "celery worker #2", "redis cluster #7302", "spark master",
                                     "spark worker #1", "zookeeper #2291"]  # another cluster's ports left out
    assert c.home == tmp_path / "airflow-8891" and c.url == "http://127.0.0.1:8891"
    assert cluster.cluster_env(tmp_path, {"AIRFLOW__CORE__X": "1"}) == {
        "TXDAG_CLUSTER_DAGS_FOLDER": str(tmp_path), "TXDAG_AIRFLOW_DB": cluster.AIRFLOW_DB,
        "TXDAG_AIRFLOW_FRESH_DB": "1", "TXDAG_AIRFLOW_REDIS_DB": "0", "AIRFLOW__CORE__X": "1"}


def test_a_cluster_components_nodes_count_as_one():
    import os

    from tput import cpu, memory

    assert cpu.component("zookeeper #2291") == "zookeeper" and cpu.component("airflow scheduler") == "airflow scheduler"
    used = cpu.CpuMeter({"node #1": os.getpid(), "node #2": os.getpid()}).start().stop()
    assert list(used["core_seconds"]) == ["node"]
    # a process of its own: pytest's may have Spark's Python workers below it (a Spark test in the same process)
    worker = subprocess.Popen(["sleep", "30"])
    try:
        sampler = memory.RssSampler({"celery worker #1": worker.pid})
        sampler.sample()
        assert list(sampler.stop()) == ["celery worker"]
    finally:
        worker.kill()
        worker.wait()


def test_batches_runs_p1_alone_once_per_size_and_refuses_what_does_not_vary_per_size(capsys):
    import throughput

    args = throughput.parse_args(["--batches", "100_000,20000", "--tweets", "200000", "--out", "/tmp/x"])
    assert (args.batches, args.phases, args.batch) == ([20_000, 100_000], ["P1"], 20_000)
    assert throughput.parse_args(["--batches", "20000", "--only", "p1", "--tweets", "40000"]).phases == ["P1"]
    assert throughput.parse_args(["--only", "P1", "--out", "/tmp/x"]).batches is None
    for argv, says in ((["--batches", "0"], "at least 1"), (["--batches", "20000,x"], "whole numbers"),
                       (["--batches", "20000,20000"], "names a size twice"),
                       (["--batches", "20000", "--batch", "5"], "leave out --batch"),
                       (["--batches", "20000", "--only", "P1,P2"], "--only P1"),
                       (["--batches", "20000", "--cluster"], "leave out --cluster"),
                       (["--batches", "20000", "--keep-data"], "needs --flush"),
                       (["--batches", "300000", "--tweets", "200000"], "more than the backlog")):
        with pytest.raises(SystemExit) as raised:
            throughput.parse_args([*argv, "--out", "/tmp/x"])
        assert raised.value.code == 2 and says in capsys.readouterr().err, argv
    quick = throughput.parse_args(["--batches", "10000,20000", "--quick", "--kafka", "--kafka-partitions", "4"])
    assert (quick.batch, quick.tweets, quick.batches) == (10_000, 20_000, [10_000, 20_000])


def _size_results(batch: int, txdag: float, peer: float, error: str | None = None) -> dict:
    p1 = {"txdag_warm": {"tweets": 100_000, "rate": txdag, "txids": 100_000 // batch,
                         "cpu": {"busy_core_seconds": 50.0}},
          "peer": {"tweets": 100_000, "rate": peer, "busy_core_seconds": 20.0},
          "baseline": {"tweets": 100_000, "rate": 40_000.0, "busy_core_seconds": 4.0}}
    return {"p1": p1, "memory": {"spark-connect": {"peak_mb": 900.0}}, **({"error": error} if error else {})}


def test_a_curve_row_has_each_sides_rate_core_seconds_per_1000_tweets_ratios_and_memory():
    from tput import curve

    r = curve.row(20_000, _size_results(20_000, 5_000.0, 10_000.0))
    assert r["rate"] == {"txdag_warm": 5_000.0, "peer": 10_000.0, "baseline": 40_000.0}
    assert r["core_s_per_1k"] == pytest.approx({"txdag_warm": 0.5, "peer": 0.2, "baseline": 0.04})
    assert r["ratios"] == pytest.approx({"txdag/peer": 0.5, "txdag/baseline": 0.125})
    assert (r["txids"], r["peak_rss_mb"], "error" in r) == (5, {"spark-connect": 900.0}, False)
    failed = curve.row(500_000, {"p1": {}, "error": "BenchError: the Connect server died"})
    assert (failed["rate"], failed["error"]) == ({}, "BenchError: the Connect server died")
    text = curve.table([r, failed])
    assert "Spark peer" in text and "txdag/peer" in text and "0.125x" in text and "FAILED: BenchError" in text


def test_the_curve_runs_each_size_into_its_own_folder_and_goes_on_after_a_failed_size(tmp_path):
    import throughput
    from tput import curve

    args = throughput.parse_args(["--batches", "50000,20000", "--tweets", "100000", "--out", str(tmp_path)])
    seen = []

    def fake_run(one, out, settings):  # the sizes' runs are the real runner's: here only what run_curve does
        seen.append((one.batch, out.name, one.out == str(out)))
        failed = "BenchError: died" if one.batch == 20_000 else None
        (out / "results.json").write_text(json.dumps(_size_results(one.batch, 1_000.0 * one.batch / 10_000,
                                                                   8_000.0, failed)))
        return 1 if failed else 0

    assert curve.run_curve(args, tmp_path, throughput.settings, fake_run) == 1
    assert seen == [(20_000, "batch-20000", True), (50_000, "batch-50000", True)]
    written = json.loads((tmp_path / "curve.json").read_text())
    assert [(r["batch"], r["rate"]["txdag_warm"], "error" in r) for r in written["rows"]] == [
        (20_000, 2_000.0, True), (50_000, 5_000.0, False)]
    assert (tmp_path / "curve.png").stat().st_size > 0


def test_a_sparse_txids_core_seconds_leave_out_what_the_components_use_idle():
    from tput import cpu

    idle = {"seconds": 10.0, "busy_core_seconds": 2.0, "other_core_seconds": 0.5,
            "core_seconds": {"airflow scheduler": 1.0, "spark-connect": 0.2}}
    used = {"seconds": 20.0, "busy_core_seconds": 14.0, "other_core_seconds": 0.4,
            "core_seconds": {"airflow scheduler": 8.0, "spark-connect": 5.0, "redis": 0.1}}
    assert cpu.above_idle(used, idle, 5) == {"airflow scheduler": 1.2, "spark-connect": 0.92, "redis": 0.02,
                                             "other": 0.0, "all": 2.0}
