"""Delivery: pending deliveries through per-subscription lanes to the senders, with retries and
dead letters. :class:`Dispatcher` wires the parts; each of the other modules holds one of them.
"""

from cebroker.pipeline.dispatch.dispatcher import Dispatcher

__all__ = ["Dispatcher"]
