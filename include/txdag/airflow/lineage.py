"""OpenLineage of the process task, warm and cold alike: what a txid read (its source) and what it is for (the
topology's states), for Airflow's OpenLineage provider when it is installed and configured (``[openlineage]``).

The provider asks an operator for its lineage when the task ends (``get_openlineage_facets_on_complete``, for a
failed try too); the process task answers with the txid it processed. The Spark provider can only hand a
spark-submit the parent job's settings for a JVM listener, which sees none of txdag's reads (they run as Python on
the executors) and none of a shared Spark Connect session's jobs; the operator itself knows both ends. Names:

- a Kafka topic: ``kafka://<first bootstrap server>`` and the topic (OpenLineage's naming);
- Redis keys (OpenLineage names no Redis): ``redis://<host>:<port>`` and ``<db>/<key or key pattern>`` read, as
  ``txdag acl redis`` lists them for the source;
- a state: its asset, ``txdag://<topology>`` and the state's name (``txdag.airflow.assets``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from txdag.airflow.assets import state_names
from txdag.redisio import RedisAddress
from txdag.topology.topology import TransactionalTopology

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Dataset:
    namespace: str
    name: str


@dataclass
class TxidLineage:
    """What one try of the process task read and wrote, recorded while it ran (and None before: nothing to say)."""

    inputs: list[Dataset]
    outputs: list[Dataset]
    batch_size: int | None = None
    staged: dict[str, int] = field(default_factory=dict)  # partials per state, when the job reported them
    query: tuple[str, str] | None = None  # (the Spark job's tag, the Spark Connect server) in warm mode


def lineage_enabled() -> bool:
    """Whether Airflow's OpenLineage provider is installed and has somewhere to send events (its own test: a
    transport, a config file or connection, not ``[openlineage] disabled``); without it no task records lineage."""
    try:
        from airflow.providers.openlineage.conf import is_disabled
    except ImportError:
        return False
    try:
        return not is_disabled()
    except Exception as exc:  # a malformed [openlineage] setting: the provider's listener reports it, not the txid
        log.warning("no OpenLineage recorded: the [openlineage] settings cannot be read: %s: %s",
                    type(exc).__name__, exc)
        return False


def redis_namespace(url: str) -> tuple[str, str]:
    """``redis://host:port`` and the db of a Redis URL (its password left out)."""
    address = RedisAddress.of(url)
    return f"redis://{address.host}:{address.port}", str(address.db)


def datasets(t: TransactionalTopology, redis_url: Callable[[str], str], kafka_config: Callable[[str], dict[str, Any]]
             ) -> tuple[list[Dataset], list[Dataset]]:
    """The topology's input datasets (its source's topic or Redis keys) and output datasets (its states)."""
    inputs = []
    for read in t.source.inputs():
        if read.conn_type == "kafka":
            server = str(kafka_config(read.conn_id).get("bootstrap.servers", "")).split(",")[0].strip()
            inputs.append(Dataset(f"kafka://{server.split('://')[-1]}", read.name))
        else:
            namespace, db = redis_namespace(redis_url(read.conn_id))
            inputs.append(Dataset(namespace, f"{db}/{read.name}"))
    outputs = [Dataset(f"txdag://{t.topology_id}", name) for name in state_names(t)]
    return inputs, outputs


def operator_lineage(lineage: TxidLineage | None) -> Any:
    """The provider's OperatorLineage of ``lineage`` (None: the try ran no job, its txid committed already)."""
    if lineage is None:
        return None
    from airflow.providers.openlineage.extractors import OperatorLineage
    from openlineage.client.event_v2 import InputDataset, OutputDataset
    from openlineage.client.facet_v2 import external_query_run, input_statistics_input_dataset
    from openlineage.client.facet_v2 import output_statistics_output_dataset as output_statistics

    read = ({"inputStatistics": input_statistics_input_dataset.InputStatisticsInputDatasetFacet(
        rowCount=lineage.batch_size)} if lineage.batch_size is not None and len(lineage.inputs) == 1 else {})
    return OperatorLineage(
        inputs=[InputDataset(d.namespace, d.name, inputFacets=dict(read)) for d in lineage.inputs],
        outputs=[OutputDataset(d.namespace, d.name, outputFacets={
            "outputStatistics": output_statistics.OutputStatisticsOutputDatasetFacet(rowCount=lineage.staged[d.name])}
            if d.name in lineage.staged else {}) for d in lineage.outputs],
        run_facets={"externalQuery": external_query_run.ExternalQueryRunFacet(
            externalQueryId=lineage.query[0], source=lineage.query[1])} if lineage.query else {},
    )


class ProcessLineage:
    """What a process operator (warm or cold) tells OpenLineage: the lineage process_txid recorded for its txid."""

    txid_lineage: TxidLineage | None = None

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        return operator_lineage(self.txid_lineage)
