"""Archive and replay: the pipeline's side of :mod:`cebroker.storage.archive`.

* :mod:`.matching`: which archived events a replay delivers (the index's own filters);
* :mod:`.replayer`: drives running replays, a window of deliveries at a time;
* :mod:`.starts`: ``config.startfrom``, a subscription that starts in the past;
* :mod:`.pruner`: keeps the archive within its retention, and its size on ``/metrics``.

The routes are :mod:`cebroker.pipeline.routes.replays`.
"""
