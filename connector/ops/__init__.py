"""Running a store: Prometheus metrics, gRPC health checking and reflection."""

from connector.ops.health import HealthReporter, add_reflection
from connector.ops.metrics import StoreMetrics

__all__ = ["HealthReporter", "StoreMetrics", "add_reflection"]
