"""A spout written against the public API alone (examples/landing_files.py, the guide's example): files landing in
a folder read by LocalTopology in Python and by a Spark job on the executors, through the same JobSpec the process
task hands spark-submit. Both must see the same tuples, and the committed counts must equal a recount of the files.
"""

import json
import sys
from collections import Counter
from pathlib import Path

import pytest
from access import ZK_AUTH
from spark_support import ROOT, load_job
from support.examples import example_module

from txdag import TransactionalTopology, TransactionAttempt
from txdag.errors import ConfigError, StoreWentBackwards
from txdag.local import LocalTopology
from txdag.spark.runner import run_job
from txdag.spouts import SpoutContext
from txdag.staging.store import Staging
from txdag.state import RedisBackingMap, TransactionalMap
from txdag.topology.definition import JobSpec, State
from txdag.txid.coordinator import Coordinator, Emission
from txdag.zk.client import connect_zk
from txdag.zk.store import TransactionStore

pytestmark = pytest.mark.integration
FILES = {"001.txt": "the cat\n\nthe dog\r\n", "002.txt": "a cat", "003.txt": "dog dog\n", "004.txt": "the end\n"}


def land(folder: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (folder / f".{name}").write_text(text, newline="")
        (folder / f".{name}").rename(folder / name)  # landed whole, as the example asks of writers


def word_counts(texts) -> dict[tuple, int]:
    return {(w,): n for w, n in Counter(w for t in texts for line in t.splitlines() for w in line.split(" ") if w)
            .items()}


def test_local_topology_runs_a_users_spout_exactly_once_and_a_replay_reads_the_same_files(
        tmp_path, redis_client, zk_hosts, zk_root, prefix):
    landing = example_module("landing_files")
    land(tmp_path, FILES)
    source = landing.LandingFiles(folder=str(tmp_path), max_files=3)
    spout = source.build(SpoutContext(prefix))
    coordinator = Coordinator(TransactionStore(connect_zk(zk_hosts, auth=ZK_AUTH), prefix, root=zk_root), spout,
                              max_active_transactions=2)
    def process(records):
        return {"words": word_counts(r.value for r in records)}

    words = TransactionalMap(RedisBackingMap(redis_client, f"{prefix}:words"))
    local = LocalTopology(coordinator, redis_client, {"words": words}, process, marker_key=f"{prefix}:LAST")
    first = local.coordinate("run1")
    assert isinstance(first, Emission) and first.metadata == {"files": ["001.txt", "002.txt", "003.txt"],
                                                              "last": "003.txt"}
    assert spout.lag(None) == 4 and spout.lag(first.metadata) == 1
    assert [r.id for r in spout.emit_batch(first.tx, first.metadata).records] == [
        "001.txt#1", "001.txt#3", "002.txt#1", "003.txt#1"]
    local.process(first, "run1")
    local.commit(first.tx)
    land(tmp_path, {"005.txt": "cat\n"})
    assert len(local.drain("more")) == 1 and not spout.is_ready(coordinator.store.read_txid(2)[0].metadata)
    committed = {k: int(v) for k, v in redis_client.hgetall(f"{prefix}:words").items()}
    assert committed == {k[0].encode(): n for k, n in word_counts([*FILES.values(), "cat\n"]).items()}
    (tmp_path / "002.txt").unlink()  # a file of a committed batch is gone: its replay must not skip it
    with pytest.raises(StoreWentBackwards, match=r"txid 1 attempt 1: file\(s\) .*002.txt.* put them back"):
        spout.emit_batch(TransactionAttempt(1, 1), first.metadata)


def test_a_spark_job_reads_a_users_spout_on_the_executors_as_python_reads_it(tmp_path, spark, redis_client, prefix):
    landing = example_module("landing_files")
    land(tmp_path, FILES)
    source = landing.LandingFiles(folder=str(tmp_path), max_files=10)
    metadata = source.build(SpoutContext(prefix)).initialize_transaction(1, None)
    tx = TransactionAttempt(1, 1)
    text = JobSpec(prefix, tx, metadata, source, (State("words"),)).to_json()
    del sys.modules["landing_files"]  # the job's driver has only what the spec says: the module's name and file
    spec = JobSpec.from_json(text)
    assert type(spec.source) is not landing.LandingFiles, "loaded again, from the file the spec names"
    assert spec.source.to_dict() == source.to_dict() and spec.source.to_dict()["params"] == {
        "folder": str(tmp_path), "pattern": "*.txt", "max_files": 10}
    rows = spec.source.build(SpoutContext(prefix)).read(spark, tx, metadata).collect()
    python = spec.source.build(SpoutContext(prefix)).emit_batch(tx, metadata).records
    assert sorted((r.id, r.value, r.partition) for r in rows) == sorted((r.id, r.value, r.partition) for r in python)
    assert len(python) == 5
    result = run_job(spec, load_job("word_count").process, {"redis_default": redis_client}, spark)
    assert result.batch_size is None and result.rejected == 0
    assert Staging(redis_client, prefix).read(tx) == {"words": {w: n for (w,), n in word_counts(FILES.values())
                                                                .items()}}


def test_a_source_the_job_could_not_rebuild_is_refused_when_the_topology_is_built(tmp_path):
    landing = example_module("landing_files")
    kwargs = dict(job=str(ROOT / "spark_jobs" / "word_count.py"), states=[State("words")])
    with pytest.raises(ConfigError, match=r"source must be a txdag.spouts.Source .* docs/spouts.md"):
        TransactionalTopology("t", source=object(), **kwargs)

    class Local(landing.LandingFiles):
        pass

    with pytest.raises(ConfigError, match=r"topology 't': source .*Local is defined inside a function"):
        TransactionalTopology("t", source=Local(folder=str(tmp_path)), **kwargs)
    with pytest.raises(ConfigError, match=r"fields .* are not JSON values"):
        TransactionalTopology("t", source=landing.LandingFiles(folder=str(tmp_path), pattern=b"*"), **kwargs)
    with pytest.raises(ConfigError, match="absolute path"):
        landing.LandingFiles(folder="landing")
    with pytest.raises(ConfigError, match=r"cannot import the source's module 'gone_module'"):
        JobSpec.from_json(json.dumps({**json.loads(JobSpec("t", TransactionAttempt(1, 1), {}, landing.LandingFiles(
            str(tmp_path)), (State("words"),)).to_json()), "source": {"type": "class", "module": "gone_module",
                                                                       "name": "X", "file": None, "params": {}}}))
