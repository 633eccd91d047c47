"""The Flink scale benchmark times how long Flink's watermark is behind the store's.

An idle stream's segments tick together, so the store's watermark rises in
steps of a whole tick round: the difference of the two watermarks, sampled
just after a step, shows the step (10 s) however soon Flink follows.
"""

from __future__ import annotations

import pytest

from bench.scale_flink_bench import StoreWatermarks

#: The store's samples' period in these tests, s.
_PERIOD_S = 0.05


def _stepping_store() -> StoreWatermarks:
    """The store's watermark sampled from t = 99 s to 101 s, stepping by 10 s at t = 100 s."""
    ours = StoreWatermarks()
    for n in range(40):
        at = 99.0 + n * _PERIOD_S
        ours.add(at, 80_000 if at < 100.0 else 90_000)
    return ours


def test_a_watermark_that_follows_a_tick_rounds_step_in_300_ms_is_300_ms_behind() -> None:
    ours = _stepping_store()
    # Still at the last step 0.3 s after the store's rose: 0.3 s behind (to a sample's period
    # more), not the 10 s between the two watermarks.
    assert ours.behind(80_000, at=100.3) == pytest.approx(0.3, abs=_PERIOD_S + 1e-9)
    assert ours.behind(80_000, at=100.3) >= 0.3  # never less than the truth


def test_a_watermark_at_or_above_the_stores_is_not_behind() -> None:
    ours = _stepping_store()
    assert ours.behind(90_000, at=100.3) == 0.0
    assert ours.behind(80_000, at=99.5) == 0.0  # before the step, at the store's
    assert ours.behind(85_000, at=99.5) == 0.0


def test_a_watermark_below_every_sample_is_behind_since_the_first() -> None:
    ours = _stepping_store()
    assert ours.behind(70_000, at=100.3) == pytest.approx(1.3)
