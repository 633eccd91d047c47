"""Tests of the PySpark adapter, in one shared Spark session."""
