-- CCR: the content-addressed archive behind @recall.
-- key: blake3 of the original bytes (32 bytes); short: its first 16 lowercase hex (the marker key).
-- codec: 0 raw, 1 zstd. data is NULL once redacted (the key and lengths stay).
CREATE TABLE ccr_blobs (
    id          INTEGER PRIMARY KEY,
    key         BLOB    NOT NULL UNIQUE CHECK (length(key) = 32),
    short       TEXT    NOT NULL CHECK (length(short) = 16),
    codec       INTEGER NOT NULL CHECK (codec IN (0, 1)),
    raw_len     INTEGER NOT NULL CHECK (raw_len >= 0),
    stored_len  INTEGER NOT NULL CHECK (stored_len >= 0),
    data        BLOB,
    created_at  INTEGER NOT NULL,
    last_access INTEGER NOT NULL,
    redacted_at INTEGER
);
CREATE INDEX ccr_blobs_short ON ccr_blobs (short);
CREATE INDEX ccr_blobs_last_access ON ccr_blobs (last_access);

-- Who keeps a blob alive: a referenced blob is never evicted by retention.
CREATE TABLE ccr_refs (
    blob_id INTEGER NOT NULL REFERENCES ccr_blobs (id) ON DELETE CASCADE,
    owner   TEXT    NOT NULL,
    PRIMARY KEY (blob_id, owner)
) WITHOUT ROWID;
