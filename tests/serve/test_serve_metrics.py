"""serve's request and token counters: counted as plain ints per POST, added to the
Prometheus Counters at each scrape (`flush`), once."""

from __future__ import annotations

from prometheus_client import generate_latest

from worker.serve.app import ServeMetrics


def sample(m: ServeMetrics, name: str, labels: dict[str, str] | None = None) -> float | None:
    return m.registry.get_sample_value(name, labels or {})


def test_counts_reach_the_counters_at_each_flush_once() -> None:
    m = ServeMetrics()
    m.answered("chat", 200, 0.001, tokens=3)
    m.answered("chat", 200, 0.002, tokens=1)
    m.answered("completion", 400, 0.0)
    ok = {"endpoint": "chat", "status": "200"}
    assert sample(m, "derender_http_requests_total", ok) is None  # not yet scraped
    m.flush()
    assert sample(m, "derender_http_requests_total", ok) == 2.0
    bad = {"endpoint": "completion", "status": "400"}
    assert sample(m, "derender_http_requests_total", bad) == 1.0
    assert sample(m, "derender_tokens_total") == 4.0
    assert sample(m, "derender_http_request_seconds_count") == 3.0  # (observed at once)
    m.flush()  # nothing new: nothing added twice
    m.answered("chat", 200, 0.001, tokens=2)
    m.flush()
    assert sample(m, "derender_http_requests_total", ok) == 3.0
    assert sample(m, "derender_tokens_total") == 6.0
    assert b'derender_http_requests_total{endpoint="chat",status="200"} 3.0' in generate_latest(
        m.registry
    )
