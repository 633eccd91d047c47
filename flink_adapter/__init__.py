"""The PyFlink adapter: not built yet.

It will stand on the same reader core as the Spark adapter (see
``connector.reader``): a coordinator keeping the group state in Flink keyed
state, read tasks broadcast to the read subtasks, and the group watermark
turned into Flink's event time through a watermark column. Nothing here is
importable API yet.
"""
