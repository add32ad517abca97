"""The Prometheus recorder: `turnkeeper.metrics`' events kept as prometheus-client metrics.

Installed by the package on import when prometheus-client is installed (the `server` extra), so
every process that records anything — `turnkeeper serve`'s `/metrics`, a library user's own
Prometheus endpoint — has the same names in the default registry. It lives at the edge: the
core knows only `turnkeeper.metrics`.
"""

from __future__ import annotations

from typing import Any

from turnkeeper import metrics


class PrometheusRecorder:
    """One prometheus-client metric per instrument, in `registry` (default: the global one)."""

    def __init__(self, registry: Any = None) -> None:
        import prometheus_client

        options: dict[str, Any] = {} if registry is None else {"registry": registry}
        self._metrics: dict[str, Any] = {}
        for instrument in metrics.INSTRUMENTS:
            if instrument.kind == "histogram":
                extra: dict[str, Any] = {}
                if instrument.buckets is not None:
                    extra["buckets"] = instrument.buckets
                made: Any = prometheus_client.Histogram(
                    instrument.name, instrument.help, instrument.label_names, **options, **extra
                )
            else:
                made = prometheus_client.Counter(
                    instrument.name, instrument.help, instrument.label_names, **options
                )
            self._metrics[instrument.name] = made

    def record(
        self, instrument: metrics.Instrument, labels: tuple[str, ...], amount: float
    ) -> None:
        target = self._metrics[instrument.name]
        if labels:
            target = target.labels(*labels)
        if instrument.kind == "histogram":
            target.observe(amount)
        else:
            target.inc(amount)


_default: PrometheusRecorder | None = None


def install_default() -> PrometheusRecorder | None:
    """The recorder on the global registry, made and installed once per process; None when
    prometheus-client is not installed."""
    global _default
    if _default is None:
        try:
            _default = PrometheusRecorder()
        except ImportError:
            return None
        metrics.install(_default)
    return _default
