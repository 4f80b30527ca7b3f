"""cefilters stands alone: it imports nothing from the broker and no network or IO library
(issue 3: "a standalone library ... with no dependency on the service and no network code")."""

from __future__ import annotations

import subprocess
import sys
import textwrap

FORBIDDEN = ("cebroker", "ceprotocols", "socket", "http.client", "urllib.request", "httpx", "asyncio")


def test_importing_and_using_cefilters_loads_no_broker_or_network_module() -> None:
    """Compile and match every dialect (cel and sql included) in a fresh interpreter, then list
    what got imported."""
    program = textwrap.dedent(
        """
        import sys
        import cefilters

        index = cefilters.SubscriptionIndex()
        index.add(1, [{"all": [{"exact": {"type": "a"}}, {"prefix": {"source": "/"}}]},
                      {"any": [{"suffix": {"subject": "x"}}, {"not": {"sql": "seq > 1"}}]},
                      {"cel": "type == 'a'"}], types=["a"])
        assert index.match({"type": "a", "source": "/s", "subject": "x", "seq": 0}) == {1}
        print("\\n".join(sorted(sys.modules)))
        """
    )
    completed = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=True, timeout=60
    )
    loaded = set(completed.stdout.split())
    assert "cefilters.sql" in loaded  # the program really exercised the library
    offending = sorted(m for m in loaded if m.split(".")[0] in FORBIDDEN or m in FORBIDDEN)
    assert offending == []
