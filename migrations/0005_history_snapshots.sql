-- Materialised history snapshots, and snapshots the hash chain vouches for.
-- A snapshot row now also holds the whole decoded history at its event (the messages' stored
-- JSON as one JSON array, zstd-compressed), so a restore reads one row instead of one row per
-- message. The event a snapshot is taken at records the snapshot's BLAKE3 (over the state and
-- history bytes) in snapshot_hash, which the event hash chain covers: a restore reads only a
-- snapshot whose bytes hash to it and refuses one that does not; verify checks every row.
-- Rows written before this migration have no snapshot_hash and are no longer read.
ALTER TABLE snapshots ADD COLUMN history BLOB;
ALTER TABLE events ADD COLUMN snapshot_hash BLOB CHECK (snapshot_hash IS NULL OR length(snapshot_hash) = 32);
