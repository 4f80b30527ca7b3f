"""Per-subscription transformations (``config.transform``): a CEL expression reshapes each
delivery after the match, or drops it (docs/transformations.md).

* :mod:`.engine`: the CEL engine behind the interface of ``cefilters.cel`` (the one place
  that names the engine);
* :mod:`.spec`: ``{"cel": ...}`` checked and compiled, with the evaluation budget;
* :mod:`.extras`: the output's ``$delivery`` (headers, path, key, topic, subject) per protocol;
* :mod:`.apply`: :func:`prepare` (deliveries) and :func:`transform` (previews, through
  ``prepare``): the one function both call;
* :mod:`.shaped`: the fast path of an expression whose top level is a map literal;
* :mod:`.programs`: the compiled transformation of each subscription revision;
* :mod:`.preview`: an outcome as the explain and dry-run answers show it.
"""

from cebroker.pipeline.transform.apply import (
    Dropped,
    Failed,
    Outcome,
    Outgoing,
    OutputCheck,
    output_check,
    prepare,
    transform,
)
from cebroker.pipeline.transform.programs import Transforms, compile_of
from cebroker.pipeline.transform.spec import CONFIG_KEY, transform_problems

__all__ = [
    "CONFIG_KEY",
    "Dropped",
    "Failed",
    "Outcome",
    "OutputCheck",
    "Outgoing",
    "Transforms",
    "compile_of",
    "output_check",
    "prepare",
    "transform",
    "transform_problems",
]
