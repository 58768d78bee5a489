"""The benchmark's DAG folder: copies of the shipped ``tweets_analytics`` topology, one per measurement, with the
batch size, max_active_transactions and Spark mode as parameters (dags/ stays as it is).

Each copy keeps the shipped job file, states and marker key, reads and writes a Redis database of its own (its own
Airflow connection), and has no schedule: only the benchmark's triggers start runs. All copies are in one DAG
file, so the DAG processor parses one file, not one per copy. The copy over Kafka (P1 --kafka) reads the run's
topic instead, through a transactional KafkaSource (connection kafka_default) taking ``batch // partitions`` records
of each partition per txid, and keeps its states and marker under ``kafka:`` in P1's database. The copy with its
states in PostgreSQL (P1 --pg-states) reads its tweets under ``pg:`` in P1's database and keeps its three states as
tables of a database of their own (``PostgresStore``, connection bench_pg, schema bench), one column per key field.

The copies for the loopback cluster of scripts/cluster.sh (``--cluster``) are copies of dags_cluster/'s instead:
its connections (the sources on the single Redis, the states on the Redis Cluster, spark-submit to the standalone
master) and the Spark settings cluster.sh gives its Airflow (TXDAG_CLUSTER_SPARK_CONF). A Redis Cluster has one
database, so there each copy's keys (source, states, marker) start with its topology id instead.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tput.services import REPO
from txdag.airflow.stores import PostgresStore
from txdag.analytics.tweets import MARKER_KEY
from txdag.state.postgres import table_name

SHIPPED = "tweets_analytics"
PG_CONN_ID = "bench_pg"  # the connection of the states' database (--pg-states)
CLUSTER_SPARK_CONF = "TXDAG_CLUSTER_SPARK_CONF"  # what scripts/cluster.sh gives its Airflow: `txdag pyfiles`' conf


@dataclass(frozen=True)
class Variant:
    """One generated copy of the topology: its DAG id, Redis database and settings."""

    topology_id: str
    db: int
    batch: int
    mat: int
    mode: str  # "connect" (warm) or "submit" (cold)
    commit_poke_interval: float
    cluster: bool = False  # a copy of dags_cluster/'s, for the loopback cluster
    key_prefix: str = ""  # its keys' prefix in a database it shares (not on the cluster)
    kafka_topic: str = ""  # a copy over Kafka: its topic, of ``partitions`` partitions
    partitions: int = 0
    pg_schema: str = ""  # a copy with its states in PostgreSQL (PG_CONN_ID): their schema
    by_source: bool = False  # a copy whose source starts its runs (drain=Backlog), triggered by nobody

    @property
    def pg_tables(self) -> dict[str, tuple[str, int]]:
        """Each state's table and key fields, by state name (a copy with its states in PostgreSQL)."""
        return {s.name: (f'"{self.pg_schema}"."{table_name(self.topology_id, s.name)}"', s.key_fields)
                for s in shipped().states}

    @property
    def conn_id(self) -> str:
        return f"redis_{self.topology_id}"

    @property
    def prefix(self) -> str:
        """What the copy's keys start with: its key_prefix (none in a database of its own), its id on the cluster."""
        return f"{self.topology_id}:" if self.cluster else self.key_prefix

    @property
    def marker_key(self) -> str:
        return f"{self.prefix}{MARKER_KEY}"


def shipped(cluster: bool = False) -> Any:
    """The shipped definition (dags/tweets_analytics.py; ``cluster``: dags_cluster/'s), as the DAG file renders it."""
    return _shipped_in("dags_cluster" if cluster else "dags")


@functools.cache
def _shipped_in(folder: str) -> Any:
    from txdag.topology.topology import load_definitions

    found, errors = load_definitions(REPO / folder)
    if SHIPPED not in found:
        raise RuntimeError(f"{folder}/ defines no {SHIPPED!r} topology (errors: {errors})")
    return found[SHIPPED]


def variants(batch: int, mat: int, poke: float | None, db_base: int,
             kafka: tuple[str, int] | None = None, pg_states: bool = False,
             by_source: bool = False) -> dict[str, Variant]:
    """Every copy the benchmark may use, by role: p1 warm/cold, p2 warm/cold, p4 with 1, 2 and 4 in flight, profile;
    with ``kafka`` (topic, partitions) p1 over that topic too (txids of ``batch // partitions`` per partition); with
    ``pg_states`` p1 with its states in PostgreSQL too; with ``by_source`` p1 with its runs started by its source."""
    poke = shipped().commit_poke_interval if poke is None else poke
    warm = Variant("bench_p1_warm", db_base, batch, mat, "connect", poke)
    roles = {
        "p1_warm": warm,
        "p1_cold": replace(warm, topology_id="bench_p1_cold", db=db_base + 1, mode="submit"),
        "p2_warm": replace(warm, topology_id="bench_p2_warm", db=db_base + 2, mat=1),
        "p2_cold": replace(warm, topology_id="bench_p2_cold", db=db_base + 3, mat=1, mode="submit"),
        "profile": replace(warm, topology_id="bench_profile", db=db_base + 4),
    }
    for i, n in enumerate((1, 2, 4)):
        roles[f"p4_{n}"] = replace(warm, topology_id=f"bench_p4_mat{n}", db=db_base + 5 + i, mat=n)
    if kafka:
        topic, partitions = kafka
        roles["p1_kafka"] = replace(warm, topology_id="bench_p1_kafka", batch=batch // partitions * partitions,
                                    key_prefix="kafka:", kafka_topic=topic, partitions=partitions)
    if pg_states:
        roles["p1_pg"] = replace(warm, topology_id="bench_p1_pg", key_prefix="pg:", pg_schema="bench")
    if by_source:
        roles["p1_source"] = replace(warm, topology_id="bench_p1_source", key_prefix="source:", by_source=True)
    return roles


def cluster_variants(batch: int, mat: int, poke: float | None) -> dict[str, Variant]:
    """The copies for the loopback cluster, by role: a warm-up, P1 (cold: spark-submit to the standalone master)
    and P4 with 1, 2 and 4 in flight (cold too)."""
    poke = shipped(True).commit_poke_interval if poke is None else poke
    p1 = Variant("bench_cluster_p1_cold", 0, batch, mat, "submit", poke, cluster=True)
    roles = {"warm_up": replace(p1, topology_id="bench_cluster_warm_up", mat=1), "p1_cold": p1}
    for n in (1, 2, 4):
        roles[f"p4_{n}"] = replace(p1, topology_id=f"bench_cluster_p4_mat{n}", mat=n)
    return roles


def render(chosen: list[Variant]) -> str:
    """The DAG file's text: one TransactionalTopology per variant, the shipped definition's fields otherwise, each
    rendered into a DAG kept in a module variable named after it (its project_dir is the repository's)."""
    blocks = []
    for v in chosen:
        t = shipped(v.cluster)
        if v.pg_schema:  # a table has a column per key field: no separator
            store = PostgresStore(PG_CONN_ID, schema=v.pg_schema)
            states = [replace(s, namespace=None, separator=None, store=store) for s in t.states]
        else:
            states = [replace(s, namespace=v.prefix + s.redis_key) if v.prefix else s for s in t.states]
        listed = "".join(f"\n        {s!r}," for s in states) + "\n    "
        if v.cluster:  # dags_cluster/'s connections, and Spark settings of the environment cluster.sh gives Airflow
            source_conn, states_conn = t.source.redis_conn_id, t.redis_conn_id
            spark = f"spark_conn_id={t.spark_conn_id!r},\n    spark_conf=CLUSTER_SPARK_CONF,"
        else:
            source_conn = states_conn = v.conn_id
            spark = f"spark_conf={dict(t.spark_conf)!r},"
        if v.kafka_topic:
            source = (f"KafkaSource({v.kafka_topic!r}, kind='transactional', "
                      f"max_per_partition={v.batch // v.partitions})")
        else:
            source = f"TweetsSource(max_transaction_size={v.batch}, prefix={v.prefix!r}, redis_conn_id={source_conn!r})"
        drain = f"\n    drain=Backlog(entries={v.batch}, wait=timedelta(seconds=1), poll=0.5)," if v.by_source else ""
        blocks.append(f"""
{v.topology_id} = render(TransactionalTopology(
    {v.topology_id!r},
    source={source},
    job={t.job!r},
    project_dir={str(REPO)!r},
    states=[{listed}],
    marker_key={v.marker_key!r},
    max_active_transactions={v.mat},
    schedule=None,
    spark_mode={v.mode!r},
    redis_conn_id={states_conn!r},
    retries={t.retries},
    keep_txids={t.keep_txids},
    commit_poke_interval={v.commit_poke_interval!r},
    {spark}{drain}
){", dag_file=__file__" if v.by_source else ""})
""")
    # Airflow's safe mode parses only files that name both "airflow" and "dag": the docstring does.
    cluster = any(v.cluster for v in chosen)
    head = (f'"""Airflow DAGs generated by bench/throughput.py: copies of {"dags_cluster" if cluster else "dags"}/'
            "tweets_analytics.py with the\nbenchmark's batch size, max_active_transactions and Spark mode. Rewritten "
            'at every run."""\n\n')
    if cluster:
        head += "import json\nimport os\n\n"
    by_source = any(v.by_source for v in chosen)
    head += ("from datetime import timedelta\n\n" if by_source else "")
    head += (("from txdag import Backlog, TransactionalTopology\n" if by_source else
              "from txdag import TransactionalTopology\n")
             + "from txdag.airflow import render\n"
             + ("from txdag.airflow.stores import PostgresStore\n" if any(v.pg_schema for v in chosen) else "")
             + ("from txdag.spouts.kafka import KafkaSource\n" if any(v.kafka_topic for v in chosen) else "")
             + "from txdag.topology.definition import State, TweetsSource\n")
    if cluster:
        head += f"\nCLUSTER_SPARK_CONF = json.loads(os.environ.get({CLUSTER_SPARK_CONF!r}) or '{{}}')\n"
    return head + "".join(blocks)


def write_folder(folder: Path, chosen: list[Variant]) -> Path:
    """Writes the DAG file into ``folder`` (created empty) and checks it defines exactly the chosen topologies."""
    from txdag.topology.topology import load_definitions

    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.py"):
        old.unlink()
    path = folder / "bench_tweets.py"
    path.write_text(render(chosen))
    found, errors = load_definitions(folder)
    if errors or set(found) != {v.topology_id for v in chosen}:
        raise RuntimeError(f"the generated {path} defines {sorted(found)} with errors {errors}")
    return path
