"""The report of undecodable requests: one line at most every interval, counting the rest."""

from __future__ import annotations

import logging

from connector.server.request_decoding import UndecodableRequests


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if "did not decode" in r.getMessage()]


def test_a_flood_of_undecodable_requests_logs_one_line_per_interval(caplog):
    clock = _Clock()
    report = UndecodableRequests(interval_s=10.0, monotonic=clock)
    with caplog.at_level(logging.WARNING, logger="connector.server"):
        for n in range(1_000):
            report.report(
                "/tidemark.v1.SegmentStore/AppendEvents", "ipv4:127.0.0.1:1", ValueError(n)
            )
        assert len(_lines(caplog)) == 1
        clock.now += 9.9
        report.report("/m", "peer", ValueError("still quiet"))
        assert len(_lines(caplog)) == 1
        clock.now += 0.1
        report.report("/m", "peer", ValueError("bad\nbytes\x00" + "x" * 10_000))
    first, second = _lines(caplog)
    assert first.startswith("refused 1 request(s)") and "AppendEvents" in first
    assert second.startswith("refused 1001 request(s)")  # 999 + 1 unreported, then this one
    assert "\n" not in second and len(second) < 600
    assert report.total == 1_002
