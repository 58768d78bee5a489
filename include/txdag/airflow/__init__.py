"""The Airflow side of txdag: hooks, the three task operators, and the renderer from topology to DAG.

Only this package (and ``txdag.spark``) imports Airflow; the core stays testable without it. A DAG file imports
the renderer as ``from txdag.airflow import render``; it is loaded on first use, so that importing the hooks or
the REST client does not import the operators.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from txdag.airflow.rendering import render

__all__ = ["render"]


def __getattr__(name: str) -> Any:
    if name == "render":
        from txdag.airflow.rendering import render

        globals()["render"] = render
        return render
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
