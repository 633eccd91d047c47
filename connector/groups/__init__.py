"""A reader group's values: plain values and pure functions, below the reader core and the server.

- :mod:`.state`: :class:`~connector.groups.state.GroupState`, how far a
  group has read, and the rules over it (the group watermark, advance,
  finish, cuts).
- :mod:`.record`: :class:`~connector.groups.record.GroupRecord`, what a
  standalone group keeps in the store, and the key it keeps it under.
- :mod:`.lag`: how far a group is behind its segments' tails.
- :mod:`.tracking`: the group's time kept up to date as its state and a
  reader's positions change, at the cost of what changed.

The reader core runs groups by them, the adapters keep a ``GroupState`` in
their engines' state, and the server's metrics read the records in the
store. Nothing here imports the client, the reader core or the server.
"""
