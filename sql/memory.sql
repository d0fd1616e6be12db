-- Memory service queries. Vectors are bound as pgvector values; every query is scoped by tenant.
-- Visibility (the `visible` fragment, repeated inline): shared memories are seen by the tenant, private
-- ones by their agent only, group ones by agents in that group.

-- name: nearest_same_type
-- The nearest active memories of one type and scope: an exact content-hash match first, then HNSW.
WITH exact AS (
    SELECT m.id, 1.0::float8 AS similarity
    FROM memories m
    WHERE m.tenant_id = :tenant_id AND m.content_hash = :content_hash
      AND m.memory_type = :memory_type AND m.status = 'active'
      AND m.scope = :scope
      AND (m.scope <> 'private' OR m.agent_id = CAST(:agent_id AS uuid))
      AND (m.scope <> 'group' OR m.group_name = CAST(:group_name AS text))
    LIMIT 1
), ann AS (
    SELECT m.id, 1 - (m.embedding <=> CAST(:embedding AS vector)) AS similarity
    FROM memories m
    WHERE m.tenant_id = :tenant_id AND m.memory_type = :memory_type AND m.status = 'active'
      AND m.scope = :scope
      AND (m.scope <> 'private' OR m.agent_id = CAST(:agent_id AS uuid))
      AND (m.scope <> 'group' OR m.group_name = CAST(:group_name AS text))
    ORDER BY m.embedding <=> CAST(:embedding AS vector)
    LIMIT :k
)
SELECT id, max(similarity) AS similarity
FROM (SELECT * FROM exact UNION ALL SELECT * FROM ann) c
GROUP BY id
ORDER BY similarity DESC, id
LIMIT :k

-- name: hybrid_search
-- Candidates from the HNSW index and from full text, fused:
-- score = relevance x tier boost x (1 - w + w x hotness), hotness = exp(-alpha x days since last hit),
-- relevance = (1 - ft_weight) x cosine + ft_weight x ts_rank_cd normalised to [0, 1).
WITH vec AS (
    SELECT m.id
    FROM memories m
    WHERE m.tenant_id = :tenant_id AND m.status = 'active'
      AND (CAST(:tier AS text) IS NULL OR m.tier = CAST(:tier AS text))
      AND (m.scope = 'shared'
           OR (m.scope = 'private' AND m.agent_id = CAST(:agent_id AS uuid))
           OR (m.scope = 'group' AND m.group_name = ANY(CAST(:groups AS text[]))))
    ORDER BY m.embedding <=> CAST(:embedding AS vector)
    LIMIT :candidates
), fts AS (
    SELECT m.id
    FROM memories m
    WHERE CAST(:tsquery AS text) <> ''
      AND m.search_tsv @@ to_tsquery('simple', CAST(:tsquery AS text))
      AND m.tenant_id = :tenant_id AND m.status = 'active'
      AND (CAST(:tier AS text) IS NULL OR m.tier = CAST(:tier AS text))
      AND (m.scope = 'shared'
           OR (m.scope = 'private' AND m.agent_id = CAST(:agent_id AS uuid))
           OR (m.scope = 'group' AND m.group_name = ANY(CAST(:groups AS text[]))))
    ORDER BY ts_rank_cd(m.search_tsv, to_tsquery('simple', CAST(:tsquery AS text)), 32) DESC
    LIMIT :candidates
), scored AS (
    SELECT m.id, m.tier,
           1 - (m.embedding <=> CAST(:embedding AS vector)) AS vector_similarity,
           CASE WHEN CAST(:tsquery AS text) = '' THEN 0.0
                ELSE ts_rank_cd(m.search_tsv, to_tsquery('simple', CAST(:tsquery AS text)), 32)
           END AS text_rank,
           greatest(extract(epoch FROM now() - coalesce(m.last_hit_at, m.created_at)) / 86400.0, 0)
               AS days_since_hit,
           (m.id IN (SELECT id FROM vec)) AS from_vector,
           (m.id IN (SELECT id FROM fts)) AS from_text
    FROM memories m
    WHERE m.id IN (SELECT id FROM vec UNION SELECT id FROM fts)
), ranked AS (
    SELECT s.*,
           (1 - :ft_weight) * s.vector_similarity + :ft_weight * s.text_rank AS relevance,
           CASE s.tier WHEN 'hot' THEN :boost_hot WHEN 'warm' THEN :boost_warm ELSE :boost_cold END
               AS tier_boost,
           exp(-:alpha * s.days_since_hit) AS hotness
    FROM scored s
)
SELECT r.*, r.relevance * r.tier_boost * (1 - :decay_weight + :decay_weight * r.hotness) AS score
FROM ranked r
ORDER BY score DESC, r.id
LIMIT :limit

-- name: record_hits
-- One use of each memory by one agent. A hit counts (raises hit_count by its weight) only if the same
-- agent has no counted hit of the same signal on that memory inside the window; every use is logged.
WITH input AS (
    SELECT DISTINCT unnest(CAST(:memory_ids AS uuid[])) AS memory_id
), decided AS (
    SELECT i.memory_id,
           NOT EXISTS (
               SELECT 1 FROM hit_events h
               WHERE h.memory_id = i.memory_id
                 AND h.agent_id IS NOT DISTINCT FROM CAST(:agent_id AS uuid)
                 AND h.signal = :signal AND h.counted
                 AND h.created_at > now() - make_interval(secs => :window_seconds)
           ) AS counted
    FROM input i
    JOIN memories m ON m.id = i.memory_id AND m.tenant_id = :tenant_id
), logged AS (
    INSERT INTO hit_events (tenant_id, memory_id, agent_id, signal, weight, counted)
    SELECT :tenant_id, memory_id, CAST(:agent_id AS uuid), :signal, :weight, counted FROM decided
)
UPDATE memories m
SET hit_count = m.hit_count + :weight, last_hit_at = now()
FROM decided d
WHERE m.id = d.memory_id AND d.counted AND m.tenant_id = :tenant_id
RETURNING m.id

-- name: raw_knn
-- The bare pgvector HNSW k-nearest-neighbour query: the benchmark's baseline.
SELECT m.id
FROM memories m
WHERE m.tenant_id = :tenant_id AND m.status = 'active'
ORDER BY m.embedding <=> CAST(:embedding AS vector)
LIMIT :k
