"""The demo's worker settings follow the broker it started."""

from __future__ import annotations

from worker.settings import FLAGS
from worker.tools.demo import _settings
from worker.tools.servers import TANSU


def test_on_tansu_the_demo_keeps_every_fetch_short_and_elsewhere_the_default() -> None:
    default = next(f.default for f in FLAGS if f.name == "fetch-whole-wait-ms")
    assert default > 0
    # tansu answers a fetch only at the end of its wait: the demo's records would wait.
    assert _settings("k:9092", "redis://r", TANSU).fetch_whole_wait_ms == 0
    assert _settings("k:9092", "redis://r", "kafka 4.4.0").fetch_whole_wait_ms == default
