-- Materialised history snapshots, and snapshots the hash chain vouches for.
-- A snapshot row now also holds the whole decoded history at its event (the messages' stored
-- JSON as one JSON array, zstd-compressed), so a restore reads one row instead of one row per
-- message. The event a snapshot is taken at records the snapshot's BLAKE3 (over the state and
-- history bytes) in snapshot_hash, which the event hash chain covers: a restore reads only a
-- snapshot whose bytes hash to it and refuses one that does not; verify checks every row.
--
-- The table is recreated as a rowid table: in a WITHOUT ROWID table every key comparison of a
-- lookup reads a row's whole payload once it overflows its page, so probing for a snapshot
-- cost a read of several large blobs. It is a disposable cache, and the rows written before
-- snapshots were vouched for would never be read again: they are dropped, not copied.
DROP TABLE snapshots;
CREATE TABLE snapshots (
    session_id      TEXT    NOT NULL,
    seq             INTEGER NOT NULL,
    reducer_version INTEGER NOT NULL,
    state           BLOB    NOT NULL,
    history         BLOB    NOT NULL,
    PRIMARY KEY (session_id, seq, reducer_version)
);
ALTER TABLE events ADD COLUMN snapshot_hash BLOB CHECK (snapshot_hash IS NULL OR length(snapshot_hash) = 32);
