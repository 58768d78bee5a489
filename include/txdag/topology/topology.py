"""TransactionalTopology: Storm's TransactionalTopologyBuilder as one frozen, validated definition.

The definition is data: building it validates every field (a mistake fails the DAG file at parse time, with a
message that says what to change) and does nothing else: it reads no environment, looks up no connection and
imports no Airflow. A DAG file turns it into an Airflow DAG with an explicit call::

    from txdag import TransactionalTopology
    from txdag.airflow import render

    dag = render(TransactionalTopology("tweets", ...), dag_file=__file__)

``render`` (``txdag.airflow.rendering``) takes the project root (where a relative ``job`` lives) from the DAG
file's location, and :func:`load_definitions` reads the topologies of a DAG folder for the CLI and the UI.
"""

from __future__ import annotations

import difflib
import os
import re
import runpy
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from txdag.defaults import (
    COMMIT_POKE_INTERVAL,
    EXECUTION_TIMEOUT,
    KEEP_TXIDS,
    MAX_RETRY_DELAY,
    POOL_PREFIX,
    RETRIES,
    RETRY_DELAY,
    SPARK_CONN_ID,
    SPARK_CONNECT_CONN_ID,
    ZOOKEEPER_CONN_ID,
)
from txdag.errors import ConfigError
from txdag.keyspace import literal
from txdag.spouts.base import Source, source_params
from txdag.state.marker import default_key
from txdag.state.redis_backing import state_keys
from txdag.topology.definition import (
    DEFAULT_REDIS_CONN_ID,
    KeyValue,
    Sink,
    State,
    StreamsSource,
    TweetsSource,
    check_name,
)
from txdag.txid.backlog import Backlog

DEFAULT_START = datetime(2026, 1, 1, tzinfo=UTC)
SPARK_MODES = ("submit", "connect")
LONGEST_ID = 200  # Airflow's DAG ids take 250 characters, its pool names 256 (with the pool's prefix)
LONGEST_POKE = 86_400  # seconds: a commit's wait between checks (and a deferral's limit) fits in Airflow's dates


@dataclass(frozen=True, eq=False)
class TransactionalTopology:
    """One topology: where batches come from, the Spark job that processes one, the states its commit writes.

    ``max_active_transactions`` is Storm's ``topology.max.spout.pending`` (the DAG's ``max_active_runs``);
    ``schedule`` is the batch emit interval; with ``drain`` (a ``Backlog``) the source also starts a txid by
    itself while it has entries waiting (``txdag.txid.backlog``). ``job`` is the PySpark file, relative to the
    project root (the folder that holds ``dags/`` and ``spark_jobs/``) unless absolute or a URL (``s3://``...).
    Connections are Airflow connection ids: Redis for the states and staging, ZooKeeper for the txids,
    Spark for ``spark-submit``. ``project_dir`` unset, a relative ``job`` is resolved against the folder above the
    DAG file's folder (``<project>/dags/x.py`` -> ``<project>``) by :meth:`located`, which ``render(...,
    dag_file=__file__)`` and :func:`load_definitions` call; the job file's existence is checked then.

    ``spark_mode`` picks how ``process`` runs the job: ``"submit"``, one spark-submit application per txid (cold;
    what a cluster deployment uses), or ``"connect"``, the job run inside the task against a long-running Spark
    Connect server (warm: no JVM start per txid), found through ``spark_connect_conn_id``. Same job file, same
    staging and commit. It is part of the definition: no environment variable changes it.

    ``key_values`` are the KeyValueStates (seed 002) of the job's stateful steps. A step reads its state as of
    the txid before, so a topology with key-value states processes txid N once txid N - 1 is committed (its
    runs still overlap coordination and commits). ``sinks`` are the committers (Storm's committer bolts) the commit
    hands their rows to, in txid order (docs/topologies.md, "Sinks").
    """

    topology_id: str
    source: Source
    job: str
    states: Sequence[State]
    key_values: Sequence[KeyValue] = ()
    sinks: Sequence[Sink] = ()
    marker_key: str | None = None
    max_active_transactions: int = 1
    schedule: Any = None
    drain: Backlog | None = None  # start a txid when the source has a backlog, beside the schedule
    start_date: datetime = DEFAULT_START
    catchup: bool = False
    retries: int = RETRIES  # automatic replays of a transient failure (txdag.txid.healing); why 60: txdag.defaults
    retry_delay: timedelta = RETRY_DELAY  # the first wait before one; it doubles per try, up to max_retry_delay
    max_retry_delay: timedelta = MAX_RETRY_DELAY
    execution_timeout: timedelta | None = EXECUTION_TIMEOUT  # why 30 min: txdag.defaults
    redis_conn_id: str = DEFAULT_REDIS_CONN_ID
    zookeeper_conn_id: str = ZOOKEEPER_CONN_ID
    spark_conn_id: str = SPARK_CONN_ID
    spark_conf: Mapping[str, str] = field(default_factory=dict)
    spark_mode: str = "submit"
    spark_connect_conn_id: str = SPARK_CONNECT_CONN_ID
    keep_txids: int = KEEP_TXIDS
    commit_poke_interval: float = COMMIT_POKE_INTERVAL  # why 10 s: txdag.defaults
    description: str | None = None
    project_dir: str | None = None

    def __post_init__(self) -> None:
        check_name("topology_id", self.topology_id)
        if len(self.topology_id) > LONGEST_ID:
            raise ConfigError(f"topology_id must be at most {LONGEST_ID} characters (the DAG id, its pool and its "
                              f"znode are named after it), got {len(self.topology_id)}: {self.topology_id[:40]!r}...")
        if not isinstance(self.source, Source):
            raise ConfigError(
                f"topology {self.topology_id!r}: source must be a txdag.spouts.Source (TweetsSource, StreamsSource "
                f"or a source class of your own: docs/spouts.md), got {self.source!r}"
            )
        try:
            if self.source.type == Source.type:
                source_params(self.source)
        except ConfigError as exc:
            raise ConfigError(f"topology {self.topology_id!r}: {exc}") from None
        for name, what in (("states", "State"), ("key_values", "KeyValue"), ("sinks", "Sink")):
            given = getattr(self, name)
            if isinstance(given, str | bytes | Mapping | set | frozenset) or not isinstance(given, Iterable):
                raise ConfigError(f"topology {self.topology_id!r}: {name} must be a list of {what}(...), got {given!r}")
            object.__setattr__(self, name, tuple(given))
        self._check_states()
        for name in ("max_active_transactions", "keep_txids"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"topology {self.topology_id!r}: {name} must be an int >= 1, got {value!r}")
        if isinstance(self.retries, bool) or not isinstance(self.retries, int) or self.retries < 0:
            raise ConfigError(f"topology {self.topology_id!r}: retries must be an int >= 0, got {self.retries!r}")
        if self.spark_mode not in SPARK_MODES:
            raise ConfigError(f"topology {self.topology_id!r}: spark_mode must be one of {list(SPARK_MODES)}, got "
                              f"{self.spark_mode!r}")
        for name in ("redis_conn_id", "zookeeper_conn_id", "spark_conn_id", "spark_connect_conn_id"):
            check_name(f"topology {self.topology_id!r}: {name}", getattr(self, name))
        self._check_values()
        self._check_keys_apart()
        if self.project_dir is not None and not isinstance(self.project_dir, str):
            object.__setattr__(self, "project_dir", str(self.project_dir))  # a pathlib.Path is fine too
        self._check_job()

    def located(self, dag_file: str | Path) -> TransactionalTopology:
        """This definition with ``project_dir`` taken from the DAG file that defines it: the folder above the
        file's folder (``<project>/dags/x.py`` -> ``<project>``, symbolic links resolved). A relative
        ``project_dir`` is taken from the DAG file's folder too (``".."``), not from the working directory, which
        differs between Airflow's DAG processor and its workers; an absolute one is returned as it is. The copy is
        validated again: a relative job that does not exist there fails here."""
        if self.project_dir is not None and Path(self.project_dir).is_absolute():
            return self
        here = Path(dag_file).resolve().parent
        return replace(self, project_dir=str(here.parent if self.project_dir is None
                                             else (here / self.project_dir).resolve()))

    @property
    def job_located(self) -> bool:
        """Whether ``job_path`` is known: a URL, an absolute path, or a relative one with an absolute
        ``project_dir`` (a relative one waits for :meth:`located`)."""
        return "://" in self.job or Path(self.job).is_absolute() or (
            self.project_dir is not None and Path(self.project_dir).is_absolute())

    @property
    def pool(self) -> str:
        """The topology's 1-slot pool: its coordinate and commit tasks run one at a time, in it."""
        return f"{POOL_PREFIX}{self.topology_id}"

    @property
    def commit_marker(self) -> str:
        """The Redis key every commit writes its txid to, last: ``marker_key``, else txdag's own (the marker is
        what tells a Redis that lost committed state from one that holds it, txdag.state.marker)."""
        return self.marker_key or default_key(self.topology_id)

    @property
    def job_path(self) -> str:
        if "://" in self.job or Path(self.job).is_absolute():
            return self.job
        return str(Path(self.project_dir or ".") / self.job)

    def conn_ids(self) -> dict[str, str]:
        """Every connection the topology uses, with what it is for."""
        spark = (self.spark_connect_conn_id, "spark_connect") if self.spark_mode == "connect" else (
            self.spark_conn_id, "spark")
        used = {self.redis_conn_id: "redis", self.zookeeper_conn_id: "zookeeper", spark[0]: spark[1]}
        used.update({c: "redis" for c in self.source.conn_ids()})
        used.update({c: "kafka" for c in self.source.kafka_conn_ids()})
        for state in self.states:
            used.update(state.store.conn_ids() if state.store is not None else {})
        return used

    def state(self, name: str) -> State:
        return next(s for s in self.states if s.name == name)

    def _check_states(self) -> None:
        where = f"topology {self.topology_id!r}"
        if not all(isinstance(s, State) for s in self.states) or not (self.states or self.key_values or self.sinks):
            raise ConfigError(f"{where}: states must be a list of txdag.topology.definition.State (at least one "
                              f"state, or a key-value state, or a sink)")
        if not all(isinstance(k, KeyValue) for k in self.key_values):
            raise ConfigError(f"{where}: key_values must be a list of txdag.topology.definition.KeyValue")
        if not all(isinstance(s, Sink) for s in self.sinks):
            raise ConfigError(f"{where}: sinks must be a list of txdag.topology.definition.Sink")
        names = [s.name for s in self.states] + [k.name for k in self.key_values] + [s.name for s in self.sinks]
        named = "state or sink name" if self.sinks else "state name"
        for what, values in ((named, names), ("Redis namespace", [s.redis_key for s in self.states if s.in_redis]),
                             ("key-value namespace", [k.namespace_of(self.topology_id) for k in self.key_values])):
            dupes = sorted({v for v in values if values.count(v) > 1})
            if dupes:
                raise ConfigError(f"{where}: duplicate {what}(s) {dupes}: give each state its own")
        if self.marker_key is not None and self.marker_key in {s.redis_key for s in self.states if s.in_redis}:
            raise ConfigError(f"{where}: marker_key {self.marker_key!r} is also a state's namespace: rename one")

    def _check_keys_apart(self) -> None:
        """The keys a commit writes are none of the marker's or the source's: a state named like the source's
        stream, or a marker_key that is the source's NEXT_WRITE, would fail the first commit (a key of another
        type) or overwrite the source. The source's keys are the ones it names exactly (``Source.inputs``) on the
        states' Redis connection; what it reads by a pattern (the tweets' ids) is not checked."""
        where = f"topology {self.topology_id!r}"
        written = {k: f"state {s.name!r}" for s in self.states if s.in_redis for k in state_keys(s.redis_key)}
        if self.commit_marker in written:
            raise ConfigError(f"{where}: the namespace of {written[self.commit_marker]} is the commit marker "
                              f"{self.commit_marker!r}: give the state another namespace")
        written[self.commit_marker] = "the commit marker" if self.marker_key is None else "marker_key"
        try:
            read = {literal(i.name) for i in self.source.inputs()
                    if i.conn_type == "redis" and i.conn_id == self.redis_conn_id}
        except Exception as exc:  # noqa: BLE001 - a source of the user's: its inputs() (docs/spouts.md)
            raise ConfigError(f"{where}: its source's inputs() failed ({type(exc).__name__}: {exc}): it must return "
                              f"SourceInput(conn_type, conn_id, name) values (docs/spouts.md)") from None
        for key, what in written.items():
            if key in read:
                raise ConfigError(f"{where}: {what} would write the key {key!r}, which the source reads on the "
                                  f"same connection {self.redis_conn_id!r}: give it another name or namespace")

    def _check_values(self) -> None:
        """Values that would otherwise fail later, at a commit or when Airflow builds the DAG, far from here."""
        where = f"topology {self.topology_id!r}"
        if self.marker_key is not None and (not isinstance(self.marker_key, str) or not self.marker_key):
            raise ConfigError(f"{where}: marker_key must be a non-empty Redis key or None, got {self.marker_key!r}")
        if isinstance(self.schedule, str) and not schedule_ok(self.schedule):
            raise ConfigError(f"{where}: schedule {self.schedule!r} is neither one of {', '.join(PRESETS)} nor a cron "
                              "expression (five fields, e.g. '*/5 * * * *')")
        if self.drain is not None and not isinstance(self.drain, Backlog):
            raise ConfigError(f"{where}: drain must be a txdag.txid.backlog.Backlog(entries=..., wait=...) or None, "
                              f"got {self.drain!r}")
        if self.description is not None and not isinstance(self.description, str):
            raise ConfigError(f"{where}: description must be a string or None, got {self.description!r}")
        poke = self.commit_poke_interval
        if isinstance(poke, bool) or not isinstance(poke, int | float) or not 0 < poke <= LONGEST_POKE:
            raise ConfigError(f"{where}: commit_poke_interval must be a number of seconds > 0 and at most "
                              f"{LONGEST_POKE} (a day), got {poke!r}")
        if not isinstance(self.catchup, bool):
            raise ConfigError(f"{where}: catchup must be True or False, got {self.catchup!r}")
        for name in ("retry_delay", "max_retry_delay"):
            if not isinstance(getattr(self, name), timedelta) or getattr(self, name) < timedelta(0):
                raise ConfigError(f"{where}: {name} must be a datetime.timedelta >= 0, got {getattr(self, name)!r}")
        if self.max_retry_delay < self.retry_delay:
            raise ConfigError(f"{where}: max_retry_delay ({self.max_retry_delay}) is shorter than retry_delay "
                              f"({self.retry_delay}): the longest wait between automatic replays must be the longer")
        limit = self.execution_timeout
        if limit is not None and (not isinstance(limit, timedelta) or limit <= timedelta(0)):
            raise ConfigError(f"{where}: execution_timeout must be a datetime.timedelta > 0 (several times a batch's "
                              f"slowest normal time) or None, got {limit!r}")
        if not isinstance(self.start_date, datetime):
            raise ConfigError(f"{where}: start_date must be a datetime.datetime, got {self.start_date!r}")
        conf = self.spark_conf
        if not isinstance(conf, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in conf.items()):
            raise ConfigError(f"{where}: spark_conf must be a mapping of strings to strings, got {conf!r}")

    def _check_job(self) -> None:
        if not isinstance(self.job, str) or not self.job.endswith(".py"):
            raise ConfigError(f"topology {self.topology_id!r}: job must be the path of a PySpark .py file, "
                              f"got {self.job!r}")
        if "://" not in self.job and self.job_located and not Path(self.job_path).is_file():
            what = "is a folder, not a file" if Path(self.job_path).is_dir() else "does not exist"
            raise ConfigError(
                f"topology {self.topology_id!r}: the Spark job {self.job_path} {what}: put the job in "
                f"spark_jobs/ next to dags/, or give an absolute path or a URL the Spark cluster can read"
            )


PRESETS = ("@once", "@continuous", "@hourly", "@daily", "@weekly", "@monthly", "@quarterly", "@yearly")


CRON_FIELD = re.compile(r"^[0-9A-Za-z*/,?#-]+$")


def schedule_ok(schedule: str) -> bool:
    """A schedule string Airflow can run: a preset, or five cron fields (Airflow builds a DAG with any string and
    fails later, in its DAG processor; a field's values are left to it)."""
    if schedule.startswith("@"):
        return schedule in PRESETS
    fields_ = schedule.split()
    return len(fields_) == 5 and all(CRON_FIELD.match(f) for f in fields_)


DEFINITION_CLASSES: dict[str, type] = {c.__name__: c for c in (TransactionalTopology, State, TweetsSource,
                                                                   StreamsSource, KeyValue)}


# Where the txdag command finds the DAG folder after --dags, first found first: the command's own variable, then
# Airflow's options in their environment form ([txdag] dags_folder, which the plugin reads; [core] dags_folder)
DAGS_FOLDER_VARIABLES = ("TXDAG_DAGS_FOLDER", "AIRFLOW__TXDAG__DAGS_FOLDER", "AIRFLOW__CORE__DAGS_FOLDER")


def dags_folder_source(given: str | Path | None = None) -> tuple[Path, str | None]:
    """The DAG folder and where it came from: ``given`` (a ``--dags`` option: "--dags"), else the first of
    DAGS_FOLDER_VARIABLES set (its name), else ./dags (None)."""
    if given:
        return Path(given), "--dags"
    for name in DAGS_FOLDER_VARIABLES:
        if os.environ.get(name):
            return Path(os.environ[name]), name
    return Path("dags"), None


def load_definitions(folder: str | Path, files: Iterable[str | Path] | None = None
                     ) -> tuple[dict[str, TransactionalTopology], dict[str, str]]:
    """The topologies defined by the DAG files in ``folder``, or by ``files`` of it (the list Airflow's DAG processor
    reads: ``txdag.airflow.rendering.dag_files``), and the error of each file that failed.

    Each file is run (``runpy``) and its topologies are taken from its module globals: the DAGs that
    ``txdag.airflow.render`` built (their ``txdag_topology``), and plain ``TransactionalTopology`` values (a
    file that only defines one), located relative to the file. Running a file that renders its DAG imports
    Airflow; no connection is looked up (rendering looks up none). One owner: a topology id that a second file
    defines too is that file's error, and the first file keeps it. The folder goes on ``sys.path``, as Airflow puts
    its DAG folder there: a DAG file imports the modules beside it (a spout of the user's own)."""
    root = str(Path(folder).resolve())
    if root not in sys.path:
        sys.path.append(root)
    found: dict[str, TransactionalTopology] = {}
    owners: dict[str, str] = {}
    errors: dict[str, str] = {}
    seen: set[Path] = set()
    for path in sorted(Path(f) for f in (Path(folder).glob("*.py") if files is None else files)):
        if path.resolve() in seen:  # one file reached through two links is one definition
            continue
        seen.add(path.resolve())
        try:
            defined = definitions_of(path)
        except (Exception, SystemExit) as exc:  # one broken DAG file must not hide (nor end) the others
            errors[str(path)] = error_text(exc)
            continue
        twice = sorted(set(defined) & set(found))
        if twice:
            errors[str(path)] = (f"ConfigError: topology {twice[0]!r} is defined by {owners[twice[0]]} already: "
                                 f"one DAG file per topology id, and Airflow loads the first in path order: "
                                 f"`txdag topology owner {twice[0]}` names the recorded owner and which file to "
                                 f"delete")
            continue
        found.update(defined)
        owners.update(dict.fromkeys(defined, str(path)))
    return found, errors


def definitions_of(path: Path) -> dict[str, TransactionalTopology]:
    """The topologies one DAG file defines (see :func:`load_definitions`), by id."""
    names = runpy.run_path(str(path), run_name=f"txdag_dag_{path.stem}")
    found: dict[str, TransactionalTopology] = {}
    for value in names.values():  # rendered DAGs first: theirs are located, as Airflow runs them
        topology = _rendered(value)
        if topology is not None:
            found.setdefault(topology.topology_id, topology)
    for value in names.values():
        if isinstance(value, TransactionalTopology):
            found.setdefault(value.topology_id, value.located(path))
    if not found and "TransactionalTopology(" in path.read_text(errors="replace"):
        raise ConfigError(f"{path} builds a TransactionalTopology but keeps neither it nor its DAG in a module "
                          f"variable: write dag = render(TransactionalTopology(...), dag_file=__file__)")
    return found


def _rendered(value: Any) -> TransactionalTopology | None:
    """The definition a DAG that ``txdag.airflow.render`` built carries, else None (any other global)."""
    if isinstance(value, type):
        return None
    try:
        topology = getattr(value, "txdag_topology", None)
    except Exception:  # a global whose attribute lookup fails (a lazy proxy...) is not a rendered DAG
        return None
    return topology if isinstance(topology, TransactionalTopology) else None


UNEXPECTED = re.compile(r"^(\w+)\.__init__\(\) got an unexpected keyword argument '(\w+)'$")


def error_text(exc: BaseException) -> str:
    """A DAG file's error in one line; a misspelt keyword of a txdag class comes with the ones it takes."""
    text = f"{type(exc).__name__}: {exc}"
    match = UNEXPECTED.match(str(exc)) if isinstance(exc, TypeError) else None
    kind = DEFINITION_CLASSES.get(match.group(1)) if match else None
    if match is None or kind is None:
        return text
    names = [f.name for f in fields(kind)]
    close = difflib.get_close_matches(match.group(2), names, n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    return f"{text} ({hint}{match.group(1)} takes {', '.join(names)})"
