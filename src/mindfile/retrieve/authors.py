"""Author match: memories written by someone the query names are lifted after the first
ten results (docs/retrieval.md "Author match").

In a conversation with several participants a question usually names the one it is
about ("What pets does Nate have?", "Which cities did Dave travel to?"), and the
evidence is mostly what that person said, often without any of the question's words
("this is Max! [image: a dog]"). An event's author is ``metadata["author"]``: given by
the caller, or taken from the payload's ``name`` (the participant name of
OpenAI-shaped chat messages; see :mod:`mindfile.index.pipeline`). When the query names
the author of some of the candidates after the first ten (a whole-word,
case-insensitive match), their fused scores are raised by :data:`WEIGHT` x themselves
(doubled): a lift in proportion to the evidence they already have, so a memory of that
author with nothing else for it stays where it was (a constant lift, measured too, put
every unrelated memory of the author above the partial matches).

As with feedback, the first ten results never change (``search(top_k=10)`` stays a
prefix of ``top_k=50``, and a search for ten or fewer pays nothing): lifting them too
was measured and does not help (LoCoMo r@10 moved by -0.006 to +0.005 across weights),
while after them it is the largest gain of recall@50 measured since feedback. A store
whose events carry no author is unaffected. Chosen by cross-validation on LoCoMo
(benchmarks/README.md "Author match").
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from mindfile.retrieve.fusion import Fused
from mindfile.storage.backend import AnyDatabase, search_store

__all__ = ["MIN_LENGTH", "WEIGHT", "apply_authors", "named"]

#: The lift of a memory whose author the query names, times its fused score.
WEIGHT = 1.0
#: Authors shorter than this are never matched (a one-letter name would match "I", "a").
MIN_LENGTH = 2


def named(query: str, authors: Iterable[str]) -> set[str]:
    """Those of ``authors`` that ``query`` names: each as whole words ("Dave's" names
    Dave, "Davey" does not), ignoring case, except that in a query written in mixed case
    a capitalised name must be capitalised there too ("What will I do?" does not name
    Will; "what did dave say" and "WHAT DID DAVE SAY" name Dave)."""
    mixed = query != query.lower() and query != query.upper()
    out: set[str] = set()
    for author in authors:
        name = author.strip()
        if len(name) < MIN_LENGTH:
            continue
        proper = mixed and name[:1].isupper()
        pattern = rf"(?<!\w){re.escape(name)}(?!\w)"
        for found in re.finditer(pattern, query, re.IGNORECASE):
            if not proper or found.group(0)[:1].isupper():
                out.add(author)
                break
    return out


def apply_authors(
    db: AnyDatabase,
    fused: dict[int, Fused],
    head: list[Fused],
    query: str,
    limit: int,
    eligible: Callable[[Fused], bool] | None = None,
) -> None:
    """Lift ``fused``'s results outside ``head`` whose author ``query`` names, by
    :data:`WEIGHT` x their score; sets their ``author`` lift (0.0 for the others outside
    ``head``).

    Only the results that could then reach the first ``limit`` are read: those whose
    lifted score would reach the ``limit``-th score outside the head as it is (a lift
    cannot move any other one into the results asked for), among the ``eligible`` ones
    (default: all; ``build_context`` admits only some of the ranking)."""
    pinned = {f.rowid for f in head}
    rest = [f for f in fused.values() if f.rowid not in pinned]
    if not rest:
        return
    for item in rest:
        item.author = 0.0
    competing = rest if eligible is None else [f for f in rest if eligible(f)]
    scores = sorted((f.score for f in competing), reverse=True)
    if not scores:
        return
    wanted = max(limit - len(head), 1)
    floor = scores[min(wanted, len(scores)) - 1]
    reachable = [f.rowid for f in competing if f.score > 0 and f.score * (1 + WEIGHT) >= floor]
    authors = search_store(db).chunk_authors(reachable)
    if not authors:
        return
    chosen = named(query, set(authors.values()))
    if not chosen:
        return
    for rowid, author in authors.items():
        if author in chosen:
            item = fused[rowid]
            item.author = WEIGHT * item.score
            item.score += item.author
