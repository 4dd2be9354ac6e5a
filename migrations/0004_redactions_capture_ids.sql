-- Messages whose stored content `salvage journal redact` replaced: their body no longer hashes to
-- their key, which stays (the history states that list it restore the replacement). The
-- redaction event that did it is named here; it is also in the session's hash chain.
CREATE TABLE message_redactions (
    hash        BLOB    PRIMARY KEY CHECK (length(hash) = 32),
    session_id  TEXT    NOT NULL,
    seq         INTEGER NOT NULL,
    redacted_at TEXT    NOT NULL
) WITHOUT ROWID;

-- The capture a replayed session came from (session ids are unique per run; this groups them).
ALTER TABLE sessions ADD COLUMN capture_id TEXT;
