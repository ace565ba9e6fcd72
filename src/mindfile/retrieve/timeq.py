"""Time expressions in queries: "last May", "two weeks ago", "in 2023", "latest" (pure).

:func:`parse_time_query` finds the English time expressions of a query and resolves
them against a query date (``as_of``) into time windows (half-open ``[start, end)``
UTC intervals) and an order preference (``"latest"`` / ``"earliest"``). The search
then boosts memories by how close their time is to a window (:mod:`mindfile.retrieve.
temporal`). Any string is a valid query: text with no time expression (the usual case,
decided by one regular expression) returns None, and nothing here raises on user text.

What is understood (case-insensitive; docs/retrieval.md lists it with examples):

- dates: ``2023-05-08``, ``5/8/2023``, ``8 May 2023``, ``the 8th of May``, ``May 8th,
  2023``, ``May 8`` (no year: the latest such day not after ``as_of``);
- months and years: ``May 2023``, ``in May`` / ``last May`` / ``this May``, ``in 2023``,
  ``summer 2021``; a bare ``May``/``March`` counts only after a preposition or
  ``last``/``this``/``early``/... (it is also a verb);
- relative: ``yesterday``, ``today``, ``tonight``, ``N days/weeks/months/years ago``
  (digits, number words, ``a``, ``a few``, ``a couple of``), ``last/this/next
  week/weekend/month/year``, ``the past N days``, ``last Friday``, ``on Sunday``;
- anchored: ``the week before <date>``, ``the Sunday after <date>``, ``last weekend
  before <date>``, ``before/after/since <date>``;
- order: ``latest``, ``most recent``, ``recently``, ``current(ly)``, ``now``, ``these
  days`` (prefer newer), ``first``, ``earliest``, ``originally`` (prefer older).

A maintained parser (dateparser 1.5) was measured and is not used; see docs/retrieval.md.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Literal

__all__ = ["TimeQuery", "TimeWindow", "parse_time_query"]

Order = Literal["latest", "earliest"]

_MONTHS = {
    "january": 1, "jan": 1, "february": 2, "feb": 2, "march": 3, "mar": 3, "april": 4,
    "apr": 4, "may": 5, "june": 6, "jun": 6, "july": 7, "jul": 7, "august": 8, "aug": 8,
    "september": 9, "sep": 9, "sept": 9, "october": 10, "oct": 10, "november": 11,
    "nov": 11, "december": 12, "dec": 12,
}  # fmt: skip
_WEEKDAYS = {
    "monday": 0, "tuesday": 1, "wednesday": 2, "thursday": 3, "friday": 4,
    "saturday": 5, "sunday": 6,
}  # fmt: skip
_NUMBERS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
    "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
    "a few": 3, "few": 3, "a couple of": 2, "a couple": 2, "couple of": 2, "several": 3,
}  # fmt: skip
_SEASONS = {"spring": (3, 6), "summer": (6, 9), "autumn": (9, 12), "fall": (9, 12)}

_MONTH = r"(?P<month>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_WEEKDAY = r"(?P<weekday>" + "|".join(_WEEKDAYS) + r")s?"
_YEAR = r"(?P<year>1[89]\d\d|20\d\d|21\d\d)"
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_COUNT = r"(?P<count>\d{1,3}|" + "|".join(sorted(_NUMBERS, key=len, reverse=True)) + ")"
_UNIT = r"(?P<unit>day|week|weekend|month|year|decade)s?"

#: Words after which a bare month name is a month ("in May", not "I may").
_MONTH_LEAD = (
    r"(?:in|during|since|until|till|by|from|of|last|this|next|early|mid|late|before|after"
    r"|past|previous|throughout|around|through|to|and|or|on)"
)

# Cheap pre-check: a query without any of these words cannot hold a time expression.
_TRIGGER = re.compile(
    r"\b(?:"
    + "|".join(sorted(_MONTHS, key=len, reverse=True))
    + "|"
    + "|".join(_WEEKDAYS)
    + r"|1[89]\d\d|20\d\d|21\d\d|\d{1,4}[-/]\d{1,2}[-/]\d{1,4}|yesterday|today|tonight"
    r"|tomorrow|ago|last|past|previous|this|next|recent|recently|latest|newest|lately"
    r"|current|currently|now|nowadays|these|first|earliest|originally|initially|oldest"
    r"|spring|summer|autumn|fall|winter|week|weekend|month|year)s?\b",
    re.IGNORECASE,
)

_ISO = re.compile(r"\b(?P<y>\d{4})-(?P<m>\d{1,2})-(?P<d>\d{1,2})\b")
_SLASH = re.compile(r"\b(?P<a>\d{1,2})/(?P<b>\d{1,2})/(?P<y>\d{4}|\d{2})\b")
_DAY_MONTH = re.compile(
    rf"\b(?:the\s+)?{_DAY}\s+(?:of\s+)?{_MONTH}(?:,?\s+{_YEAR})?\b", re.IGNORECASE
)
_MONTH_DAY = re.compile(
    rf"\b{_MONTH}\s+(?:the\s+)?{_DAY}(?!\d|\s*:)(?:,?\s+{_YEAR})?\b", re.IGNORECASE
)
_MONTH_YEAR = re.compile(
    rf"\b(?P<part>early|mid|late|beginning\s+of|end\s+of|start\s+of)?\s*{_MONTH},?\s+"
    rf"(?:of\s+)?{_YEAR}\b",
    re.IGNORECASE,
)
_SEASON = re.compile(
    r"\b(?P<rel>last|this|next)?\s*(?P<season>spring|summer|autumn|fall|winter)"
    rf"(?:\s+(?:of\s+)?{_YEAR})?\b",
    re.IGNORECASE,
)
_BARE_MONTH = re.compile(
    rf"\b(?P<lead>{_MONTH_LEAD})\s+(?:the\s+(?:month\s+of\s+)?)?{_MONTH}(?![\w'])", re.IGNORECASE
)
_CAP_MONTH = re.compile(
    r"\b(?P<month>January|February|April|June|July|August|September|October|November"
    r"|December)\b"
)
_BARE_YEAR = re.compile(rf"(?<![\w/-]){_YEAR}(?![\w/-])")
_AGO = re.compile(rf"\b{_COUNT}\s+{_UNIT}\s+ago\b", re.IGNORECASE)
_PAST_N = re.compile(rf"\b(?:the\s+)?(?:past|last|previous)\s+{_COUNT}\s+{_UNIT}\b", re.IGNORECASE)
_REL_UNIT = re.compile(
    r"\b(?P<rel>last|this|next|past|previous|coming)\s+(?P<unit>week|weekend|month|year)\b",
    re.IGNORECASE,
)
_REL_DAY = re.compile(
    r"\b(?P<word>the\s+day\s+before\s+yesterday|yesterday|today|tonight|tomorrow"
    r"|this\s+(?:morning|afternoon|evening)|last\s+night)\b",
    re.IGNORECASE,
)
_WEEKDAY_RE = re.compile(rf"\b(?P<rel>last|this|next|on|past)?\s*{_WEEKDAY}\b", re.IGNORECASE)
# "the week before", "last weekend before", "the Sunday after", "before", "since" ...
_ANCHOR = re.compile(
    r"(?:\b(?:the\s+|last\s+|a\s+)?(?P<unit>day|week|weekend|month|year|monday|tuesday"
    r"|wednesday|thursday|friday|saturday|sunday)\s+)?\b(?P<dir>before|after|since|until"
    r"|till|prior\s+to)\s+(?:the\s+)?$",
    re.IGNORECASE,
)
_LATEST = re.compile(
    r"\b(?:latest|newest|most\s+recent(?:ly)?|recent(?:ly)?|lately|current(?:ly)?|now"
    r"|nowadays|these\s+days|right\s+now|at\s+the\s+moment|last\s+time|anymore|still)\b",
    re.IGNORECASE,
)
_EARLIEST = re.compile(
    r"\b(?:first|earliest|oldest|originally|initially|at\s+first|in\s+the\s+beginning)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class TimeWindow:
    """A resolved time expression: ``[start, end)`` in UTC, and the words it came from."""

    start: datetime
    end: datetime
    text: str


@dataclass(frozen=True, slots=True)
class TimeQuery:
    """What a query says about time: windows (any of them) and an order preference."""

    as_of: datetime
    windows: tuple[TimeWindow, ...] = ()
    order: Order | None = None

    def describe(self) -> str:
        """A short human-readable summary (for explain output)."""
        parts = [f"{w.text!r} -> {w.start.date()}..{(w.end - timedelta(seconds=1)).date()}"
                 for w in self.windows]  # fmt: skip
        if self.order:
            parts.append(f"prefer {self.order}")
        return "; ".join(parts)


def _dt(d: date) -> datetime:
    return datetime(d.year, d.month, d.day, tzinfo=UTC)


def _day(d: date) -> tuple[datetime, datetime]:
    return _dt(d), _dt(d) + timedelta(days=1)


def _month(year: int, month: int) -> tuple[datetime, datetime]:
    start = datetime(year, month, 1, tzinfo=UTC)
    end = datetime(year + 1, 1, 1, tzinfo=UTC) if month == 12 else start.replace(month=month + 1)
    return start, end


def _year(year: int) -> tuple[datetime, datetime]:
    return datetime(year, 1, 1, tzinfo=UTC), datetime(year + 1, 1, 1, tzinfo=UTC)


def _count(text: str) -> int:
    text = " ".join(text.lower().split())
    return int(text) if text.isdigit() else _NUMBERS.get(text, 1)


def _unit_days(unit: str) -> float:
    return {"day": 1, "week": 7, "weekend": 7, "month": 30.44, "year": 365.25}.get(
        unit.lower(), 3652.5
    )


def _week_start(d: date) -> date:
    return d - timedelta(days=d.weekday())


def _latest_month(today: date, month: int) -> int:
    """The year of the latest ``month`` that is not after ``today``."""
    return today.year if month <= today.month else today.year - 1


def _latest_day(today: date, month: int, day: int) -> date | None:
    for year in (today.year, today.year - 1):
        try:
            d = date(year, month, day)
        except ValueError:
            continue
        if d <= today:
            return d
    return None


def _valid_date(year: int, month: int, day: int) -> date | None:
    try:
        return date(year, month, day)
    except ValueError:
        return None


class _Parser:
    def __init__(self, query: str, as_of: datetime) -> None:
        self.text = query
        self.as_of = as_of
        self.today = as_of.date()
        self.taken = [False] * len(query)
        self.windows: list[tuple[int, datetime, datetime, str]] = []

    def free(self, m: re.Match[str]) -> bool:
        return not any(self.taken[m.start() : m.end()])

    def add(self, m: re.Match[str], span: tuple[datetime, datetime] | None) -> None:
        if span is None or span[1] <= span[0]:
            return
        first = m.start() + len(m.group(0)) - len(m.group(0).lstrip())
        start, end, lead = self._anchor(first, span)
        for i in range(first - lead, m.end()):
            self.taken[i] = True
        text = self.text[first - lead : m.end()]
        self.windows.append((first - lead, start, end, " ".join(text.split())))

    def _anchor(self, pos: int, span: tuple[datetime, datetime]) -> tuple[datetime, datetime, int]:
        """``the week before <date>``, ``after <date>``, ``since <date>``: the window
        next to the anchor date instead of the date itself, and how many characters
        before ``pos`` the anchor words take."""
        window = self.text[max(0, pos - 40) : pos]
        m = _ANCHOR.search(window)
        if m is None:
            return (*span, 0)
        return (*self._anchored(m, span), len(window) - m.start())

    def _anchored(
        self, m: re.Match[str], span: tuple[datetime, datetime]
    ) -> tuple[datetime, datetime]:
        direction = " ".join(m.group("dir").lower().split())
        unit = (m.group("unit") or "").lower()
        start, end = span
        before = direction in ("before", "until", "till", "prior to")
        if unit in _WEEKDAYS:
            wd = _WEEKDAYS[unit]
            if before:
                back = (start.weekday() - wd - 1) % 7 + 1
                return start - timedelta(days=back), start - timedelta(days=back - 1)
            ahead = (wd - (end - timedelta(days=1)).weekday() - 1) % 7 + 1
            day = end - timedelta(days=1) + timedelta(days=ahead)
            return day, day + timedelta(days=1)
        if unit == "weekend":
            if before:
                sat = start - timedelta(days=(start.weekday() - 5) % 7 or 7)
                return sat, sat + timedelta(days=2)
            sat = end + timedelta(days=(5 - end.weekday()) % 7)
            return sat, sat + timedelta(days=2)
        width = timedelta(days=_unit_days(unit)) if unit else None
        if before:
            if width is None:  # "before 2020": anything earlier, nearest first
                return start - (end - start) - timedelta(days=7), start
            return start - width, start
        if direction == "since":
            return start, max(self.as_of, end)
        if width is None:
            return end, end + (end - start) + timedelta(days=7)
        return end, end + width

    def run(self) -> None:
        t = self.text
        for m in _ISO.finditer(t):
            d = _valid_date(int(m["y"]), int(m["m"]), int(m["d"]))
            self.add(m, None if d is None else _day(d))
        for m in _SLASH.finditer(t):
            if not self.free(m):
                continue
            y = int(m["y"]) + (2000 if len(m["y"]) == 2 else 0)
            a, b = int(m["a"]), int(m["b"])
            d = _valid_date(y, a, b) or _valid_date(y, b, a)  # US order first
            self.add(m, None if d is None else _day(d))
        for pattern in (_DAY_MONTH, _MONTH_DAY):
            for m in pattern.finditer(t):
                if not self.free(m):
                    continue
                month, day = _MONTHS[m["month"].lower()], int(m["day"])
                if m["year"]:
                    d = _valid_date(int(m["year"]), month, day)
                else:
                    # "may 3 people" is not a date; "May 3" with a capital is.
                    verb = m["month"].lower() in ("may", "march", "mar")
                    if pattern is _MONTH_DAY and verb and not m["month"][0].isupper():
                        continue
                    d = _latest_day(self.today, month, day)
                self.add(m, None if d is None else _day(d))
        for m in _MONTH_YEAR.finditer(t):
            if self.free(m):
                start, end = _month(int(m["year"]), _MONTHS[m["month"].lower()])
                self.add(m, _part(m["part"], start, end))
        for m in _SEASON.finditer(t):
            if self.free(m) and (m["year"] or m["rel"]):
                self.add(m, self._season(m))
        for m in _BARE_MONTH.finditer(t):
            if self.free(m):
                self.add(m, self._bare_month(m["lead"].lower(), _MONTHS[m["month"].lower()]))
        for m in _CAP_MONTH.finditer(t):
            if self.free(m):
                month = _MONTHS[m["month"].lower()]
                self.add(m, _month(_latest_month(self.today, month), month))
        for m in _AGO.finditer(t):
            if self.free(m):
                days = _count(m["count"]) * _unit_days(m["unit"])
                center = self.as_of - timedelta(days=days)
                half = timedelta(days=max(1.0, _unit_days(m["unit"]) / 2))
                self.add(m, (center - half, center + half))
        for m in _PAST_N.finditer(t):
            if self.free(m):
                days = _count(m["count"]) * _unit_days(m["unit"])
                self.add(m, (self.as_of - timedelta(days=days), self.as_of))
        for m in _REL_DAY.finditer(t):
            if self.free(m):
                self.add(m, self._rel_day(" ".join(m["word"].lower().split())))
        for m in _REL_UNIT.finditer(t):
            if self.free(m):
                self.add(m, self._rel_unit(m["rel"].lower(), m["unit"].lower()))
        for m in _WEEKDAY_RE.finditer(t):
            if self.free(m):
                self.add(m, self._weekday((m["rel"] or "").lower(), m["weekday"].lower()))
        for m in _BARE_YEAR.finditer(t):
            if self.free(m) and int(m["year"]) <= self.today.year + 1:
                self.add(m, _year(int(m["year"])))

    def _season(self, m: re.Match[str]) -> tuple[datetime, datetime]:
        name = m["season"].lower()
        if name == "winter":
            year = int(m["year"]) if m["year"] else self._rel_year(m["rel"], 12)
            return datetime(year, 12, 1, tzinfo=UTC), datetime(year + 1, 3, 1, tzinfo=UTC)
        first, after = _SEASONS[name]
        year = int(m["year"]) if m["year"] else self._rel_year(m["rel"], first)
        return datetime(year, first, 1, tzinfo=UTC), datetime(year, after, 1, tzinfo=UTC)

    def _rel_year(self, rel: str | None, month: int) -> int:
        latest = _latest_month(self.today, month)
        rel = (rel or "").lower()
        if rel == "this":
            return self.today.year
        if rel == "next":
            return latest + 1
        if rel == "last" and latest == self.today.year and month <= self.today.month:
            # "last summer" in August is the summer before this one
            return latest - 1 if self.today.month < month + 3 else latest
        return latest

    def _bare_month(self, lead: str, month: int) -> tuple[datetime, datetime]:
        year = _latest_month(self.today, month)
        if lead == "this":
            year = self.today.year
        elif lead == "next":
            year = self.today.year if month > self.today.month else self.today.year + 1
        elif lead in ("last", "past", "previous") and month == self.today.month:
            year = self.today.year - 1
        return _month(year, month)

    def _rel_day(self, word: str) -> tuple[datetime, datetime]:
        offset = {"yesterday": -1, "last night": -1, "tomorrow": 1}.get(word, 0)
        if word == "the day before yesterday":
            offset = -2
        return _day(self.today + timedelta(days=offset))

    def _rel_unit(self, rel: str, unit: str) -> tuple[datetime, datetime]:
        today = self.today
        step = {"last": -1, "past": -1, "previous": -1, "this": 0, "next": 1, "coming": 1}[rel]
        if unit == "week":
            if rel == "past":
                return self.as_of - timedelta(days=7), self.as_of
            start = _dt(_week_start(today)) + timedelta(weeks=step)
            return start, start + timedelta(weeks=1)
        if unit == "weekend":
            sat = _week_start(today) + timedelta(days=5)
            if step < 0 and sat + timedelta(days=1) >= today:
                sat -= timedelta(weeks=1)  # this week's is not over yet
            elif step > 0 and sat <= today:
                sat += timedelta(weeks=1)
            return _dt(sat), _dt(sat) + timedelta(days=2)
        if unit == "month":
            if rel == "past":
                return self.as_of - timedelta(days=30.44), self.as_of
            index = today.year * 12 + today.month - 1 + step
            return _month(index // 12, index % 12 + 1)
        if rel == "past":
            return self.as_of - timedelta(days=365.25), self.as_of
        return _year(today.year + step)

    def _weekday(self, rel: str, name: str) -> tuple[datetime, datetime]:
        wd = _WEEKDAYS[name]
        today = self.today
        if rel == "next":
            ahead = (wd - today.weekday() - 1) % 7 + 1
            return _day(today + timedelta(days=ahead))
        if rel == "this":
            return _day(_week_start(today) + timedelta(days=wd))
        back = (today.weekday() - wd) % 7
        if rel in ("last", "past") and back == 0:
            back = 7
        return _day(today - timedelta(days=back))


def _part(part: str | None, start: datetime, end: datetime) -> tuple[datetime, datetime]:
    """``early``/``mid``/``late`` May 2023: a third of the month."""
    if not part:
        return start, end
    third = (end - start) / 3
    key = part.split()[0].lower()
    if key in ("early", "beginning", "start"):
        return start, start + third
    if key == "mid":
        return start + third, end - third
    return end - third, end


def parse_time_query(query: str, as_of: datetime) -> TimeQuery | None:
    """The time expressions of ``query`` resolved against ``as_of`` (an aware datetime),
    or None when it has none. Never raises on any text."""
    if not isinstance(query, str) or not _TRIGGER.search(query):
        return None
    try:
        parser = _Parser(query[:2000], as_of.astimezone(UTC))
        parser.run()
    except (ValueError, OverflowError, KeyError):  # a date past datetime's range, ...
        return None
    windows = tuple(TimeWindow(start, end, text) for _, start, end, text in sorted(parser.windows))
    rest = "".join(" " if taken else ch for ch, taken in zip(query, parser.taken, strict=False))
    order: Order | None = None
    if _LATEST.search(rest):
        order = "latest"
    elif _EARLIEST.search(rest):
        order = "earliest"
    if not windows and order is None:
        return None
    return TimeQuery(as_of=as_of.astimezone(UTC), windows=windows[:8], order=order)
