"""Preference recall: recommendation questions find what the user said about themselves
(docs/retrieval.md, "Preference recall (issue 14)").

"Can you recommend a video editing course?" shares no word with the memory that
answers it ("ugh, fighting Premiere Pro's timeline again"), and the static model puts
them only loosely close. Two small detectors, no LLM, no dependency:

* :func:`statement_kind` says whether a user-side text states a *preference* (a like or
  a dislike: love / like / enjoy / prefer / hate / can't stand / am into / my favourite /
  I don't like ...), a *habit* (I usually / every morning / I've been learning / I'm a
  nurse ...), a *possession* (I own / I have a / my dog / just got a ...) or a
  *constraint* (I'm vegetarian / I can't eat / I'm afraid of / my budget ...). First
  person only (a dropped subject at the start of a sentence counts: "can't stand
  horror"); a negated habit or possession ("I don't have a car") is not marked, and
  reactions to the other speaker ("I love that!", "I like your photo") are not
  preferences. Chunks whose ``metadata.role`` is assistant, system or tool are never
  marked.
* :func:`recommendation_intent` says whether a query asks for a recommendation or advice
  ("recommend", "suggest", "any ideas", "what should I", "tips for", "gift for", "which
  ... should", "help me choose" ...).

For a question with that intent, ``search`` (nothing else changes for other queries):

1. runs its legs on the question without its request words (:func:`topic_query`: "a
   video editing course?"), which otherwise match every "thanks for the recommendation!"
   of a chat history;
2. adds a third leg: the question's ``leg`` (50) nearest user-side statements of the
   whole store (within the search's filters) join the fused candidates, scored as the
   vector leg would score them; which chunks are statements is derived from the chunks
   and kept in memory like the BM25 index (:func:`store_marks`), so there is no schema
   change and stores written before this code get it too;
3. adds ``preference = top * weight`` (``top`` the best fused score, as the time boost;
   ``weight`` 1.0) to each statement among the best ``scan`` (200) candidates, shown in
   ``hit.breakdown.preference``. A boost, never a filter: with weight 1.0 statements come
   first and everything else follows in its usual order.

``search(..., preferences=False)`` turns it off. A query without intent costs one
regular expression. Parameters: cross-validated on benchmarks/data/preferences.json
(benchmarks/README.md, "Preference recall").
"""

from __future__ import annotations

import functools
import heapq
import json
import logging
import re
import threading
import weakref
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal, overload

import numpy as np

from mindfile.embed.base import Vector
from mindfile.manage.expiry import hidden_rowids
from mindfile.retrieve.fusion import Fused
from mindfile.storage.backend import AnyDatabase, lifecycle_store, search_store
from mindfile.storage.db import utcnow
from mindfile.storage.index_source import index_source
from mindfile.storage.search import SearchStore
from mindfile.vector.base import VectorFilter, VectorIndex

__all__ = [
    "DEFAULT_PREFERENCE_CONFIG",
    "INLINE_MAX",
    "PreferenceConfig",
    "StatementKind",
    "apply_preferences",
    "boost",
    "leg_query",
    "marked",
    "recommendation_intent",
    "statement_kind",
    "store_marks",
    "topic_query",
    "user_side",
]

logger = logging.getLogger("mindfile.retrieve")

StatementKind = Literal["preference", "habit", "possession", "constraint"]


@dataclass(frozen=True, slots=True)
class PreferenceConfig:
    """The parameters (chosen by cross-validation on benchmarks/data/preferences.json;
    benchmarks/README.md, "Preference recall")."""

    #: Boost of a candidate that states something about the user, as a share of the best
    #: fused score (1.0: such a memory outranks nearly every other candidate).
    weight: float = 1.0
    #: A third leg: the query's ``leg`` nearest statements of the whole store join the
    #: candidates (0: none; then only the best ``scan`` fused candidates are checked).
    leg: int = 50
    scan: int = 200
    #: At most this many statements (the best by fused score) are boosted (0: all).
    limit: int = 0
    #: Run the BM25 leg / embed the query without its request words (:func:`topic_query`).
    strip_bm25: bool = True
    strip_vector: bool = True


DEFAULT_PREFERENCE_CONFIG = PreferenceConfig()

_F = re.IGNORECASE

# --- query intent -------------------------------------------------------------------

_YOU = r"(?:you|u|ya)"
_WE = r"(?:i|we)"
_INTENT = re.compile(
    r"\b(?:"
    # asked of the assistant: "can you recommend", "could you suggest", imperative
    r"(?:can|could|would|will|do|did)\s+" + _YOU + r"\s+(?:\w+\s+)?(?:recommend|suggest|advise)"
    r"|" + _YOU + r"(?:'d|\s+would|\s+might)\s+(?:\w+\s+)?(?:recommend|suggest|advise)"
    r"|(?:^|[.!?,;:]\s*|\bplease\s+)(?:recommend|suggest)\b"
    r"|(?:recommend|suggest)\s+(?:me|us|a|an|some|any|something|anything|somewhere|one|good)\b"
    r"|(?:any|some|your|good|need|want|got|give\s+me)\s+(?:[\w'-]+\s+){0,3}(?:recommendations?|suggestions?"
    r"|ideas?|tips|advice|inspiration|pointers|thoughts\s+on)\b"
    r"|(?:ideas?|tips|advice|suggestions?)\s+(?:for|on|about)\s+(?:a|an|my|our|what|how|where|which)\b"
    r"|(?:gift|present)s?\s+(?:for|ideas?)\b"
    # first person deciding: "what should I cook", "where could we go", "should I buy"
    r"|(?:what|where|which|how|when)\s+(?:\w+\s+){0,3}(?:should|could|shall|ought\s+to)\s+"
    + _WE
    + r"\b|which\s+(?:\w+\s+){0,3}(?:would|do)\s+"
    + _YOU
    + r"\b"
    r"|\bshould\s+"
    + _WE
    + r"\s+(?:get|buy|try|go|read|watch|learn|cook|make|order|take|pick|choose)\b"
    r"|help\s+(?:me|us)\s+(?:choose|pick|decide|find|plan)\b|(?:plan|organi[sz]e)\s+(?:my|our)\b"
    r"|what(?:'s|\s+is|\s+are)\s+(?:a\s+|some\s+)?good\b"
    r"|(?:looking\s+for|in\s+the\s+market\s+for)\s+(?:a|an|some)\b"
    r")",
    _F,
)


# Words that only say "I want a recommendation": they match every "thanks for the
# recommendation!" in a chat history, not what the user likes.
_REQUEST_WORDS = re.compile(
    r"\b(?:recommend\w*|suggest\w*|ideas?|tips?|advi[cs]e|inspiration|pointers|thoughts"
    r"|help|choose|pick|decide|should|could|would|good|great|best|nice|any|some|something"
    r"|anything|please|thanks?|can|you|u|ya|i|me|my|we|us|our|get|buy|try|next)\b",
    re.IGNORECASE,
)


def topic_query(query: str) -> str:
    """``query`` without its request words ("Can you recommend a video editing course?"
    -> "a video editing course?"); the query itself when nothing else would be left."""
    rest = " ".join(_REQUEST_WORDS.sub(" ", query).split())
    return rest if re.search(r"\w", rest) else query


def leg_query(query: str, leg: Literal["bm25", "vector"]) -> str:
    """The text a leg runs for a recommendation question (:func:`topic_query` when the
    configuration strips it)."""
    cfg = DEFAULT_PREFERENCE_CONFIG
    strip = cfg.strip_bm25 if leg == "bm25" else cfg.strip_vector
    return topic_query(query) if strip else query


def recommendation_intent(query: str) -> bool:
    """True when ``query`` asks for a recommendation, a suggestion or advice."""
    return _INTENT.search(query) is not None


# --- statements ---------------------------------------------------------------------

_I = r"(?:\bi|\bwe)"  # first person (the user, or the user's household)
# Chat drops the subject at the start of a sentence: "can't stand horror", "just got a
# Pixel", "not a fan of loud bars".
# Such a rule's pattern starts at its verb; what precedes the match must end like this
# (checked on the 24 characters before it: much cheaper than a leading alternation).
_LEAD = re.compile(
    r"(?:\b(?:i|we)(?:\s+(?:do|really|just|honestly|totally|truly|still|also|actually))*\s*"
    r"|(?:^|[.!?;:,])\s*|\b(?:and|but|so|honestly|lol|ugh|yeah|ok|also)\s+)$"
)
_ADV = (
    r"(?:\s+(?:really|absolutely|totally|just|honestly|truly|still|so|genuinely|kinda|also"
    r"|actually|always|definitely|much))*"
)
# Reactions to the other speaker, not preferences: "I love that", "I like your photo".
_REACTION = re.compile(
    r"^(?:that|this|it|you|your|yours|how|what|the\s+idea|hearing|seeing|when\s+you)\b", _F
)
_PREFER = re.compile(
    _I + r"(?:'m|\s+am|'re|\s+are)?" + _ADV + r"\s+"
    r"(?:love|like|enjoy|adore|prefer|hate|dislike|detest|loathe|despise"
    r"|can't\s+stand|cannot\s+stand|can't\s+get\s+enough\s+of"
    r"|(?:am\s+|'m\s+|are\s+|'re\s+)?(?:into|obsessed\s+with|hooked\s+on|addicted\s+to"
    r"|crazy\s+about|passionate\s+about|(?:a\s+)?(?:huge|big|massive)\s+fan\s+of|fond\s+of"
    r"|keen\s+on))\s+(?P<obj>[\w'-]+)",
    _F,
)


def _rule(kind: StatementKind, triggers: str, pattern: str, *, lead: bool = False) -> _Rule:
    return _Rule(kind, frozenset(triggers.split()), re.compile(pattern, _F), lead)


@dataclass(frozen=True, slots=True)
class _Rule:
    """A statement pattern, tried only when the text holds one of its trigger words.
    ``lead``: the subject may be dropped (the match must follow "I"/"we", the start of a
    sentence or a filler word: :data:`_LEAD`)."""

    kind: StatementKind
    triggers: frozenset[str]
    pattern: re.Pattern[str]
    lead: bool = False

    def matches(self, text: str) -> bool:
        if not self.lead:
            return self.pattern.search(text) is not None
        return any(
            _LEAD.search(text, max(0, m.start() - 24), m.start())
            for m in self.pattern.finditer(text)
        )


_CONDITIONS = (
    "vegetarian vegan pescatarian allergic intolerant lactose coeliac celiac diabetic pregnant "
    "sober teetotal colorblind colourblind deaf kosher halal afraid scared terrified diet budget"
)
_OCCUPATIONS = (
    "nurse teacher developer engineer doctor student designer programmer chef cook writer "
    "artist musician lawyer accountant manager runner cyclist climber gamer photographer owl"
)
_HOUSEHOLD = (
    "dog dogs cat cats puppy kitten pet pets parrot rabbit hamster horse lizard retriever "
    "beagle poodle terrier labrador wife husband partner son daughter kids children twins "
    "baby toddler mom mum dad car bike truck van motorbike house flat apartment cabin garden "
    "balcony kitchen laptop phone camera guitar piano keyboard console"
)

#: The lexicon, in order: the first rule that matches gives the kind. ``preference``:
#: likes and dislikes; ``habit``: routines, activities, occupations; ``possession``:
#: things, pets, family; ``constraint``: diet, allergies, fears, health, budget.
_RULES: tuple[_Rule, ...] = (
    _rule(
        "constraint",
        _CONDITIONS,
        _I
        + r"(?:'m|\s+am|'re|\s+are)\s+(?:\w+\s+)?(?:"
        + "|".join(_CONDITIONS.split())
        + r"|colou?r-blind|gluten-free|on\s+a\s+(?:diet|budget))\b",
    ),
    _rule(
        "constraint",
        "can't cannot can don't do never",
        r"\b(?:(?:can't|cannot|can\s+not)\s+(?:eat|have|drink|handle|tolerate|digest)"
        r"|(?:don't|do\s+not|never)\s+(?:eat|drink|fly))\b",
        lead=True,
    ),
    _rule(
        "constraint",
        "keep asthma diabetes celiac coeliac migraines arthritis adhd anxiety allergy",
        _I + r"\s+(?:keep\s+(?:kosher|halal)|have\s+(?:asthma|diabetes|celiac|coeliac|migraines"
        r"|arthritis|adhd|anxiety|an?\s+(?:\w+\s+)?allergy))\b",
    ),
    _rule(
        "constraint",
        "budget doctor allergy allergies diet",
        r"\bmy\s+(?:\w+\s+)?(?:budget|doctor|allerg(?:y|ies)|diet)\b",
    ),
    _rule(
        "preference",
        "don't dont not never",
        r"(?:\bdon't|\bdo\s+not|\bdont|\bnever|'m\s+not"
        r"|\bam\s+not|\bare\s+not|'re\s+not)(?:\s+(?:really|much|a|that|very|too|big|huge))*"
        r"\s+(?:like|love|enjoy|fan\s+of|into|care\s+for)\b",
        lead=True,
    ),
    _rule(
        "preference",
        "stand fan hooked obsessed",
        r"(?:\b(?:can't|cannot|can\s+not)\s+stand|(?:'m\s+|\bam\s+)?\bnot\s+(?:a\s+)?"
        r"(?:\w+\s+)?fan\s+of|(?:'m\s+|\bam\s+)?(?:so\s+)?\b(?:hooked\s+on|obsessed\s+with))\b",
        lead=True,
    ),
    _rule(
        "preference",
        "favorite favourite favorites favourites fave go-to comfort guilty happy ritual",
        r"\b(?:my|our)\s+(?:absolute\s+|all-time\s+)?(?:favou?rites?|fave|go-to|comfort\s+\w+"
        r"|guilty\s+pleasure|happy\s+place|ritual)\b",
    ),
    _rule("preference", "beats life", r"\bnothing\s+beats\b|\bthe\s+best\s+\w+\s+of\s+my\s+life\b"),
    _rule("preference", "rather", _I + r"(?:'d|\s+would)\s+(?:much\s+)?rather\b"),
    _rule("preference", "refuse want wish", _I + r"\s+(?:refuse|want|wish)\s+to\b"),
    _rule(
        "preference",
        "read seen watched played heard",
        _I + r"(?:'ve|\s+have)\s+(?:read|seen|watched|played|heard)\s+(?:every\w*|all)\b",
    ),
    _rule(
        "preference",
        "makes make gives give drives drive bores bore bored",
        r"\b(?:makes?|gives?|drives?|bores?|bored)\s+me\s+(?:\w+\s+)?(?:anxious|nervous|sick"
        r"|crazy|nuts|happy|headaches?|nightmares|sweat|death|mad|calm|itch|sad)\b",
    ),
    _rule(
        "preference",
        "get",
        _I + r"\s+get\s+(?:so\s+|really\s+|very\s+)?(?:bored|seasick|carsick|anxious|nervous"
        r"|headaches|migraines|motion\s+sick)\b",
    ),
    _rule(
        "habit",
        "usually always often normally regularly typically tend mostly generally",
        _I + r"\s+(?:usually|always|often|normally|regularly|typically|tend\s+to|mostly"
        r"|generally)\s+\w+",
    ),
    _rule(
        "habit",
        "been",
        _I + r"(?:'ve|\s+have)\s+been\s+(?!thinking\b|meaning\b|wondering\b|feeling\b"
        r"|trying\s+to\s+(?:reach|call|get\s+hold)\b)\w+ing\b",
    ),
    _rule(
        "habit",
        "every",
        r"\bevery\s+(?:single\s+)?(?:morning|evening|night|day|weekday|weekend|week|month"
        r"|summer|winter|year|monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b",
    ),
    _rule(
        "habit",
        "mondays tuesdays wednesdays thursdays fridays saturdays sundays weekends",
        r"\b(?:mondays|tuesdays|wednesdays|thursdays|fridays|saturdays|sundays|weekends)"
        r"\s+are\s+for\b",
    ),
    _rule(
        "habit",
        "teach coach volunteer work",
        _I + r"\s+(?:teach|coach|volunteer|work\s+(?:as|from|at|in|nights|shifts))\b",
    ),
    _rule(
        "habit",
        _OCCUPATIONS,
        _I + r"(?:'m|\s+am)\s+an?\s+(?:\w+\s+){0,2}(?:" + "|".join(_OCCUPATIONS.split()) + r")\b",
    ),
    _rule(
        "habit",
        "learning training practicing practising studying teaching taking up",
        _I + r"(?:'m|\s+am)\s+(?:learning|training|practi[cs]ing|studying|teaching"
        r"|taking\s+(?:lessons|classes|a\s+course)|up\s+at)\b",
    ),
    _rule(
        "habit",
        "every everything daily weekly each always weekends sundays saturdays days night",
        _I + r"(?:\s+\w+ly)?\s+(?:drink|eat|listen\s+to|use|wear|put|read|shoot|play|watch"
        r"|practi[cs]e|train|run|swim|cycle|ride|bake|cook|knit|paint|draw|write|meditate"
        r"|hike|climb|teach|work|do)\s+(?:\w+\s+){0,5}(?:every\w*|each|daily|weekly|always"
        r"|all\s+the\s+time|on\s+(?:weekends|sundays|saturdays)|most\s+days|at\s+night)\b",
    ),
    _rule(
        "possession",
        "got bought",
        r"\b(?:just|finally)\s+(?:got|bought)\s+(?:a|an|my|our|the|some)\b",
        lead=True,
    ),
    _rule(
        "possession",
        "own have got bought drive ride i've we've",
        _I + r"(?:\s+(?:just|finally|recently|also|still|only))?(?:\s+own|\s+have\s+(?:a|an|two"
        r"|three|four|my\s+own)|'ve\s+got|\s+have\s+got|\s+got\s+(?:a|an|my)|\s+bought"
        r"|\s+drive|\s+ride)\b(?!\s+(?:a\s+)?(?:question|idea|feeling|look|minute|moment|sec"
        r"|second|chance|point|great|good|nice|lot)\b)",
    ),
    _rule(
        "possession",
        _HOUSEHOLD,
        r"\b(?:my|our)\s+(?:\w+\s+){0,2}(?:" + "|".join(_HOUSEHOLD.split()) + r")\b",
    ),
)
# Everything but letters, apostrophes and hyphens becomes a space (then split: words).
_SPACES = str.maketrans({c: " " for c in map(chr, range(128)) if not (c.isalpha() or c in "'-")})


def statement_kind(text: str) -> StatementKind | None:
    """What the user states about themselves in ``text``: ``"preference"``, ``"habit"``,
    ``"possession"``, ``"constraint"``, or None. Any string is valid input.

    ~30 µs for a chat turn; results for texts up to 4,000 characters are cached (the same
    candidates come back across recommendation questions)."""
    if not text:
        return None
    if len(text) <= 4000:
        return _cached_kind(text)
    return _kind(text)


@functools.lru_cache(maxsize=8192)
def _cached_kind(text: str) -> StatementKind | None:
    return _kind(text)


def _kind(text: str) -> StatementKind | None:
    lower = text.lower().replace("\u2019", "'")
    words = set(lower.translate(_SPACES).split())
    if not words:
        return None
    if not words.isdisjoint(_PREFER_WORDS):
        for m in _PREFER.finditer(lower):
            if not _REACTION.match(m.group("obj")):
                return "preference"
    for rule in _RULES:
        if not words.isdisjoint(rule.triggers) and rule.matches(lower):
            return rule.kind
    return None


_PREFER_WORDS = frozenset(
    str.split(
        "love like enjoy adore prefer hate dislike detest loathe despise stand into "
        "obsessed hooked addicted crazy passionate fan fond keen enough "
    )
)


_SIDE_ROLES = frozenset({"assistant", "system", "tool", "function", "developer"})


def user_side(metadata_json: str) -> bool:
    """True unless the chunk's ``metadata.role`` says someone else wrote it."""
    if '"role"' not in metadata_json:
        return True
    try:
        role = json.loads(metadata_json).get("role")
    except (ValueError, AttributeError):
        return True
    return not (isinstance(role, str) and role.lower() in _SIDE_ROLES)


def marked(rows: Iterable[tuple[int, str, str]]) -> set[int]:
    """The rowids of ``(rowid, text, metadata_json)`` rows that are user-side
    statements about the user."""
    return {r for r, text, meta in rows if user_side(meta) and statement_kind(text)}


#: Chunks :func:`store_marks` reads inside a search (~30 us each); a longer backlog (a
#: store opened for the first time, a bulk import) is read by a background thread while
#: searches boost only the statements among their own candidates.
INLINE_MAX = 2_000
#: Chunks read per page (inline or in the background).
_PAGE = 5_000


class _Marks:
    """A store's user-side statements, derived from its chunks and kept in memory like
    the BM25 index: new chunks are rowids above ``high``; text updates and deletions
    come from the ``chunks_changes`` log (``seen``: its last seq applied).

    ``lock`` guards the fields and is held only for a page's merge, never for a read
    of the database by the background builder (``building``), so a search never waits
    for it. A page the builder read before a chunk was deleted may put the deleted id
    back: harmless, a deleted chunk is never a candidate nor in any index.
    """

    __slots__ = ("building", "high", "lock", "rows", "seen")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.high = 0
        self.seen: int | None = None
        self.rows: set[int] = set()
        self.building = False


_MARKS: weakref.WeakKeyDictionary[AnyDatabase, _Marks] = weakref.WeakKeyDictionary()
_MARKS_LOCK = threading.Lock()


@overload
def store_marks(db: AnyDatabase, *, wait: Literal[True] = True) -> frozenset[int]: ...
@overload
def store_marks(db: AnyDatabase, *, wait: bool) -> frozenset[int] | None: ...
def store_marks(db: AnyDatabase, *, wait: bool = True) -> frozenset[int] | None:
    """The rowids of every chunk of ``db`` that is a user-side statement about the user,
    or None while they are being read in the background (``wait=False``).

    Kept per open store (``Database``) for the process's life; a call reads only what
    was written, changed or deleted since the last one. With ``wait=False`` (searches)
    a backlog above :data:`INLINE_MAX` chunks is handed to a background thread instead
    of being read inside the call (the first pass costs ~30 us a chunk: 0.2-0.5 s at
    ~12,000 chat chunks, benchmarks/README.md).
    """
    with _MARKS_LOCK:
        marks = _MARKS.get(db)
        if marks is None:
            marks = _MARKS[db] = _Marks()
    source, store = index_source(db), search_store(db)
    with marks.lock:
        if marks.building:
            return None
        newest, changed = source.text_changes_since(marks.seen)
        if changed is None:  # the log was pruned past what we applied: start over
            marks.high, marks.rows = 0, set()
        elif changed:
            gone = {int(r) for r, op in changed if op == "d"}
            marks.rows -= gone
            updated = sorted({int(r) for r, op in changed if op == "u"} - gone)
            marks.rows -= set(updated)
            marks.rows |= marked(store.chunk_statements([r for r in updated if r <= marks.high]))
        marks.seen = newest
        if not wait and source.chunk_max_id() - marks.high > INLINE_MAX:
            marks.building = True
            threading.Thread(
                target=_build, args=(db, marks), name="mindfile-preferences", daemon=True
            ).start()
            return None
        _read_after(store, marks, locked=True)
        return frozenset(marks.rows)


def _read_after(store: SearchStore, marks: _Marks, *, locked: bool) -> None:
    """Read the chunks above ``marks.high`` page by page. ``locked``: the caller holds
    ``marks.lock``; else it is taken for each page's merge only."""
    while True:
        rows = store.statements_after(marks.high, _PAGE)
        if not rows:
            return
        found = marked(rows)
        if locked:
            marks.rows |= found
            marks.high = rows[-1][0]
            continue
        with marks.lock:
            marks.rows |= found
            marks.high = rows[-1][0]


def _build(db: AnyDatabase, marks: _Marks) -> None:
    try:
        _read_after(search_store(db), marks, locked=False)
    except Exception as exc:  # a closed store, a busy database: the next search retries
        if not db.closed:
            logger.warning("reading the store's preference statements failed: %s", exc)
    finally:
        with marks.lock:
            marks.building = False


def apply_preferences(
    db: AnyDatabase,
    fused: dict[int, Fused],
    cfg: PreferenceConfig | None = None,
    *,
    index: VectorIndex | None = None,
    query_vec: Vector | None = None,
    where: VectorFilter | None = None,
    vector_weight: float = 0.0,
    vector_width: float = 0.0,
) -> None:
    """Boost those of the best ``cfg.scan`` fused candidates that are user-side
    statements about the user, in place (``cfg`` None: :data:`DEFAULT_PREFERENCE_CONFIG`,
    read at call time).

    With ``cfg.leg`` and a query vector, the ``leg`` statements nearest to the query
    (within ``where``, expired chunks excluded) join the candidates first, scored as the
    vector leg would score them (``vector_weight`` times the cosine min-max scaled over
    the vector leg's candidates, over a range of at least ``vector_width`` as calibrated
    fusion does, clipped to [0, 1]).
    """
    cfg = cfg or DEFAULT_PREFERENCE_CONFIG
    statements: set[int] | frozenset[int] | None = None
    if cfg.leg > 0:
        statements = store_marks(db, wait=False)  # None while read in the background
        if index is not None and query_vec is not None and statements:
            _third_leg(
                db, fused, statements, index, query_vec, where, vector_weight, vector_width, cfg.leg
            )
    best = heapq.nsmallest(cfg.scan, fused.values(), key=lambda f: (-f.score, f.rowid))
    if statements is None:  # no third leg: the statements among the candidates
        statements = marked(search_store(db).chunk_statements([f.rowid for f in best]))
    chosen = [f.rowid for f in best if f.rowid in statements]
    boost(fused, set(chosen[: cfg.limit] if cfg.limit > 0 else chosen), cfg)


def _third_leg(
    db: AnyDatabase,
    fused: dict[int, Fused],
    statements: set[int] | frozenset[int],
    index: VectorIndex,
    query_vec: Vector,
    where: VectorFilter | None,
    vector_weight: float,
    vector_width: float,
    k: int,
) -> None:
    pool = statements.difference(hidden_rowids(lifecycle_store(db), utcnow()))
    allowed = np.fromiter(sorted(pool), np.int64, len(pool))
    if where is not None and where.rowids is not None:
        allowed = np.intersect1d(allowed, where.rowids)
    if len(allowed) == 0:
        return
    flt = VectorFilter(session_ids=None if where is None else where.session_ids, rowids=allowed)
    sims = [f.vector for f in fused.values() if f.vector is not None and f.vector_rank]
    lo, hi = (min(sims), max(sims)) if sims else (0.0, 1.0)
    span = max(hi - lo, vector_width)
    span = span if span > 1e-12 else 1.0
    for rowid, sim in index.search(query_vec, k, where=flt):
        if rowid not in fused:
            norm = min(1.0, max(0.0, (sim - lo) / span))
            fused[rowid] = Fused(rowid, vector=sim, vector_norm=norm, score=vector_weight * norm)


def boost(fused: dict[int, Fused], marked: set[int], cfg: PreferenceConfig) -> None:
    """Add ``top * cfg.weight`` to each candidate in ``marked`` (``Fused.preference``;
    the others get 0.0), in place."""
    if not fused:
        return
    top = max((f.score for f in fused.values()), default=0.0)
    scale = top if top > 0 else 1.0
    for rowid, item in fused.items():
        item.preference = scale * cfg.weight if rowid in marked else 0.0
        item.score += item.preference
