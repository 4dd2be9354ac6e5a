-- The event-sourced journal. Events are the truth; a session's state is a fold over them.

CREATE TABLE sessions (
    id         TEXT PRIMARY KEY,
    title      TEXT NOT NULL DEFAULT '',
    created_at TEXT NOT NULL,               -- RFC 3339
    head_seq   INTEGER NOT NULL DEFAULT 0,  -- the session's version: its last event's seq
    head_hash  BLOB NOT NULL                -- the hash chain's head (32 zero bytes when empty)
);

-- Append-only: triggers below reject UPDATE and DELETE.
-- seq is gapless per session (1, 2, …); event_id is chosen by the writer so a retried append is
-- recognised; parent is the event whose state this one continues (the previous one, or a rewind's
-- target); depth is the length of the parent chain (snapshots are taken every K of it).
-- hash = blake3(prev_hash || canonical bytes of the row): a per-session chain.
CREATE TABLE events (
    session_id   TEXT    NOT NULL REFERENCES sessions (id),
    seq          INTEGER NOT NULL CHECK (seq >= 1),
    event_id     TEXT    NOT NULL UNIQUE,
    parent       INTEGER,
    depth        INTEGER NOT NULL,
    kind         TEXT    NOT NULL,
    kind_version INTEGER NOT NULL,
    ts           TEXT    NOT NULL,
    body         BLOB    NOT NULL,
    delta        BLOB,
    prev_hash    BLOB    NOT NULL CHECK (length(prev_hash) = 32),
    hash         BLOB    NOT NULL CHECK (length(hash) = 32),
    PRIMARY KEY (session_id, seq)
);

CREATE TRIGGER events_append_only_update BEFORE UPDATE ON events
BEGIN
    SELECT RAISE(ABORT, 'journal events are append-only');
END;
CREATE TRIGGER events_append_only_delete BEFORE DELETE ON events
BEGIN
    SELECT RAISE(ABORT, 'journal events are append-only');
END;

-- Messages stored once by content hash (blake3 of their JSON). A history state is a list of
-- these hashes, repeats kept in order. Large messages live in CCR (body NULL, ccr_key set).
CREATE TABLE messages (
    id      INTEGER PRIMARY KEY,
    hash    BLOB NOT NULL UNIQUE CHECK (length(hash) = 32),
    body    BLOB,
    ccr_key BLOB CHECK (ccr_key IS NULL OR length(ccr_key) = 32),
    CHECK ((body IS NULL) <> (ccr_key IS NULL))
);

-- CCR blobs an event references (they are also held in ccr_refs so retention never evicts them).
CREATE TABLE event_blobs (
    session_id TEXT    NOT NULL,
    seq        INTEGER NOT NULL,
    blob_key   BLOB    NOT NULL CHECK (length(blob_key) = 32),
    PRIMARY KEY (session_id, seq, blob_key),
    FOREIGN KEY (session_id, seq) REFERENCES events (session_id, seq)
) WITHOUT ROWID;

-- Disposable cache: the state after an event, for a given reducer version. Safe to delete.
CREATE TABLE snapshots (
    session_id      TEXT    NOT NULL,
    seq             INTEGER NOT NULL,
    reducer_version INTEGER NOT NULL,
    state           BLOB    NOT NULL,
    PRIMARY KEY (session_id, seq, reducer_version)
) WITHOUT ROWID;
