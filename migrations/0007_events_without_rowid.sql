-- The events table keyed by its natural key alone. As a rowid table, each event was stored in
-- three B-trees (the rows by rowid, the (session_id, seq) primary key, the unique event_id), so a
-- durable append of one event wrote a page of each; WITHOUT ROWID, the rows are the
-- (session_id, seq) B-tree itself and only event_id has an index of its own. Every reader looks
-- events up by (session_id, seq), a range of it, or event_id, so each keeps its index. An event
-- row holds the event's body and delta, not its messages (they are in `messages`), so rows stay
-- small, as a WITHOUT ROWID table wants them.
--
-- The rows are copied as they are (the hash chain covers their bytes, not their storage). The
-- table that references events (event_blobs) is set aside and restored around the swap, so the
-- foreign keys, which are on during migrations, hold at every step.
CREATE TABLE events_v7 (
    session_id    TEXT    NOT NULL REFERENCES sessions (id),
    seq           INTEGER NOT NULL CHECK (seq >= 1),
    event_id      TEXT    NOT NULL UNIQUE,
    parent        INTEGER,
    depth         INTEGER NOT NULL,
    kind          TEXT    NOT NULL,
    kind_version  INTEGER NOT NULL,
    ts            TEXT    NOT NULL,
    body          BLOB    NOT NULL,
    delta         BLOB,
    prev_hash     BLOB    NOT NULL CHECK (length(prev_hash) = 32),
    hash          BLOB    NOT NULL CHECK (length(hash) = 32),
    snapshot_hash BLOB CHECK (snapshot_hash IS NULL OR length(snapshot_hash) = 32),
    PRIMARY KEY (session_id, seq)
) WITHOUT ROWID;
INSERT INTO events_v7 (session_id, seq, event_id, parent, depth, kind, kind_version, ts, body, delta, prev_hash, hash, snapshot_hash)
    SELECT session_id, seq, event_id, parent, depth, kind, kind_version, ts, body, delta, prev_hash, hash, snapshot_hash
    FROM events;

CREATE TEMP TABLE event_blobs_v7 AS SELECT session_id, seq, blob_key FROM event_blobs;
DROP TABLE event_blobs;
DROP TRIGGER events_append_only_update;
DROP TRIGGER events_append_only_delete;
DROP TABLE events;
ALTER TABLE events_v7 RENAME TO events;

CREATE TABLE event_blobs (
    session_id TEXT    NOT NULL,
    seq        INTEGER NOT NULL,
    blob_key   BLOB    NOT NULL CHECK (length(blob_key) = 32),
    PRIMARY KEY (session_id, seq, blob_key),
    FOREIGN KEY (session_id, seq) REFERENCES events (session_id, seq)
) WITHOUT ROWID;
INSERT INTO event_blobs (session_id, seq, blob_key) SELECT session_id, seq, blob_key FROM temp.event_blobs_v7;
DROP TABLE temp.event_blobs_v7;

-- The append-only triggers of 0002 and 0003, on the new table.
CREATE TRIGGER events_append_only_update BEFORE UPDATE ON events
BEGIN
    SELECT RAISE(ABORT, 'journal events are append-only');
END;
CREATE TRIGGER events_append_only_delete BEFORE DELETE ON events
WHEN NOT EXISTS (SELECT 1 FROM session_deletions d WHERE d.session_id = OLD.session_id)
BEGIN
    SELECT RAISE(ABORT, 'journal events are append-only');
END;
