"""Protocol ingress: ``--source`` URLs consumed continuously into the durable ingest path."""

from cebroker.sources.component import SourcesComponent

__all__ = ["SourcesComponent"]
