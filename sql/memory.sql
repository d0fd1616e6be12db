-- Memory service queries. Vectors are bound as pgvector values; every query is scoped by tenant.
-- Visibility: shared memories are seen by the whole tenant, private ones by their agent only, group ones
-- by agents in that group.

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

-- name: search_memories
-- Hybrid search in one read-only statement:
--   candidates: the HNSW index (cosine) and full text (a bounded pool of matches, ranked by ts_rank_cd);
--   score = relevance x tier boost x (1 - w + w x hotness), hotness = exp(-alpha x days since last hit),
--   relevance = (1 - ft_weight) x cosine + ft_weight x ts_rank_cd normalised to [0, 1).
-- Search hits are recorded afterwards, off the request path (ultron/memory/hits.py).
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
), fts_pool AS (
    SELECT m.id, m.search_tsv
    FROM memories m
    WHERE CAST(:tsquery AS text) <> ''
      AND m.search_tsv @@ to_tsquery('simple', CAST(:tsquery AS text))
      AND m.tenant_id = :tenant_id AND m.status = 'active'
      AND (CAST(:tier AS text) IS NULL OR m.tier = CAST(:tier AS text))
      AND (m.scope = 'shared'
           OR (m.scope = 'private' AND m.agent_id = CAST(:agent_id AS uuid))
           OR (m.scope = 'group' AND m.group_name = ANY(CAST(:groups AS text[]))))
    LIMIT :fts_pool
), fts AS (
    SELECT p.id
    FROM fts_pool p
    ORDER BY ts_rank_cd(p.search_tsv, to_tsquery('simple', CAST(:tsquery AS text)), 32) DESC
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
), top AS (
    SELECT r.*, r.relevance * r.tier_boost * (1 - :decay_weight + :decay_weight * r.hotness) AS score
    FROM ranked r
    ORDER BY score DESC, r.id
    LIMIT :limit
)
SELECT t.*, m.memory_type, m.content, m.context, m.resolution, m.tags, m.summary_l0, m.overview_l1,
       m.status, m.scope, m.group_name, m.pinned, m.hit_count, m.last_hit_at, m.created_at, m.updated_at,
       m.redacted_entities, m.valence, m.arousal, a.name AS agent_name,
       (SELECT count(*) FROM memory_contributions c WHERE c.memory_id = m.id) AS contributions
FROM top t
JOIN memories m ON m.id = t.id
LEFT JOIN agents a ON a.id = m.agent_id
ORDER BY t.score DESC, t.id

-- name: record_hits
SELECT id FROM ultron_record_hits(:tenant_id, CAST(:agent_id AS uuid), CAST(:memory_ids AS uuid[]), :signal,
                                  :weight, :window_seconds) AS id

-- name: term_frequencies
-- Share of memories holding each of the most common lexemes (collected by ANALYZE), and the row count.
SELECT coalesce(s.most_common_elems::text::text[], '{}') AS terms,
       coalesce(s.most_common_elem_freqs, '{}') AS freqs,
       (SELECT greatest(c.reltuples, 0) FROM pg_class c WHERE c.oid = 'memories'::regclass) AS rows
FROM (SELECT 1) one
LEFT JOIN pg_stats s ON s.schemaname = current_schema() AND s.tablename = 'memories' AND s.attname = 'search_tsv'

-- name: raw_knn
-- The bare pgvector HNSW k-nearest-neighbour query: the benchmark's baseline.
SELECT m.id
FROM memories m
WHERE m.tenant_id = :tenant_id AND m.status = 'active'
ORDER BY m.embedding <=> CAST(:embedding AS vector)
LIMIT :k

-- name: move_memory_sources
-- Consolidation: the segments the merged-away memory was extracted from now point at the memory that
-- absorbed it (a segment already linked to both keeps one row, its upload counts added).
WITH moved AS (
    DELETE FROM memory_sources s
    WHERE s.tenant_id = :tenant_id AND s.memory_id = :loser_id
    RETURNING s.segment_id, s.session_id, s.contributions, s.created_at
)
INSERT INTO memory_sources (memory_id, segment_id, session_id, tenant_id, decision, contributions, created_at)
SELECT :winner_id, m.segment_id, m.session_id, :tenant_id, 'merged', m.contributions, m.created_at
FROM moved m
ON CONFLICT (memory_id, segment_id)
DO UPDATE SET contributions = memory_sources.contributions + excluded.contributions
