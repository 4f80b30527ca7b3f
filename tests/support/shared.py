"""Conformance data kept outside the repository, in ``../shared/conformance`` beside the clone.

The CloudEvents SQL conformance suite (TCK) and the xRegistry spec's samples are upstream files,
not part of cebroker. A clone without them still runs the whole suite: each test that reads them
gets its path from here and is skipped, with the reason, when the data is absent. Nothing else
in the tests looks for ``../shared``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

#: The directory beside the repository's root that holds the conformance data, when present.
SHARED = Path(__file__).resolve().parents[2].parent / "shared"


@dataclass(frozen=True)
class ConformanceData:
    """One upstream data set under ``../shared/conformance``.

    Attributes:
        relative: its directory, relative to ``../shared/conformance``.
        what: what it is, for the skip reason.
    """

    relative: str
    what: str

    @property
    def path(self) -> Path:
        """Its directory (which may not exist)."""
        return SHARED / "conformance" / self.relative

    @property
    def present(self) -> bool:
        """Whether the data is there."""
        return self.path.is_dir()

    @property
    def reason(self) -> str:
        """Why the tests that read it are skipped when it is absent."""
        return (
            f"{self.what} not found: these tests read ../shared/conformance/{self.relative} "
            "beside the repository, which this checkout does not have"
        )

    @property
    def needed(self) -> pytest.MarkDecorator:
        """Mark for a test (or, as ``pytestmark``, a module) that reads this data."""
        return pytest.mark.skipif(not self.present, reason=self.reason)

    def files(self, pattern: str) -> list[Path]:
        """Its files matching ``pattern``, sorted; none when the data is absent (a test
        parametrized with them must be marked :attr:`needed`, so that it is skipped with the
        reason rather than for an empty parameter set)."""
        return sorted(self.path.glob(pattern)) if self.present else []


CESQL_TCK = ConformanceData("cesql-tck", "The CloudEvents SQL conformance suite (TCK)")
XREGISTRY_SAMPLES = ConformanceData(
    "xregistry-samples/xregistry-spec", "The xRegistry spec's sample registries and document schemas"
)
