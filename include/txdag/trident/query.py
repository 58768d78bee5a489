"""state_query: seed 004's stateQuery (QueryLocation, batchRetrieve) over a txdag State in Redis.

Each partition's rows are handed to the query function together: their keys' committed values are read on the
executor in ONE round trip (one pipeline through ``RedisBackingMap.multi_get``: the state's format check and
the value hashes), then ``batch_retrieve`` turns them into one result per row and ``execute`` emits the columns
appended to the row. Nothing is collected to the driver. A committed value is the stored one without its txid
bookkeeping (``TransactionalValue.value``, ``OpaqueValue.curr``); it is read as stored, not as of the commit
marker as ``txdag state get`` reads it (txdag.state.committed).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from typing import Any
from urllib.parse import unquote, urlsplit

import pyarrow as pa
from pyspark.sql import DataFrame, Row
from pyspark.sql.types import StructType
from redis.connection import parse_url

from txdag.contracts import AggregatorError, Collector, QueryFunction, call
from txdag.errors import ConfigError
from txdag.masking import register_secret
from txdag.redisio import client_from_url, from_portable
from txdag.spark.context import current_job
from txdag.spark.env import URLS_VAR, parse_redis_urls
from txdag.state import KeyClashError, RedisBackingMap
from txdag.state.values import committed_value
from txdag.topology.definition import DEFAULT_REDIS_CONN_ID, State
from txdag.trident.executors import freeze, values_of
from txdag.trident.operations import field_names, parse_ddl, ship
from txdag.trident.schema import check_clash, resolve, to_record_batch


def job_redis_url(conn_id: str = DEFAULT_REDIS_CONN_ID, environ: Mapping[str, str] | None = None) -> str:
    """The job's Redis URL of ``conn_id``, from ``TXDAG_REDIS_URLS`` (set by the process task for spark-submit)."""
    return parse_redis_urls((os.environ if environ is None else environ).get(URLS_VAR), [conn_id])[conn_id]


def check_url(url: Any) -> str:
    """A Redis URL (its password registered for masking); the message never repeats the URL."""
    if not isinstance(url, str) or not url:
        raise ConfigError("state_query needs redis_url='redis://[user:password@]host:port/db' (in a job, "
                          "txdag.trident.job_redis_url() gives the topology's)")
    try:
        parse_url(url)
    except ValueError as exc:
        raise ConfigError(f"state_query: redis_url is not a Redis URL ({str(exc).split('(')[0].strip()}); use "
                          f"redis://[user:password@]host:port/db") from None
    register_secret(unquote(urlsplit(url).password or ""))
    return url


def state_query(df: DataFrame, state: State, query: QueryFunction, *, key_fields: Sequence[str] | str = (),
                redis_url: str | None = None, input_fields: Sequence[str] | str | None = None) -> DataFrame:
    """Trident's stateQuery: ``df``'s columns, then the columns ``query`` emits for each row (zero or more rows
    per input row). ``key_fields`` are the columns whose values make the state's key (none for a global state);
    ``input_fields`` are the columns the query's rows carry (all by default). Without ``redis_url``, the state is
    read where the job's states are (inside a txdag job: spark-submit or warm mode alike)."""
    if not isinstance(query, QueryFunction):
        raise ConfigError(f"{query!r} is not a QueryFunction: subclass txdag.trident.QueryFunction (or use MapGet)")
    if not isinstance(state, State):
        raise ConfigError(f"state_query needs a txdag.topology.definition.State, got {state!r}")
    state.require_redis("state_query")
    keys = field_names(df, key_fields, None, query, "key fields")
    if len(keys) != state.key_fields:
        raise ConfigError(f"state {state.name!r} has key_fields={state.key_fields}, but state_query got key fields "
                          f"{keys}: name {state.key_fields} column(s) whose values make its key")
    columns = df.columns
    names = field_names(df, input_fields, columns, query, "input fields")
    schema = resolve(query, df.select(*names).schema, parse_ddl(df))
    check_clash(query, schema, columns, "DataFrame's columns")
    url: str | dict[str, Any] = check_url(redis_url) if redis_url is not None else current_job().client_spec
    ship(query)
    out = StructType([*df.schema.fields, *schema.fields])
    at = {name: i for i, name in enumerate(columns)}
    run = query_partition(state, query, url, [at[k] for k in keys], [at[n] for n in names], names, schema)
    return df.mapInArrow(run, out)


def query_partition(state: State, query: QueryFunction, url: str | dict[str, Any], key_at: list[int],
                    input_at: list[int],
                    names: list[str], schema: StructType) -> Any:
    """The executor side: one read per non-empty partition, then batch_retrieve and execute per row."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        received = [batch for batch in batches if batch.num_rows]
        if not received:  # an empty partition reads nothing
            return
        table = pa.Table.from_batches(received)
        all_values = list(values_of(table))
        make = Row(*names)
        rows = [make(*(v[i] for i in input_at)) for v in all_values]
        codec = state.codec()
        keys = [key_of(state, codec, tuple(v[i] for i in key_at)) for v in all_values]
        committed = read_committed(state, url, keys)
        results = call(query, "batch_retrieve", query.batch_retrieve, committed, rows)
        if not isinstance(results, list) or len(results) != len(rows):
            got = f"{len(results)} results" if isinstance(results, list) else type(results).__name__
            raise AggregatorError(f"{query!r}.batch_retrieve returned {got} for {len(rows)} rows: return a list "
                                  f"with one result per row, in the rows' order")
        taken, emitted = [], []
        for index, (row, result) in enumerate(zip(rows, results)):
            collector = Collector()
            call(query, "execute", query.execute, row, result, collector, row=row)
            taken += [index] * len(collector.rows)
            emitted += collector.rows
        if emitted:
            extra = to_record_batch(query, schema, emitted, "execute")
            base = table.take(pa.array(taken, type=pa.int64()))
            names_out = [*table.column_names, *extra.schema.names]
            joined = pa.Table.from_arrays([*base.columns, *extra.columns], names=names_out)
            yield from joined.to_batches()

    return run


def key_of(state: State, codec: Any, parts: tuple[Any, ...]) -> tuple[Any, ...] | None:
    """The state's key for a row's key values; None (no value) when one is null, or when the state's codec refuses
    the key (KeyClashError), as neither is ever stored (and the refused key's joined field is another key's)."""
    if any(part is None for part in parts):
        return None
    key = state.key(parts)
    try:
        codec.encode(key)
    except KeyClashError:
        return None
    except ValueError as exc:
        raise ConfigError(f"state {state.name!r} cannot hold key {key!r}: {exc}; cast the key columns to the types "
                          f"the state was written with") from None
    return key


def read_committed(state: State, url: str | dict[str, Any], keys: list[tuple[Any, ...] | None]) -> list[Any]:
    """The committed value at each key (None for a missing key or a None key): one pipeline for all of them."""
    distinct = {freeze(k): k for k in keys if k is not None}
    stored: dict[Any, Any] = {}
    if distinct:
        client = client_from_url(url) if isinstance(url, str) else from_portable(url)
        try:
            backing = RedisBackingMap(client, state.redis_key, key_codec=state.codec())
            stored = dict(zip(distinct, backing.multi_get(list(distinct.values()))))
        finally:
            client.close()
    return [None if k is None else committed_value(stored[freeze(k)]) for k in keys]
