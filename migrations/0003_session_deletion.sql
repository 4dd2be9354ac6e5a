-- Deleting whole sessions (`journal delete`, `journal prune`). Events stay append-only: a DELETE
-- on events is refused unless its session is listed in session_deletions, which only the deleting
-- transaction fills (and empties before it commits). Editing or removing single events is still
-- refused, so a partial deletion cannot happen; a deleted session leaves a row in
-- deleted_sessions.
CREATE TABLE session_deletions (
    session_id TEXT PRIMARY KEY
) WITHOUT ROWID;

DROP TRIGGER events_append_only_delete;
CREATE TRIGGER events_append_only_delete BEFORE DELETE ON events
WHEN NOT EXISTS (SELECT 1 FROM session_deletions d WHERE d.session_id = OLD.session_id)
BEGIN
    SELECT RAISE(ABORT, 'journal events are append-only');
END;

CREATE TABLE deleted_sessions (
    id         TEXT    NOT NULL,
    title      TEXT    NOT NULL,
    events     INTEGER NOT NULL,
    created_at TEXT    NOT NULL,
    deleted_at TEXT    NOT NULL,
    reason     TEXT    NOT NULL
);
