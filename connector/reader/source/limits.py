"""A limit of events and bytes: a batch's budget, a task's size."""

from __future__ import annotations

from dataclasses import dataclass

from connector.errors import InvalidArgumentError

__all__ = ["Budget"]


@dataclass(frozen=True)
class Budget:
    """At most ``max_events`` events and ``max_bytes`` bytes (None: no limit).

    Raises:
        InvalidArgumentError: a limit that is given and not an integer > 0, naming it.
    """

    max_events: int | None = None
    max_bytes: int | None = None

    def __post_init__(self) -> None:
        for name in ("max_events", "max_bytes"):
            limit = getattr(self, name)
            wrong = isinstance(limit, bool) or not isinstance(limit, int) or limit < 1
            if limit is not None and wrong:
                msg = f"{name} must be an integer >= 1 or None, got {limit!r}"
                raise InvalidArgumentError(msg)

    @property
    def unlimited(self) -> bool:
        """Whether there is no limit at all."""
        return self.max_events is None and self.max_bytes is None

    def admits(self, events: int, size: int) -> bool:
        """Whether ``events`` events of ``size`` bytes in all stay within both limits."""
        return (self.max_events is None or events <= self.max_events) and (
            self.max_bytes is None or size <= self.max_bytes
        )
