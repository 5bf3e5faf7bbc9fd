"""How many examples a property draws, under the loaded hypothesis profile.

A test's own `settings(max_examples=…)` wins over any profile, so the properties ask
`examples(n)` instead of writing `n`: `n` in the default profile (what CI runs), and `n`
times the explore profile's factor under `HYPOTHESIS_PROFILE=explore` (tests/conftest.py).
"""

from __future__ import annotations

from hypothesis import settings

# Hypothesis's own default, which the explore profile multiplies.
_BASE = 100


def examples(n: int) -> int:
    """`n` scaled as the loaded profile's `max_examples` is to hypothesis's default."""
    return max(1, n * settings.default.max_examples // _BASE)
