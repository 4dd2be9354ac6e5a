-- The links that keep an event's CCR blobs alive, vouched for and guarded.
--
-- An event's `event_blobs` rows (and the journal's `ccr_refs` rows behind them) keep retention
-- from evicting a blob a live marker names. They could be deleted while `journal verify` still
-- found the journal intact. Now:
-- * each event appended from this version on records in `blobs_hash` a BLAKE3 of the sorted keys
--   it references (NULL when it references none), and the hash chain covers it, so verify
--   recomputes it from the rows and reports a row removed, added or moved;
-- * events appended before this version have no such hash: the ones that reference blobs are
--   listed in `event_blobs_unvouched` (verify checks their rows resolve, as before, but cannot
--   tell whether one was removed);
-- * triggers refuse editing `event_blobs` (deleting only with the session, as events are),
--   deleting a journal `ccr_refs` row while an event or a stored message still names its blob,
--   and changing a stored message's hash or pointing it at another CCR blob (`journal redact`
--   only clears the key, storing the replacement inline), or listing more unvouched events.
ALTER TABLE events ADD COLUMN blobs_hash BLOB CHECK (blobs_hash IS NULL OR length(blobs_hash) = 32);

CREATE TABLE event_blobs_unvouched (
    session_id TEXT    NOT NULL,
    seq        INTEGER NOT NULL,
    PRIMARY KEY (session_id, seq)
) WITHOUT ROWID;
INSERT INTO event_blobs_unvouched (session_id, seq) SELECT DISTINCT session_id, seq FROM event_blobs;

-- Which events reference a blob (retention, `ccr redact`, the ccr_refs trigger below).
CREATE INDEX event_blobs_by_key ON event_blobs (blob_key);

CREATE TRIGGER event_blobs_append_only_update BEFORE UPDATE ON event_blobs
BEGIN
    SELECT RAISE(ABORT, 'journal event_blobs rows are append-only');
END;
CREATE TRIGGER event_blobs_append_only_delete BEFORE DELETE ON event_blobs
WHEN NOT EXISTS (SELECT 1 FROM session_deletions d WHERE d.session_id = OLD.session_id)
BEGIN
    SELECT RAISE(ABORT, 'journal event_blobs rows are append-only');
END;
CREATE TRIGGER ccr_refs_journal_held BEFORE DELETE ON ccr_refs
WHEN OLD.owner = 'journal' AND EXISTS (
    SELECT 1 FROM ccr_blobs b WHERE b.id = OLD.blob_id AND (
        EXISTS (SELECT 1 FROM event_blobs e WHERE e.blob_key = b.key)
        OR EXISTS (SELECT 1 FROM messages m WHERE m.ccr_key = b.key)))
BEGIN
    SELECT RAISE(ABORT, 'a blob that journal events or messages name stays held by the journal');
END;
CREATE TRIGGER messages_keys_fixed BEFORE UPDATE OF hash, ccr_key ON messages
WHEN NEW.hash IS NOT OLD.hash OR (NEW.ccr_key IS NOT NULL AND NEW.ccr_key IS NOT OLD.ccr_key)
BEGIN
    SELECT RAISE(ABORT, 'a journal message keeps its hash and its CCR key');
END;
CREATE TRIGGER event_blobs_unvouched_closed BEFORE INSERT ON event_blobs_unvouched
BEGIN
    SELECT RAISE(ABORT, 'only events stored before schema 8 are unvouched');
END;
