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

-- name: map_nodes
-- The map's sample: per tier the :per_tier most used active memories (pinned first), so the picture
-- shows what matters without shipping 100k points to the browser.
SELECT s.id, s.tier, s.memory_type, s.hit_count, s.pinned, s.summary_l0, s.scope
FROM (
    SELECT m.id, m.tier, m.memory_type, m.hit_count, m.pinned, left(m.summary_l0, 160) AS summary_l0,
           m.scope,
           row_number() OVER (PARTITION BY m.tier
                              ORDER BY m.pinned DESC, m.hit_count DESC, m.last_hit_at DESC NULLS LAST,
                                       m.id) AS rank
    FROM memories m
    WHERE m.tenant_id = :tenant_id AND m.status = 'active'
      AND (m.scope = 'shared'
           OR (m.scope = 'private' AND m.agent_id = CAST(:agent_id AS uuid))
           OR (m.scope = 'group' AND m.group_name = ANY(CAST(:groups AS text[]))))
) s
WHERE s.rank <= :per_tier
ORDER BY s.tier, s.memory_type, s.hit_count DESC, s.id

-- name: map_totals
-- What the sample stands for: active memories and their hits per tier and type.
SELECT m.tier, m.memory_type, count(*) AS memories, coalesce(sum(m.hit_count), 0) AS hits
FROM memories m
WHERE m.tenant_id = :tenant_id AND m.status = 'active'
  AND (m.scope = 'shared'
       OR (m.scope = 'private' AND m.agent_id = CAST(:agent_id AS uuid))
       OR (m.scope = 'group' AND m.group_name = ANY(CAST(:groups AS text[]))))
GROUP BY 1, 2
ORDER BY 1, 2

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
