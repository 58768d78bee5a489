"""The [txdag] section of Airflow's configuration: declared options, and the DAG folder the plugin reads."""

from __future__ import annotations

import warnings

import pytest

from txdag.airflow import config


def test_the_dag_folder_is_the_txdag_option_else_the_old_variable_with_a_warning_else_airflows(monkeypatch) -> None:
    for name in ("AIRFLOW__TXDAG__DAGS_FOLDER", "TXDAG_DAGS_FOLDER"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AIRFLOW__CORE__DAGS_FOLDER", "/core/dags")
    assert config.dags_folder() == "/core/dags"
    monkeypatch.setenv("TXDAG_DAGS_FOLDER", "/old/dags")
    with pytest.warns(FutureWarning, match=r"TXDAG_DAGS_FOLDER is deprecated .*AIRFLOW__TXDAG__DAGS_FOLDER=/old/dags"):
        assert config.dags_folder() == "/old/dags"
    monkeypatch.setenv("AIRFLOW__TXDAG__DAGS_FOLDER", "/txdag/dags")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert config.dags_folder() == "/txdag/dags"
    assert not seen, [str(w.message) for w in seen]


def test_an_option_not_declared_is_a_programming_error() -> None:
    with pytest.raises(AssertionError):
        config.option("metric_token")
