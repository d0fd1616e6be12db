-- Dashboard queries: aggregates and samples that stay fast at 100k memories. Every query is scoped by
-- tenant; the memory ones also by visibility (shared, the agent's own private ones, its groups').

-- name: activity_by_day
-- Uploads, merges, searches, edits and deletes per UTC day over the last :days days.
SELECT date_trunc('day', e.created_at AT TIME ZONE 'UTC')::date AS day, e.kind, count(*) AS events
FROM activity_events e
WHERE e.tenant_id = :tenant_id
  AND e.created_at >= date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'
                      - make_interval(days => :days - 1)
GROUP BY 1, 2
ORDER BY 1, 2

-- name: memory_hit_days
-- One memory's hits per UTC day and signal: events, and the weight that actually counted.
SELECT date_trunc('day', h.created_at AT TIME ZONE 'UTC')::date AS day, h.signal,
       count(*) AS events,
       coalesce(sum(h.weight) FILTER (WHERE h.counted), 0) AS counted_weight
FROM hit_events h
WHERE h.tenant_id = :tenant_id AND h.memory_id = :memory_id
  AND h.created_at >= now() - make_interval(days => :days)
GROUP BY 1, 2
ORDER BY 1, 2

-- name: map_sample
-- The map in one scan of the table: per tier the :per_tier most used active memories (pinned first),
-- and the per tier/type totals they stand for. Rows with kind 'node' are the sample, 'total' the totals.
WITH v AS MATERIALIZED (
    SELECT m.id, m.tier, m.memory_type, m.hit_count, m.pinned, m.last_hit_at
    FROM memories m
    WHERE m.tenant_id = :tenant_id AND m.status = 'active'
      AND (m.scope = 'shared'
           OR (m.scope = 'private' AND m.agent_id = CAST(:agent_id AS uuid))
           OR (m.scope = 'group' AND m.group_name = ANY(CAST(:groups AS text[]))))
), ranked AS (
    -- A top-N per tier (a bounded heap each), not a sort of every row.
    SELECT top.*
    FROM (VALUES ('hot'), ('warm'), ('cold')) AS tiers(tier)
    CROSS JOIN LATERAL (
        SELECT v.id, v.tier, v.memory_type, v.hit_count, v.pinned
        FROM v
        WHERE v.tier = tiers.tier
        ORDER BY v.pinned DESC, v.hit_count DESC, v.last_hit_at DESC NULLS LAST, v.id
        LIMIT :per_tier
    ) top
)
SELECT 'node' AS kind, r.id, r.tier, r.memory_type, r.hit_count AS hits, r.pinned,
       left(m.summary_l0, 160) AS label, m.scope, 1::bigint AS memories, cm.cluster_id
FROM ranked r
JOIN memories m ON m.id = r.id AND m.tenant_id = :tenant_id
-- A primary-key probe per sampled memory: the sample's clusters cost the same at any table size.
LEFT JOIN cluster_members cm ON cm.memory_id = r.id AND cm.tenant_id = :tenant_id
UNION ALL
SELECT 'total', NULL, v.tier, v.memory_type, coalesce(sum(v.hit_count), 0), NULL, NULL, NULL, count(*),
       NULL
FROM v
GROUP BY v.tier, v.memory_type
ORDER BY 1, 3, 4, 5 DESC, 2

-- name: map_clusters
-- The clusters of the map's sampled memories (:ids), largest first, with :min_members or more members,
-- each with its skill's latest version. Bounded by the sample, not by the number of memories.
SELECT c.id, c.topic, c.member_count, c.skill_slug, sk.name AS skill_name,
       sk.version_major, sk.version_minor, sk.version_patch
FROM knowledge_clusters c
LEFT JOIN LATERAL (
    SELECT s.name, s.version_major, s.version_minor, s.version_patch
    FROM skills s
    WHERE s.tenant_id = c.tenant_id AND s.slug = c.skill_slug
    ORDER BY s.version_major DESC, s.version_minor DESC, s.version_patch DESC
    LIMIT 1
) sk ON true
WHERE c.tenant_id = :tenant_id AND c.id = ANY(CAST(:ids AS uuid[])) AND c.member_count >= :min_members
ORDER BY c.member_count DESC, c.id
LIMIT :limit

-- name: cluster_counts
-- How many non-empty clusters the tenant has, how many reach :min_members, how many have a skill, and
-- the largest without one (the Skills page's empty state says how far it is from crystallizing).
SELECT count(*) AS clusters,
       count(*) FILTER (WHERE c.member_count >= :min_members) AS shown_min,
       count(c.skill_slug) AS with_skill,
       coalesce(max(c.member_count) FILTER (WHERE c.skill_slug IS NULL), 0) AS largest_without_skill
FROM knowledge_clusters c
WHERE c.tenant_id = :tenant_id AND c.member_count > 0

-- name: dashboard_skills
-- The latest version of each of the tenant's skills, with how many versions it has, when its first was
-- published, and its source cluster's topic and size; active skills first, most recently updated first.
SELECT l.slug, l.name, l.description, l.status, l.version_major, l.version_minor, l.version_patch,
       l.score, l.versions, l.first_at AS created_at, l.created_at AS updated_at,
       l.source_cluster_id AS cluster_id, c.topic AS cluster_topic, c.member_count AS cluster_size
FROM (
    SELECT DISTINCT ON (s.slug)
           s.slug, s.name, s.description, s.status, s.version_major, s.version_minor, s.version_patch,
           s.score, s.created_at, s.source_cluster_id,
           count(*) OVER w AS versions, min(s.created_at) OVER w AS first_at
    FROM skills s
    WHERE s.tenant_id = :tenant_id
    WINDOW w AS (PARTITION BY s.slug)
    ORDER BY s.slug, s.version_major DESC, s.version_minor DESC, s.version_patch DESC
) l
LEFT JOIN knowledge_clusters c ON c.id = l.source_cluster_id AND c.tenant_id = :tenant_id
ORDER BY l.status = 'active' DESC, l.created_at DESC, l.slug
LIMIT :limit

-- name: memory_counts
-- The overview's counts in one scan: memories per (tier, type, status, scope, pinned) combination -- a
-- few hundred groups at most, rolled up by the caller -- and redacted entities by kind.
WITH v AS MATERIALIZED (
    SELECT m.tier, m.memory_type, m.status, m.scope, m.pinned, m.redacted_entities
    FROM memories m
    WHERE m.tenant_id = :tenant_id
      AND (m.scope = 'shared'
           OR (m.scope = 'private' AND m.agent_id = CAST(:agent_id AS uuid))
           OR (m.scope = 'group' AND m.group_name = ANY(CAST(:groups AS text[]))))
)
SELECT 'memories' AS dimension, v.tier, v.memory_type, v.status, v.scope, v.pinned, NULL AS key,
       count(*) AS n
FROM v
GROUP BY v.tier, v.memory_type, v.status, v.scope, v.pinned
UNION ALL
SELECT 'redacted', NULL, NULL, NULL, NULL, NULL, e.key, sum(e.value::bigint)
FROM v, jsonb_each_text(v.redacted_entities) e
WHERE v.redacted_entities <> '{}'::jsonb
GROUP BY e.key

-- name: worker_runs_recent
-- The worker's latest step runs (operational rows, not tenant data); read only once the table exists.
SELECT r.step, r.status, r.started_at, r.finished_at, r.counts, jsonb_array_length(r.errors) AS errors
FROM worker_runs r
ORDER BY r.started_at DESC, r.id DESC
LIMIT :limit

-- name: worker_runs_by_status
-- Step runs per step and outcome over the last :days days.
SELECT r.step, r.status, count(*) AS runs, max(r.started_at) AS last_started_at
FROM worker_runs r
WHERE r.started_at >= now() - make_interval(days => :days)
GROUP BY 1, 2
ORDER BY 1, 2
