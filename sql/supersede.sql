-- Current facts (ultron/memory/supersede.py, docs/ranking.md): a memory that updates another (same subject,
-- changed value) is linked as superseding it; the older one keeps everything but `superseded_by_id`.

-- name: supersede_candidates_many
-- The memories nearest to each new one (:ids, `ord` its 1-based place; a single upload's one) by cosine that
-- it may update: active, not superseded already, in the same scope and owner (private: the same agent;
-- group: the same group), any type; :k of them each (a batch asks for a few more than CANDIDATES: a memory
-- its own earlier links superseded drops out), nearest first.
SELECT u.ord, m.id, m.memory_type, m.content, m.context, m.resolution, m.thread, m.occurred_at, m.created_at
FROM unnest(CAST(:ids AS uuid[])) WITH ORDINALITY AS u(id, ord)
JOIN memories n ON n.id = u.id AND n.tenant_id = :tenant_id AND n.embedding IS NOT NULL
CROSS JOIN LATERAL (
    -- the HNSW walk, and an exact pass over the memories not in the graph yet (migration 0020); the :k
    -- nearest of both
    SELECT * FROM (
      (
        SELECT c.id, c.memory_type, c.content, c.context, c.resolution, c.thread, c.occurred_at, c.created_at,
               c.embedding <=> n.embedding AS distance
        FROM memories c
        WHERE c.tenant_id = n.tenant_id AND c.id <> n.id AND c.status = 'active' AND c.indexed
          AND c.superseded_by_id IS NULL AND c.merged_into_id IS NULL AND c.scope = n.scope
          AND (n.scope <> 'private' OR c.agent_id = n.agent_id)
          AND (n.scope <> 'group' OR c.group_name = n.group_name)
        ORDER BY c.embedding <=> n.embedding
        LIMIT :k
      ) UNION ALL (
        SELECT c.id, c.memory_type, c.content, c.context, c.resolution, c.thread, c.occurred_at, c.created_at,
               c.embedding <=> n.embedding AS distance
        FROM memories c
        WHERE c.tenant_id = n.tenant_id AND c.id <> n.id AND c.status = 'active' AND NOT c.indexed
          AND c.superseded_by_id IS NULL AND c.merged_into_id IS NULL AND c.scope = n.scope
          AND (n.scope <> 'private' OR c.agent_id = n.agent_id)
          AND (n.scope <> 'group' OR c.group_name = n.group_name)
        ORDER BY c.embedding <=> n.embedding
        LIMIT :k
      )
    ) b
    ORDER BY b.distance
    LIMIT :k
) m
ORDER BY u.ord, m.distance

-- name: mark_superseded
UPDATE memories SET superseded_by_id = :newer
WHERE id = :older AND tenant_id = :tenant_id AND superseded_by_id IS NULL AND id <> :newer
