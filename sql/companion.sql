-- Companion memory: the session-start brief, time ripples, serendipity and the reflect ("dream") call.
-- Visibility as everywhere: shared memories are seen by the whole tenant, private ones by their agent
-- only, group ones by agents in that group.

-- name: brief_pinned
-- Pinned memories lead every brief, oldest pin first (a stable order the agent can rely on).
SELECT m.id, m.memory_type, m.summary_l0, m.content, m.resolution, m.tier, m.hit_count,
       NULL::float8 AS similarity
FROM memories m
WHERE m.tenant_id = :tenant_id AND m.status = 'active' AND m.pinned
  AND (m.scope = 'shared'
       OR (m.scope = 'private' AND m.agent_id = CAST(:agent_id AS uuid))
       OR (m.scope = 'group' AND m.group_name = ANY(CAST(:groups AS text[]))))
ORDER BY m.created_at, m.id
LIMIT :limit

-- name: brief_hot
-- HOT memories, most similar to the task hint first when one is given, else most used first; resolved
-- ones sink out of the brief (pinned ones stay in their own section).
SELECT m.id, m.memory_type, m.summary_l0, m.content, m.resolution, m.tier, m.hit_count,
       CASE WHEN CAST(:embedding AS vector) IS NULL THEN NULL
            ELSE 1 - (m.embedding <=> CAST(:embedding AS vector)) END AS similarity
FROM memories m
WHERE m.tenant_id = :tenant_id AND m.status = 'active' AND m.tier = 'hot' AND NOT m.pinned
  AND m.resolved_at IS NULL
  AND (m.scope = 'shared'
       OR (m.scope = 'private' AND m.agent_id = CAST(:agent_id AS uuid))
       OR (m.scope = 'group' AND m.group_name = ANY(CAST(:groups AS text[]))))
ORDER BY similarity DESC NULLS LAST, m.importance DESC, m.hit_count DESC, m.id
LIMIT :limit

-- name: brief_personal_used
-- What the hub knows about the person (life events, preferences) that is neither pinned nor HOT (those have
-- their sections), for a brief without a task (with one, the brief's personal items are those its search
-- finds): the most used first, then the most recently used.
SELECT m.id, m.memory_type, m.summary_l0, m.content, m.resolution, m.tier, m.hit_count,
       NULL::float8 AS similarity
FROM memories m
WHERE m.tenant_id = :tenant_id AND m.status = 'active' AND m.tier <> 'hot' AND NOT m.pinned
  AND m.resolved_at IS NULL
  AND m.memory_type = ANY(CAST(:types AS text[]))
  AND (m.scope = 'shared'
       OR (m.scope = 'private' AND m.agent_id = CAST(:agent_id AS uuid))
       OR (m.scope = 'group' AND m.group_name = ANY(CAST(:groups AS text[]))))
ORDER BY m.importance DESC, m.hit_count DESC, coalesce(m.last_hit_at, m.created_at) DESC, m.id
LIMIT :limit

-- name: ripple_from
-- Each used memory slightly activates the k memories created closest to it within the window.
INSERT INTO memory_ripples (tenant_id, memory_id, source_id, weight)
SELECT :tenant_id, n.id, s.id, :weight
FROM memories s
CROSS JOIN LATERAL (
    SELECT m.id
    FROM memories m
    WHERE m.tenant_id = :tenant_id AND m.status = 'active' AND m.id <> s.id
      AND m.created_at BETWEEN s.created_at - make_interval(secs => :window_seconds)
                           AND s.created_at + make_interval(secs => :window_seconds)
      AND (m.scope = 'shared'
           OR (m.scope = 'private' AND m.agent_id = CAST(:agent_id AS uuid))
           OR (m.scope = 'group' AND m.group_name = ANY(CAST(:groups AS text[]))))
    ORDER BY abs(extract(epoch FROM m.created_at - s.created_at)), m.id
    LIMIT :k
) n
WHERE s.tenant_id = :tenant_id AND s.id = ANY(CAST(:source_ids AS uuid[]))
RETURNING memory_id

-- name: prune_ripples
-- Ripples past their age no longer count; drop them when their memory ripples again.
DELETE FROM memory_ripples r
WHERE r.tenant_id = :tenant_id AND r.memory_id = ANY(CAST(:ids AS uuid[]))
  AND r.created_at < now() - make_interval(secs => :age_seconds)

-- name: ripple_levels
-- Current ripple activation of some memories: the sum of recent ripples, capped.
SELECT r.memory_id AS id, least(CAST(:cap AS float8), sum(r.weight)) AS ripple, count(*) AS ripple_count
FROM memory_ripples r
WHERE r.tenant_id = :tenant_id AND r.memory_id = ANY(CAST(:ids AS uuid[]))
  AND r.created_at > now() - make_interval(secs => :age_seconds)
GROUP BY r.memory_id

-- name: serendipity_pool
-- Old, long-unused memories a thin search may surface at random: the oldest memories (by creation) not used
-- for :min_age_seconds, a bounded pool. The walk follows (tenant_id, created_at) from the oldest and stops at
-- :pool rows, so its cost does not grow with the store (ordering by last use read and sorted every memory
-- of the tenant: ~90 ms at 100k, on every thin search); a memory created since the cutoff is never read.
SELECT m.id
FROM memories m
WHERE m.tenant_id = :tenant_id AND m.status = 'active'
  AND m.created_at < now() - make_interval(secs => :min_age_seconds)
  AND coalesce(m.last_hit_at, m.created_at) < now() - make_interval(secs => :min_age_seconds)
  AND m.id <> ALL(CAST(:exclude AS uuid[]))
  AND (m.scope = 'shared'
       OR (m.scope = 'private' AND m.agent_id = CAST(:agent_id AS uuid))
       OR (m.scope = 'group' AND m.group_name = ANY(CAST(:groups AS text[]))))
ORDER BY m.created_at, m.id
LIMIT :pool

-- name: dream_candidates
-- Recent memories this agent can see and has not reflected on yet (reflections themselves excluded).
SELECT m.id
FROM memories m
WHERE m.tenant_id = :tenant_id AND m.status = 'active' AND m.memory_type <> 'reflection'
  AND (m.scope = 'shared'
       OR (m.scope = 'private' AND m.agent_id = CAST(:agent_id AS uuid))
       OR (m.scope = 'group' AND m.group_name = ANY(CAST(:groups AS text[]))))
  AND NOT EXISTS (
      SELECT 1 FROM reflection_marks r WHERE r.agent_id = CAST(:agent_id AS uuid) AND r.memory_id = m.id
  )
ORDER BY m.created_at DESC, m.id
LIMIT :limit

-- name: mark_reflected
INSERT INTO reflection_marks (tenant_id, agent_id, memory_id, reflection_id)
SELECT :tenant_id, CAST(:agent_id AS uuid), id, CAST(:reflection_id AS uuid)
FROM unnest(CAST(:memory_ids AS uuid[])) AS id
ON CONFLICT (agent_id, memory_id, tenant_id) DO NOTHING
RETURNING memory_id

-- name: brief_skills
-- A brief without a task hint: the latest active version of each skill, the skills whose memories
-- agents use most first (the hits of the source cluster's active members), then the newest.
SELECT s.id, s.slug, s.version_major, s.version_minor, s.version_patch, s.name, s.description,
       s.categories, s.source_cluster_id, s.created_at, NULL::float8 AS similarity,
       coalesce(u.hits, 0) AS hits
FROM skills s
LEFT JOIN LATERAL (
    SELECT sum(m.hit_count) AS hits
    FROM cluster_members cm
    JOIN memories m ON m.id = cm.memory_id AND m.tenant_id = cm.tenant_id AND m.status = 'active'
    WHERE cm.tenant_id = s.tenant_id AND cm.cluster_id = s.source_cluster_id
) u ON true
WHERE s.tenant_id = :tenant_id AND s.status = 'active'
  AND NOT EXISTS (
      SELECT 1 FROM skills n
      WHERE n.tenant_id = s.tenant_id AND n.slug = s.slug
        AND (n.version_major, n.version_minor, n.version_patch)
            > (s.version_major, s.version_minor, s.version_patch)
  )
ORDER BY hits DESC, s.created_at DESC, s.slug
LIMIT :limit

-- name: reflection_repeats
-- The agent's visible recent reflections, each with the others at least :similarity close to it (cosine),
-- when there are at least :min_others of them: a lesson written three or more times is worth a pin.
WITH recent AS (
    SELECT m.id, m.embedding, m.created_at, m.summary_l0, m.pinned
    FROM memories m
    WHERE m.tenant_id = :tenant_id AND m.status = 'active' AND m.memory_type = 'reflection'
      AND m.resolved_at IS NULL AND m.embedding IS NOT NULL
      AND (m.scope = 'shared'
           OR (m.scope = 'private' AND m.agent_id = CAST(:agent_id AS uuid))
           OR (m.scope = 'group' AND m.group_name = ANY(CAST(:groups AS text[]))))
    ORDER BY m.created_at DESC
    LIMIT :pool
)
SELECT r.id, r.summary_l0, r.pinned, array_agg(o.id ORDER BY o.created_at DESC) AS similar,
       bool_or(o.pinned) AS any_pinned
FROM recent r
JOIN recent o ON o.id <> r.id AND 1 - (r.embedding <=> o.embedding) >= :similarity
GROUP BY r.id, r.summary_l0, r.pinned, r.created_at
HAVING count(*) >= :min_others
ORDER BY count(*) DESC, r.created_at DESC, r.id

-- name: similarity_network_nodes
-- The most used visible active memories: the nodes of the dashboard's similarity network.
SELECT m.id, m.memory_type, m.tier, m.summary_l0, m.hit_count
FROM memories m
WHERE m.tenant_id = :tenant_id AND m.status = 'active' AND m.embedding IS NOT NULL
  AND (m.scope = 'shared'
       OR (m.scope = 'private' AND m.agent_id = CAST(:agent_id AS uuid))
       OR (m.scope = 'group' AND m.group_name = ANY(CAST(:groups AS text[]))))
ORDER BY m.hit_count DESC, m.created_at DESC, m.id
LIMIT :limit

-- name: similarity_network_edges
-- Each node's :k nearest other nodes, kept when at least :min_similarity close (cosine).
SELECT a.id AS source, b.id AS target, 1 - (a.embedding <=> b.embedding) AS similarity
FROM memories a
CROSS JOIN LATERAL (
    SELECT n.id, n.embedding
    FROM memories n
    WHERE n.id = ANY(CAST(:ids AS uuid[])) AND n.id <> a.id
    ORDER BY a.embedding <=> n.embedding, n.id
    LIMIT :k
) b
WHERE a.id = ANY(CAST(:ids AS uuid[])) AND a.tenant_id = :tenant_id
  AND 1 - (a.embedding <=> b.embedding) >= :min_similarity
