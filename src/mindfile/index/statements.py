"""Which chunks state something about the user (preference recall, docs/retrieval.md,
"Preference recall").

:func:`statement_kind` says whether a text states a *preference* (a like or a dislike:
love / like / enjoy / prefer / hate / can't stand / am into / my favourite / I don't
like ...), a *habit* (I usually / every morning / I've been learning / I'm a nurse ...),
a *possession* (I own / I have a / my dog / just got a ...) or a *constraint* (I'm
vegetarian / I can't eat / I'm afraid of / my budget ...). First person only (a dropped
subject at the start of a sentence counts: "can't stand horror"); a negated habit or
possession ("I don't have a car") is not marked, and reactions to the other speaker ("I
love that!", "I like your photo") are not preferences. :func:`user_side` says whether
a chunk's metadata lets the user be its author (``metadata.role`` assistant, system or
tool: no).

A chunk is a *user statement* when both hold (:func:`is_user_statement`). Chunks are
written unclassified and classified once per store, off the write path, by the backfill
(:func:`mindfile.retrieve.preferences.backfill`); the store keeps the answer in
``chunks.user_statement`` (migration 0014). Pure functions, no I/O: the storage layer
and the read path both import this module.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "LEXICON_KEY",
    "LEXICON_VERSION",
    "StatementKind",
    "is_user_statement",
    "marked",
    "statement_kind",
    "user_side",
]

StatementKind = Literal["preference", "habit", "possession", "constraint"]

#: The lexicon's version. Raise it with any change to the rules that changes what they
#: classify: a store whose flags an older lexicon made (``store_meta`` key
#: :data:`LEXICON_KEY`; absent: 1) has them cleared and classified again, once, by the
#: backfill of the first writable engine that runs the newer one.
LEXICON_VERSION = 1
LEXICON_KEY = "statement_lexicon"

# No IGNORECASE: every pattern runs on the lowercased text (:func:`_kind`), and the flag
# only slowed them (~65 -> ~52 us a 500-character chunk; the same kinds for all 117k
# chunks of benchmarks/scale.py's store and every LoCoMo turn). The one difference is
# Unicode case folding of letters that lowercasing leaves apart (a long s for "s"):
# not worth reclassifying stores for, so LEXICON_VERSION stays.
_F = re.NOFLAG

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


def is_user_statement(text: str, metadata_json: str) -> bool:
    """True when the chunk ``(text, metadata_json)`` is a user-side statement about the
    user: what ``chunks.user_statement`` holds. Not cached (the backfill and
    consolidation classify each text once; :func:`statement_kind`'s cache is for the
    candidates that come back across searches)."""
    return bool(text) and user_side(metadata_json) and _kind(text) is not None
