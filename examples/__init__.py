"""Runnable examples: the sensor demos on the core, on Spark, and a reader group."""
