"""The Airflow side of txdag: hooks, the three task operators, and the renderer from topology to DAG.

Only this package (and ``txdag.spark``) imports Airflow; the core stays testable without it.
"""
