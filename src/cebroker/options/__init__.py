"""Settings declared once: the kinds of values, the declaration of a setting as a dataclass field,
and the command-line parser that turns each declaration into a flag and an environment variable.

To add a setting to ``cebroker serve``, add one field to :class:`cebroker.settings.Settings`::

    retention: float = setting(86400.0, Duration(positive=True), "how long delivered events are kept")

which gives ``--retention``, ``CEBROKER_RETENTION``, the check of its values, its ``--help`` line
and its row in the README's settings table (checked by the tests).
"""

from cebroker.options.declare import Option, check_declared, options_of, setting
from cebroker.options.kinds import (
    Boolean,
    Choice,
    Database,
    Duration,
    FilePath,
    HttpUrl,
    Integer,
    Kind,
    Many,
    Ratio,
    Size,
    Text,
)
from cebroker.options.parser import OptionParser, argument_type

__all__ = [
    "Boolean",
    "Choice",
    "Database",
    "Duration",
    "FilePath",
    "HttpUrl",
    "Integer",
    "Kind",
    "Many",
    "Option",
    "OptionParser",
    "Ratio",
    "Size",
    "Text",
    "argument_type",
    "check_declared",
    "options_of",
    "setting",
]
