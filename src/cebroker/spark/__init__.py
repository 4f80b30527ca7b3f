"""Spark integration: the ``cloudevents`` PySpark data source and the ``spark-feed`` job.

Executors import only this package's light modules (``attributes``, ``columns``, ``events``,
``client``, ``rejects``, ``writer``) plus httpx and pyarrow; nothing here imports the broker
service. PySpark itself is imported only by :mod:`cebroker.spark.datasource`,
:mod:`cebroker.spark.schema` and :mod:`cebroker.spark.feed`, so ``cebroker serve`` never needs it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def register(spark: SparkSession) -> None:
    """Register the ``cloudevents`` data source with ``spark`` (once per session)."""
    from cebroker.spark.datasource import CloudEventsDataSource

    spark.dataSource.register(CloudEventsDataSource)
