"""Class references in the staging seal: rebuilt from the job file or txdag only, and only as what is expected."""

import types
from dataclasses import dataclass

import pytest

from txdag.errors import ConfigError
from txdag.topology.refs import JOB, ref_of, resolve_ref


class Base:
    pass


@dataclass(frozen=True)
class Scaled(Base):
    factor: int = 1


class Plain(Base):
    pass


def job_module(**names):
    module = types.ModuleType("txdag_job_test")
    module.__dict__.update(names)
    return module


def test_a_dataclass_is_rebuilt_with_its_fields_from_the_job_module():
    ref = ref_of(Scaled(3))
    assert ref == {"module": JOB, "name": "Scaled", "params": {"factor": 3}}
    rebuilt = resolve_ref(ref, lambda: job_module(Scaled=Scaled), Base)
    assert rebuilt == Scaled(3)


def test_a_plain_class_is_rebuilt_without_arguments():
    assert isinstance(resolve_ref(ref_of(Plain()), lambda: job_module(Plain=Plain), Base), Plain)


def test_only_expected_classes_from_the_job_or_txdag_are_built():
    with pytest.raises(ConfigError, match="names module 'subprocess'"):
        resolve_ref({"module": "subprocess", "name": "Popen", "params": {"args": "true"}}, job_module, Base)
    with pytest.raises(ConfigError, match="Popen is not a Base"):
        resolve_ref({"module": JOB, "name": "Popen", "params": {}}, lambda: job_module(Popen=object), Base)
    with pytest.raises(ConfigError, match="Gone is not a Base"):
        resolve_ref({"module": JOB, "name": "Gone", "params": {}}, job_module, Base)
    with pytest.raises(ConfigError, match="malformed class reference"):
        resolve_ref("Scaled", job_module, Base)


def test_a_class_the_commit_could_not_rebuild_is_refused_when_staged():
    def local():
        class Inner(Base):
            pass
        return Inner()

    with pytest.raises(ConfigError, match="defined inside a function"):
        ref_of(local())

    @dataclass
    class Odd(Base):
        value: object

    Odd.__qualname__ = "Odd"
    with pytest.raises(ConfigError, match="not JSON values"):
        ref_of(Odd(object()))


class Field(Base):
    def __init__(self, field: str, name: str | None = None) -> None:
        self.field = field
        self.name = name or "field"


class Forgets(Base):
    def __init__(self, size: int) -> None:
        self.n = size


def test_constructor_parameters_kept_as_attributes_are_the_params():
    ref = ref_of(Field("score"))
    assert ref["params"] == {"field": "score", "name": "field"}
    rebuilt = resolve_ref(ref, lambda: job_module(Field=Field), Base)
    assert (rebuilt.field, rebuilt.name) == ("score", "field")
    with pytest.raises(ConfigError, match=r"Forgets\(size=...\) keeps no attribute 'size'"):
        ref_of(Forgets(3))
