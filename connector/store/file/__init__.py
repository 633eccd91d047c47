"""The file store: Tidemark's streams in a data dir on one machine (the embedded default).

- :mod:`.store`: :class:`~.store.SegmentStore`, the store on a data dir.
- :mod:`.catalog` and :mod:`.segment`: scopes, streams and state values; a segment's data file.
- :mod:`.sequencer` and :mod:`.journal`: every change ordered, group-committed and journalled.
- :mod:`.recovery` and :mod:`.compaction`: replaying the journal at start, and keeping it short;
  :mod:`.bit_flips`: the one flipped bit a record's checksum points at.
- :mod:`.salvage`: checking a stopped store's data dir, and repairing what a damaged one proves.
- :mod:`.data_dir`, :mod:`.open_files` and :mod:`.disk`: the dir's lock, descriptors, and writes.
"""
