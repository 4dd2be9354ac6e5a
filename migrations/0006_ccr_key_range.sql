-- CCR without the two secondary indexes every put kept up to date. A 16-hex marker key is the
-- first 8 bytes of the 32-byte key, so its blobs are a range of the unique key index
-- (key BETWEEN prefix||00.. AND prefix||ff..); `ccr gc` reads every blob anyway and sorts them by
-- last access when it runs. A put writes two index pages fewer through the WAL.
DROP INDEX ccr_blobs_short;
DROP INDEX ccr_blobs_last_access;
