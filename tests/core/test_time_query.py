"""Time expressions in queries, resolved against a fixed query date (retrieve/timeq.py)."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mindfile.retrieve.timeq import TimeQuery, parse_time_query

# A Friday.
AS_OF = datetime(2023, 10, 20, 15, 30, tzinfo=UTC)


def window(query: str, as_of: datetime = AS_OF) -> tuple[date, date]:
    """The single window of ``query`` as (first day, last day)."""
    tq = parse_time_query(query, as_of)
    assert tq is not None, query
    assert len(tq.windows) == 1, tq
    w = tq.windows[0]
    return w.start.date(), (w.end - timedelta(microseconds=1)).date()


D = date


@pytest.mark.parametrize(
    ("query", "first", "last"),
    [
        ("what did I do yesterday?", D(2023, 10, 19), D(2023, 10, 19)),
        ("what happened today", D(2023, 10, 20), D(2023, 10, 20)),
        ("the day before yesterday", D(2023, 10, 18), D(2023, 10, 18)),
        ("last night's dinner", D(2023, 10, 19), D(2023, 10, 19)),
        ("what did I do last May?", D(2023, 5, 1), D(2023, 5, 31)),
        ("trips in May", D(2023, 5, 1), D(2023, 5, 31)),
        ("what about in November", D(2022, 11, 1), D(2022, 11, 30)),
        ("plans for next month", D(2023, 11, 1), D(2023, 11, 30)),
        ("books I read last month", D(2023, 9, 1), D(2023, 9, 30)),
        ("anything in 2021?", D(2021, 1, 1), D(2021, 12, 31)),
        ("what did I do in 2023", D(2023, 1, 1), D(2023, 12, 31)),
        ("last year", D(2022, 1, 1), D(2022, 12, 31)),
        ("this year", D(2023, 1, 1), D(2023, 12, 31)),
        ("May 2023", D(2023, 5, 1), D(2023, 5, 31)),
        ("in October, 2022", D(2022, 10, 1), D(2022, 10, 31)),
        ("early June 2023", D(2023, 6, 1), D(2023, 6, 10)),
        ("summer 2021", D(2021, 6, 1), D(2021, 8, 31)),
        ("on 8 May, 2023", D(2023, 5, 8), D(2023, 5, 8)),
        ("May 23, 2023", D(2023, 5, 23), D(2023, 5, 23)),
        ("the 8th of May", D(2023, 5, 8), D(2023, 5, 8)),
        ("on October 13th", D(2023, 10, 13), D(2023, 10, 13)),
        ("December 25", D(2022, 12, 25), D(2022, 12, 25)),
        ("2023-05-08", D(2023, 5, 8), D(2023, 5, 8)),
        ("5/8/2023", D(2023, 5, 8), D(2023, 5, 8)),
        ("25/12/2022", D(2022, 12, 25), D(2022, 12, 25)),
        ("two weeks ago", D(2023, 10, 3), D(2023, 10, 10)),  # Oct 6 +- half a week
        ("3 days ago", D(2023, 10, 16), D(2023, 10, 18)),
        ("a month ago", D(2023, 9, 4), D(2023, 10, 5)),
        ("last week", D(2023, 10, 9), D(2023, 10, 15)),
        ("this week", D(2023, 10, 16), D(2023, 10, 22)),
        ("last weekend", D(2023, 10, 14), D(2023, 10, 15)),
        ("this weekend", D(2023, 10, 21), D(2023, 10, 22)),
        ("in the past 3 days", D(2023, 10, 17), D(2023, 10, 20)),
        ("last Friday", D(2023, 10, 13), D(2023, 10, 13)),
        ("on Monday", D(2023, 10, 16), D(2023, 10, 16)),
        ("the week before August 3, 2023", D(2023, 7, 27), D(2023, 8, 2)),
        ("last weekend before April 10, 2023", D(2023, 4, 8), D(2023, 4, 9)),
        ("the Sunday before October 25, 2022", D(2022, 10, 23), D(2022, 10, 23)),
        ("the Saturday after October 28, 2023", D(2023, 11, 4), D(2023, 11, 4)),
        ("since May 2021", D(2021, 5, 1), D(2023, 10, 20)),
    ],
)
def test_phrasings_resolve_to_their_window(query: str, first: date, last: date) -> None:
    assert window(query) == (first, last)


def test_last_may_in_may_is_the_year_before() -> None:
    assert window("last May", datetime(2023, 5, 20, tzinfo=UTC)) == (D(2022, 5, 1), D(2022, 5, 31))
    assert window("this May", datetime(2023, 5, 20, tzinfo=UTC)) == (D(2023, 5, 1), D(2023, 5, 31))


@pytest.mark.parametrize(
    ("query", "order"),
    [
        ("what is my latest project?", "latest"),
        ("the most recent trip", "latest"),
        ("what book am I currently reading", "latest"),
        ("where do I work now", "latest"),
        ("what did I paint recently", "latest"),
        ("my first car", "earliest"),
        ("the earliest memory of the lake", "earliest"),
    ],
)
def test_order_words(query: str, order: str) -> None:
    tq = parse_time_query(query, AS_OF)
    assert tq is not None and tq.order == order and not tq.windows


@pytest.mark.parametrize(
    "query",
    [
        "What did Melanie say about pottery?",
        "I may go to the beach",  # "may" the verb
        "they will march on the capital",
        "Cyberpunk 2077 is a game",  # a year far after the query date
        "",
        "   ",
        '*** OR NOT NEAR( "',
    ],
)
def test_text_without_a_time_expression(query: str) -> None:
    assert parse_time_query(query, AS_OF) is None


def test_several_expressions_give_several_windows_and_last_is_not_latest() -> None:
    tq = parse_time_query("what did I do in May 2022 and in June 2023?", AS_OF)
    assert tq is not None and [w.text for w in tq.windows] == ["May 2022", "June 2023"]
    tq = parse_time_query("last May", AS_OF)
    assert tq is not None and tq.order is None  # "last" of "last May" is not "latest"


def test_invalid_dates_are_skipped_not_raised() -> None:
    assert parse_time_query("2023-02-30", AS_OF) is None
    tq = parse_time_query("31 February 2023", AS_OF)  # the day is not, the month is
    assert tq is not None and [w.text for w in tq.windows] == ["February 2023"]
    tq = parse_time_query("99/99/2023 in 2022", AS_OF)
    assert tq is not None and [w.text for w in tq.windows] == ["2022"]


def test_extreme_query_dates_do_not_raise() -> None:
    for as_of in (datetime(1, 1, 3, tzinfo=UTC), datetime(9999, 12, 30, tzinfo=UTC)):
        for q in ("yesterday", "last year", "next month", "3 years ago", "next weekend"):
            result = parse_time_query(q, as_of)
            assert result is None or isinstance(result, TimeQuery)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_any_text_is_a_valid_query(text: str) -> None:
    result = parse_time_query(text, AS_OF)
    assert result is None or isinstance(result, TimeQuery)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                "in",
                "last",
                "this",
                "next",
                "May",
                "march",
                "2023",
                "1999",
                "the",
                "week",
                "before",
                "after",
                "since",
                "ago",
                "two",
                "a",
                "few",
                "days",
                "weeks",
                "8th",
                "of",
                ",",
                "yesterday",
                "Sunday",
                "weekend",
                "latest",
                "first",
                "5/8/2023",
                "2023-13-45",
                "31",
                "February",
                "summer",
            ]
        ),
        max_size=12,
    ),
    st.datetimes(min_value=datetime(1, 2, 1), max_value=datetime(9999, 11, 1)),
)
def test_time_word_soup_never_raises(words: list[str], as_of: datetime) -> None:
    result = parse_time_query(" ".join(words), as_of.replace(tzinfo=UTC))
    assert result is None or isinstance(result, TimeQuery)
