-- Ingestion and the Trajectory Hub. Work selection (leases) is the worker's: sql/worker.sql.

-- name: session_digests
-- A stored session's message digests in order: a re-sent file is recognised as unchanged in one read.
SELECT s.id, s.message_count,
       (SELECT array_agg(m.digest ORDER BY m.seq) FROM session_messages m WHERE m.session_id = s.id) AS digests
FROM sessions s
WHERE s.tenant_id = :tenant_id AND s.agent_name = :agent_name AND s.source = :source;

-- name: sessions_digests
-- The same for many sources at once (one read per ingest request).
SELECT s.source, s.message_count,
       (SELECT array_agg(m.digest ORDER BY m.seq) FROM session_messages m WHERE m.session_id = s.id) AS digests
FROM sessions s
WHERE s.tenant_id = :tenant_id AND s.agent_name = :agent_name AND s.source = ANY(:sources);

-- name: link_memory_source
-- A segment's upload created or merged into a memory: link them (a row, so a later merge keeps it).
INSERT INTO memory_sources (memory_id, segment_id, session_id, tenant_id, decision)
VALUES (:memory_id, :segment_id, :session_id, :tenant_id, :decision)
ON CONFLICT (memory_id, segment_id, tenant_id) DO UPDATE SET contributions = memory_sources.contributions + 1;

-- name: archive_segment_memories
-- A segment changed: archive exactly the memories it produced, i.e. those linked to it, with no link to
-- another live segment, and no contribution from anyone but segment extractions (a memory a person also
-- uploaded to stays). Returns the archived ids.
WITH candidates AS (
    SELECT s.memory_id FROM memory_sources s
    WHERE s.segment_id = :segment_id AND s.tenant_id = :tenant_id
), only_ours AS (
    SELECT c.memory_id FROM candidates c
    WHERE NOT EXISTS (
        SELECT 1 FROM memory_sources o JOIN task_segments t ON t.id = o.segment_id
        WHERE o.memory_id = c.memory_id AND o.segment_id <> :segment_id AND t.stage <> 'superseded'
    )
    AND (SELECT count(*) FROM memory_contributions mc WHERE mc.memory_id = c.memory_id)
        <= (SELECT sum(o.contributions) FROM memory_sources o WHERE o.memory_id = c.memory_id)
)
UPDATE memories m
SET status = 'archived', archived_reason = :reason, archived_at = now(), updated_at = now()
FROM only_ours
WHERE m.id = only_ours.memory_id AND m.tenant_id = :tenant_id AND m.status = 'active'
RETURNING m.id;

-- name: segment_stage_counts
SELECT stage, count(*) AS n FROM task_segments WHERE tenant_id = :tenant_id GROUP BY stage;

-- name: harness_openings
-- The opening system and user messages of an agent's recent sessions of one format, one text per session:
-- what a harness repeats in all of them (its prompt, tool instructions, task template) is learned here.
SELECT string_agg(m.content, E'\n' ORDER BY m.seq) AS text
FROM (
    SELECT id FROM sessions
    WHERE tenant_id = :tenant_id AND agent_name = :agent_name AND format = :format
    ORDER BY created_at DESC
    LIMIT :sessions
) s
JOIN session_messages m ON m.session_id = s.id AND m.tenant_id = :tenant_id
WHERE m.seq < :opening AND m.role IN ('system', 'user')
GROUP BY s.id;
