"""Prometheus metrics in the text exposition format (version 0.0.4), written by hand.

Why not ``prometheus-client``: the server exposes a dozen series from one process, and
the format for counters, gauges and histograms is a few lines of text; a dependency
would add a second registry, global state and its own multiprocess rules for what
``mindfile serve`` never does (one process, one engine). docs/http.md lists the series.

Everything here is thread-safe: request handlers run in a thread pool.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

__all__ = ["LATENCY_BUCKETS", "Counter", "Gauge", "Histogram", "Registry"]

#: Seconds; fine at the low end, where searches and stores live (0.5-20 ms).
LATENCY_BUCKETS: tuple[float, ...] = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
)

Labels = tuple[str, ...]


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(names: Sequence[str], values: Sequence[str], extra: str = "") -> str:
    parts = [f'{n}="{_escape(v)}"' for n, v in zip(names, values, strict=True)]
    if extra:
        parts.append(extra)
    return "{" + ",".join(parts) + "}" if parts else ""


def _number(value: float) -> str:
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if math.isnan(value):
        return "NaN"
    if float(value).is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(float(value))


@dataclass
class _Metric:
    name: str
    help: str
    label_names: tuple[str, ...] = ()
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    kind = "untyped"

    def header(self) -> list[str]:
        return [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} {self.kind}"]

    def _key(self, labels: Sequence[str]) -> Labels:
        if len(labels) != len(self.label_names):
            raise ValueError(f"{self.name} takes labels {self.label_names}")
        return tuple(str(v) for v in labels)

    def render(self) -> list[str]:  # pragma: no cover - every subclass overrides
        raise NotImplementedError


@dataclass
class Counter(_Metric):
    """A monotonically increasing count per label set."""

    _values: dict[Labels, float] = field(default_factory=dict, repr=False)
    kind = "counter"

    def inc(self, *labels: str, amount: float = 1.0) -> None:
        key = self._key(labels)
        with self._lock:
            self._values[key] = self._values.get(key, 0.0) + amount

    def value(self, *labels: str) -> float:
        with self._lock:
            return self._values.get(self._key(labels), 0.0)

    def render(self) -> list[str]:
        with self._lock:
            items = sorted(self._values.items())
        lines = self.header()
        if not items and not self.label_names:
            items = [((), 0.0)]
        for key, value in items:
            lines.append(f"{self.name}{_labels(self.label_names, key)} {_number(value)}")
        return lines


@dataclass
class Gauge(_Metric):
    """A value read when scraped: ``source()`` returns ``[(labels, value), ...]``."""

    source: Callable[[], Iterable[tuple[Labels, float]]] = lambda: ()
    kind = "gauge"

    def render(self) -> list[str]:
        lines = self.header()
        for key, value in self.source():
            lines.append(f"{self.name}{_labels(self.label_names, key)} {_number(value)}")
        return lines


@dataclass
class Histogram(_Metric):
    """Observations in cumulative buckets, with their sum and count, per label set."""

    buckets: tuple[float, ...] = LATENCY_BUCKETS
    _series: dict[Labels, list[float]] = field(default_factory=dict, repr=False)
    kind = "histogram"

    def observe(self, value: float, *labels: str) -> None:
        key = self._key(labels)
        with self._lock:
            series = self._series.get(key)
            if series is None:  # one slot per bucket, then +Inf, sum
                series = self._series[key] = [0.0] * (len(self.buckets) + 2)
            for i, bound in enumerate(self.buckets):
                if value <= bound:
                    series[i] += 1
                    break
            else:
                series[len(self.buckets)] += 1
            series[-1] += value

    def count(self, *labels: str) -> int:
        with self._lock:
            series = self._series.get(self._key(labels))
            return 0 if series is None else int(sum(series[:-1]))

    def render(self) -> list[str]:
        with self._lock:
            items = sorted((k, list(v)) for k, v in self._series.items())
        lines = self.header()
        for key, series in items:
            running = 0.0
            for bound, hits in zip((*self.buckets, math.inf), series[:-1], strict=True):
                running += hits
                le = f'le="{_number(bound)}"'
                lines.append(
                    f"{self.name}_bucket{_labels(self.label_names, key, le)} {_number(running)}"
                )
            lines.append(f"{self.name}_sum{_labels(self.label_names, key)} {_number(series[-1])}")
            lines.append(f"{self.name}_count{_labels(self.label_names, key)} {_number(running)}")
        return lines


M = TypeVar("M", bound=_Metric)


class Registry:
    """The server's metrics, rendered together."""

    def __init__(self) -> None:
        self._metrics: list[_Metric] = []

    def add(self, metric: M) -> M:
        """Register ``metric`` (rendered in registration order); returns it."""
        self._metrics.append(metric)
        return metric

    def render(self) -> str:
        lines: list[str] = []
        for metric in self._metrics:
            try:
                lines.extend(metric.render())
            except Exception:  # a broken gauge source must not hide the others
                lines = [*lines, f"# {metric.name} unavailable"]
        return "\n".join(lines) + "\n"
