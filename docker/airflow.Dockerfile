# The image of every Airflow component of docker-compose.yaml, and of the Spark master, workers and Spark Connect
# server: Airflow 3.3 on Python 3.11, a Java runtime (spark-submit in client mode runs the driver in the Celery
# worker), and txdag with the Spark, Redis and Postgres providers and pyspark/pyspark-client 4.2.0 as pinned in
# pyproject.toml, plus the FAB provider: the auth manager of docker-compose.yaml (users and roles in the database,
# JWTs from POST /auth/token), named so that it is installed whether the base image ships it or not. The Spark services
# use the image too, so driver, executors and the Connect server run the same Spark (4.2.0, the jars of the pip
# PySpark) and the same Python (3.11), as PySpark requires.
ARG AIRFLOW_VERSION=3.3.2
FROM apache/airflow:${AIRFLOW_VERSION}-python3.11
ARG AIRFLOW_VERSION

USER root
RUN apt-get update \
    && apt-get install -y --no-install-recommends default-jre-headless procps \
    && apt-get clean && rm -rf /var/lib/apt/lists/* \
    && mkdir -p /opt/txdag && chown airflow:0 /opt/txdag
ENV JAVA_HOME=/usr/lib/jvm/default-java

USER airflow
COPY --chown=airflow:0 pyproject.toml README.md /opt/txdag/
COPY --chown=airflow:0 include /opt/txdag/include
# Editable: docker-compose.yaml mounts ./include over /opt/txdag/include, so a change needs no rebuild.
# The editable build leaves include/txdag.egg-info, which PYTHONPATH would show as a second txdag (its plugin loaded
# twice, the second reported as a plugin import error): the installed dist-info is the one to keep.
RUN pip install --no-cache-dir "apache-airflow==${AIRFLOW_VERSION}" apache-airflow-providers-fab -e "/opt/txdag[airflow]" \
    && rm -rf /opt/txdag/include/txdag.egg-info
ENV PYTHONPATH=/opt/txdag/include \
    TXDAG_DEPLOYMENT=container \
    PYSPARK_PYTHON=python3 \
    PYSPARK_DRIVER_PYTHON=python3
