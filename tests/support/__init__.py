"""Helpers shared by tests in several directories.

- :mod:`support.waiting`: ``wait_until`` / ``wait_for`` (and async variants), the one way to
  wait for something another thread, task or process does.
- :mod:`support.servers`: an ASGI app served by uvicorn in a thread on 127.0.0.1.
- :mod:`support.sinks`: the recording HTTP sink (scripted replies, delays, held requests).
- :mod:`support.memory`: the in-memory sender, for pipeline tests that do not test a protocol.
- :mod:`support.lanes`: the markers of the lanes (postgres, spark, browser, container) and the
  pytest-xdist groups.
- :mod:`support.broker`: a whole broker in a thread with a client, and ``cebroker serve`` as a
  child process.
- :mod:`support.events`: a sample event.
- :mod:`support.shared`: conformance data under ``../shared``, skipped with a reason when absent.
- :mod:`support.fixtures`: the fixtures of the above (and the PostgreSQL template databases),
  registered for the suite by ``tests/conftest.py``.
"""
