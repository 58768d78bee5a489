"""Core Storm's checkpointed KeyValueState (seed 002) over Redis and Redis Cluster.

- :class:`KeyValueState` — get/put/delete/items over one namespace; ``prepare_commit``/``commit``/``rollback``.
- the protocol as functions over a plain client, for a Spark partition and the commit task:
  :func:`stage_writes`, :func:`seal_stage`, :func:`prepare`, :func:`commit`, :func:`rollback`, :func:`recover`.
- providers by name and JSON config (:func:`load_state`, :func:`parse_provider_config`, :func:`make_client`),
  serializers by name (:mod:`txdag.state.kv.serializers`), and :func:`migrate` between serializers.
"""

from txdag.state.kv.config import ProviderConfig, parse_provider_config
from txdag.state.kv.errors import KVStateError
from txdag.state.kv.layout import DELETE, KVNamespace, kv_namespace
from txdag.state.kv.migrate import MigrationResult, migrate
from txdag.state.kv.protocol import (
    NamespaceStatus,
    StagedAttempt,
    StateHooks,
    StepResult,
    commit,
    prepare,
    read_as_of,
    rollback,
    seal_stage,
    stage_writes,
    status,
)
from txdag.state.kv.providers import load_state, make_client, namespace_of
from txdag.state.kv.recovery import RecoveryPlan, Txids, plan_recovery, recover
from txdag.state.kv.serializers import SerializationError, Serializer, get_serializer, register_serializer
from txdag.state.kv.state import KeyValueState
from txdag.state.kv.step import StatefulStep, StepState

__all__ = [
    "DELETE", "KVNamespace", "KVStateError", "KeyValueState", "MigrationResult", "NamespaceStatus",
    "ProviderConfig", "RecoveryPlan", "SerializationError", "Serializer", "StagedAttempt", "StateHooks",
    "StatefulStep", "StepState",
    "StepResult", "Txids", "commit", "get_serializer", "kv_namespace", "load_state", "make_client", "migrate",
    "namespace_of", "parse_provider_config", "plan_recovery", "prepare", "read_as_of", "recover", "register_serializer",
    "rollback", "seal_stage", "stage_writes", "status",
]
