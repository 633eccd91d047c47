"""Which JetStream API errors a store tries again and which it passes on as refusals."""

from __future__ import annotations

import nats.js.errors
import pytest

from connector.store.jetstream.engine import EngineRefused, EngineUnavailable, translated


def _api_error(err_code: int, description: str) -> nats.js.errors.APIError:
    return nats.js.errors.APIError(code=500, err_code=err_code, description=description)


def test_no_peers_while_a_peer_is_offline_is_unavailable_so_it_is_tried_again() -> None:
    # What a cluster answers a stream's creation in the moments after its nodes start, before
    # the meta leader has heard from every peer: it passes, so opening a store waits it out.
    error = translated(
        _api_error(10005, "no suitable peers for placement, peer offline"), "creating s"
    )
    assert isinstance(error, EngineUnavailable)
    assert "peer offline" in str(error)


@pytest.mark.parametrize(
    "description",
    ["no suitable peers for placement", "no suitable peers for placement, insufficient storage"],
)
def test_no_peers_for_a_lasting_reason_is_a_refusal_naming_it(description: str) -> None:
    error = translated(_api_error(10005, description), "creating s")
    assert isinstance(error, EngineRefused)
    assert description in str(error)
