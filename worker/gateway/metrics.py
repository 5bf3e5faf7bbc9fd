"""The gateway's Prometheus metrics (its `/metrics`)."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

# Outcomes of a client request, the `outcome` label.
OK = "ok"  # answered from the output topic
REFUSED = "refused"  # render or generate refused it (the engine's 4xx / 5xx passed on)
ENGINE_FAILED = "engine_failed"  # the engine broke off or was unreachable
TIMEOUT = "timeout"  # no output for --reply-timeout-s
DISCONNECTED = "disconnected"  # the client left first
BAD_REQUEST = "bad_request"  # refused by the gateway itself (not JSON, too large)
OUTCOMES = (OK, REFUSED, ENGINE_FAILED, TIMEOUT, DISCONNECTED, BAD_REQUEST)

# A control record's `reason` (worker/wire/control.py), the `reason` label.
CONTROL_REASONS = ("stop", "error", "abort")

_WAIT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class GatewayMetrics:
    def __init__(self, in_flight: Callable[[], int] = lambda: 0) -> None:
        r = self.registry = CollectorRegistry()
        self.requests = Counter(
            "derender_gateway_requests",
            "client requests by API and outcome",
            ["api", "outcome"],
            registry=r,
        )
        self.reply_wait = Histogram(
            "derender_gateway_reply_wait_seconds",
            "seconds from a request's first record published to its first output read",
            buckets=_WAIT_BUCKETS,
            registry=r,
        )
        self.in_flight = Gauge(
            "derender_gateway_requests_in_flight",
            "client requests waiting for their outputs",
            registry=r,
        )
        self.in_flight.set_function(lambda: float(in_flight()))
        self.control_stops = Counter(
            "derender_gateway_control_stops",
            "streamed requests whose engine request was stopped by the worker's control "
            "record (--control-topic), by its reason",
            ["reason"],
            registry=r,
        )
        self.control_late_tokens = Counter(
            "derender_gateway_control_late_tokens",
            "tokens the engine sent past the worker's stop before the control record arrived",
            registry=r,
        )
        for reason in CONTROL_REASONS:
            self.control_stops.labels(reason)
        for api in ("chat", "completion", "responses", "messages"):  # (every series, at 0)
            for outcome in OUTCOMES:
                self.requests.labels(api, outcome)
