"""One room for what envlock knows about a machine, and how it knows it.

Depends only on :mod:`envlock.matrix` and version parsing; ``resolve``, ``checks`` (verify,
doctor), ``fleet`` and log reading all judge advisories through it, so the same facts get
the same verdict everywhere. ``matrix`` never imports this package.

Public API (keep it small; everything else is internal):

* values (:mod:`.values`): :data:`UNKNOWN`; ``None`` is known absent; :class:`Bound` (a
  version in ``[lo, hi)``) and :class:`OneOf` are partial knowledge;
* :class:`Facts` (:mod:`.facts`): ``get(path)``, ``elements(collection)``, ``origin(path)``
  (how a value that was not observed was reached), ``origins()``, ``contradictions``;
  built by :func:`facts_from_snapshot` (a machine), :func:`facts_from_plan` (a lock to be)
  or :func:`facts_from_logs` (what logs state; :class:`LayeredFacts` under a machine's);
* the evaluator (:mod:`.evaluate`): :func:`judge` -> :class:`Outcome` (three-valued
  ``value``, the ``unknown`` paths, the ``because`` chain), :func:`evaluate`;
* derivation rules (:mod:`.derive`), one pure function each: :func:`find_build`,
  :func:`line_library_bounds`, :func:`wheel_libraries`, :func:`driver_facts`,
  :func:`library_knowledge` (precedence: observed > derived from observed > build pins >
  CUDA-line bound);
* :func:`other_machine`: whether a log is evidently from another machine than this host;
* :func:`undecided_advisories`: what could not be decided, and why.

The fact catalogue (paths and types) is :data:`envlock.matrix.conditions.FACTS`, next to
the advisory validation that needs it.
"""

from __future__ import annotations

from envlock.knowledge.derive import (
    PRECEDENCE,
    Derived,
    driver_facts,
    find_build,
    library_knowledge,
    line_library_bounds,
    wheel_libraries,
)
from envlock.knowledge.evaluate import Outcome, Tri, evaluate, judge
from envlock.knowledge.facts import (
    Contradiction,
    Facts,
    cuda_majors_of,
    facts_from_plan,
    facts_from_snapshot,
)
from envlock.knowledge.logfacts import LayeredFacts, facts_from_logs, other_machine
from envlock.knowledge.unchecked import undecided_advisories
from envlock.knowledge.values import UNKNOWN, Bound, OneOf
from envlock.matrix.conditions import FACTS

__all__ = [
    "UNKNOWN", "Bound", "OneOf", "Facts", "Contradiction", "Outcome", "Tri", "Derived",
    "PRECEDENCE", "FACTS", "LayeredFacts", "judge", "evaluate", "facts_from_snapshot",
    "facts_from_plan", "facts_from_logs", "other_machine", "cuda_majors_of", "find_build",
    "line_library_bounds", "wheel_libraries", "driver_facts", "library_knowledge",
    "undecided_advisories",
]
