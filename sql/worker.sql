-- Background worker queries: per-item leases, tier rebalance, consolidation candidates, run records.
-- Every query on user data is scoped by tenant or by the id of one leased item.
--
-- Leases (sessions to segment, segments to score or extract) follow one pattern:
--   lease    one statement: a CTE picks ready rows FOR UPDATE SKIP LOCKED, the UPDATE stamps owner and
--            expiry and counts the attempt (a worker killed mid-item still used one);
--   claim    the item's own transaction locks the row while it works, if this worker still owns it;
--   finish   clears the lease in that same transaction, so success and release commit together;
--   fail     a separate short transaction: back off base x 2^(attempts-1), park after max attempts;
--   park     ready rows whose attempts ran out by lease expiry alone (the worker died each time);
--   release  at shutdown: leases taken but not started go back, the attempt not counted.
-- Items come back in the order they are due, and sessions of one upload in the order they happened
-- (started_at), a session's segments in their order: what the worker derives from them (which duplicate
-- survives a merge, which cluster a memory starts) is the same on every run over the same data.
-- `exclude` holds the items that already failed in this drain: one pass never retries them; `tenant_id`
-- (NULL: every tenant) narrows a drain to one tenant's items (a request that waits on its own work).

-- name: lease_sessions
WITH picked AS (
    SELECT s.id
    FROM sessions s
    WHERE s.needs_segmentation AND s.parked_at IS NULL AND s.next_attempt_at <= now()
      AND (s.lease_expires_at IS NULL OR s.lease_expires_at < now())
      AND s.attempts < :max_attempts AND s.id <> ALL(CAST(:exclude AS uuid[]))
      AND (CAST(:tenant_id AS uuid) IS NULL OR s.tenant_id = CAST(:tenant_id AS uuid))
    ORDER BY s.next_attempt_at, s.started_at NULLS LAST, s.id
    LIMIT :limit
    FOR UPDATE SKIP LOCKED
),
leased AS (
    UPDATE sessions s
    SET lease_owner = :owner,
        lease_expires_at = now() + make_interval(secs => :lease_seconds),
        attempts = s.attempts + 1
    FROM picked
    WHERE s.id = picked.id
    RETURNING s.id, s.tenant_id, s.attempts, s.next_attempt_at, s.started_at
)
SELECT id, tenant_id, attempts FROM leased ORDER BY next_attempt_at, started_at NULLS LAST, id

-- name: lease_segments
WITH picked AS (
    SELECT g.id
    FROM task_segments g
    WHERE g.stage = :stage AND g.parked_at IS NULL AND g.next_attempt_at <= now()
      AND (g.lease_expires_at IS NULL OR g.lease_expires_at < now())
      AND g.attempts < :max_attempts AND g.id <> ALL(CAST(:exclude AS uuid[]))
      AND (CAST(:tenant_id AS uuid) IS NULL OR g.tenant_id = CAST(:tenant_id AS uuid))
    ORDER BY g.next_attempt_at, g.session_id, g.segment_index, g.id
    LIMIT :limit
    FOR UPDATE SKIP LOCKED
),
leased AS (
    UPDATE task_segments g
    SET lease_owner = :owner,
        lease_expires_at = now() + make_interval(secs => :lease_seconds),
        attempts = g.attempts + 1
    FROM picked
    WHERE g.id = picked.id
    RETURNING g.id, g.tenant_id, g.attempts, g.next_attempt_at, g.session_id, g.segment_index
)
SELECT id, tenant_id, attempts FROM leased ORDER BY next_attempt_at, session_id, segment_index, id

-- name: claim_session
-- Held until the item's transaction ends: nobody else can lease a row this worker is working on.
-- Waits (no SKIP LOCKED): another worker's lease statement may hold this row's lock for a moment
-- (a row locked and then rejected by its recheck stays locked until that statement's transaction
-- ends); skipping would wrongly report the item lost. The owner check is re-evaluated after the wait.
SELECT id FROM sessions WHERE id = :id AND lease_owner = :owner FOR UPDATE

-- name: claim_segment
-- Waits for the row lock, like claim_session.
SELECT id FROM task_segments WHERE id = :id AND lease_owner = :owner AND stage = :stage
FOR UPDATE

-- name: finish_session
UPDATE sessions
SET needs_segmentation = false, lease_owner = NULL, lease_expires_at = NULL, attempts = 0,
    last_error = NULL, next_attempt_at = now()
WHERE id = :id AND lease_owner = :owner

-- name: finish_segment
-- The pipeline moved the segment to its next stage; the next stage starts with a fresh attempt count.
UPDATE task_segments
SET lease_owner = NULL, lease_expires_at = NULL, attempts = 0, last_error = NULL, next_attempt_at = now()
WHERE id = :id AND lease_owner = :owner

-- name: fail_session
UPDATE sessions
SET lease_owner = NULL, lease_expires_at = NULL, last_error = :error,
    next_attempt_at = now() + make_interval(
        secs => least(:base_seconds * power(2, greatest(attempts - 1, 0)), :max_backoff_seconds)),
    parked_at = CASE WHEN attempts >= :max_attempts THEN now() END
WHERE id = :id AND lease_owner = :owner
RETURNING parked_at IS NOT NULL AS parked

-- name: fail_segment
UPDATE task_segments
SET lease_owner = NULL, lease_expires_at = NULL, last_error = :error,
    next_attempt_at = now() + make_interval(
        secs => least(:base_seconds * power(2, greatest(attempts - 1, 0)), :max_backoff_seconds)),
    parked_at = CASE WHEN attempts >= :max_attempts THEN now() END
WHERE id = :id AND lease_owner = :owner
RETURNING parked_at IS NOT NULL AS parked

-- name: park_abandoned_sessions
UPDATE sessions
SET parked_at = now(), lease_owner = NULL, lease_expires_at = NULL,
    last_error = coalesce(last_error || E'\n', '')
        || format('lease expired %s times: the worker died or hung while working on it', attempts)
WHERE needs_segmentation AND parked_at IS NULL AND attempts >= :max_attempts
  AND (lease_expires_at IS NULL OR lease_expires_at < now())
  AND (CAST(:tenant_id AS uuid) IS NULL OR tenant_id = CAST(:tenant_id AS uuid))
RETURNING id

-- name: park_abandoned_segments
UPDATE task_segments
SET parked_at = now(), lease_owner = NULL, lease_expires_at = NULL,
    last_error = coalesce(last_error || E'\n', '')
        || format('lease expired %s times: the worker died or hung while working on it', attempts)
WHERE stage IN ('score', 'extract') AND parked_at IS NULL AND attempts >= :max_attempts
  AND (lease_expires_at IS NULL OR lease_expires_at < now())
  AND (CAST(:tenant_id AS uuid) IS NULL OR tenant_id = CAST(:tenant_id AS uuid))
RETURNING id

-- name: heartbeat_sessions
-- Rows locked by this worker's own item transaction are skipped: the lock already protects them.
UPDATE sessions SET lease_expires_at = now() + make_interval(secs => :lease_seconds)
WHERE id IN (SELECT id FROM sessions WHERE lease_owner = :owner FOR UPDATE SKIP LOCKED)

-- name: heartbeat_segments
UPDATE task_segments SET lease_expires_at = now() + make_interval(secs => :lease_seconds)
WHERE id IN (SELECT id FROM task_segments WHERE lease_owner = :owner FOR UPDATE SKIP LOCKED)

-- name: release_sessions
UPDATE sessions
SET lease_owner = NULL, lease_expires_at = NULL, attempts = greatest(attempts - 1, 0)
WHERE lease_owner = :owner

-- name: release_segments
UPDATE task_segments
SET lease_owner = NULL, lease_expires_at = NULL, attempts = greatest(attempts - 1, 0)
WHERE lease_owner = :owner

-- The cluster queue (cluster_queue: shared memories waiting for their cluster) follows the same pattern, a
-- batch at a time: one lease statement takes up to `limit` rows in upload order (`seq`), one transaction per
-- tenant claims its rows, assigns them and deletes them (finish), a failure backs them all off together.

-- name: lease_cluster_queue
WITH picked AS (
    SELECT k.memory_id, k.tenant_id
    FROM cluster_queue k
    WHERE k.parked_at IS NULL AND k.next_attempt_at <= now()
      AND (k.lease_expires_at IS NULL OR k.lease_expires_at < now())
      AND k.attempts < :max_attempts
      AND (CAST(:tenant_id AS uuid) IS NULL OR k.tenant_id = CAST(:tenant_id AS uuid))
    ORDER BY k.next_attempt_at, k.seq
    LIMIT :limit
    FOR UPDATE SKIP LOCKED
)
UPDATE cluster_queue k
SET lease_owner = :owner,
    lease_expires_at = now() + make_interval(secs => :lease_seconds),
    attempts = k.attempts + 1
FROM picked
WHERE k.memory_id = picked.memory_id AND k.tenant_id = picked.tenant_id
RETURNING k.memory_id AS id, k.tenant_id, k.attempts, k.seq

-- name: claim_cluster_queue
-- One tenant's rows of a lease that are still ours, locked for the transaction (waits, as claim_session).
SELECT memory_id FROM cluster_queue
WHERE tenant_id = :tenant_id AND memory_id = ANY(CAST(:ids AS uuid[])) AND lease_owner = :owner
ORDER BY seq
FOR UPDATE

-- name: finish_cluster_queue
-- Done: the rows go (the memory has its cluster, or no longer needs one).
DELETE FROM cluster_queue
WHERE tenant_id = :tenant_id AND memory_id = ANY(CAST(:ids AS uuid[])) AND lease_owner = :owner

-- name: fail_cluster_queue
UPDATE cluster_queue
SET lease_owner = NULL, lease_expires_at = NULL, last_error = :error,
    next_attempt_at = now() + make_interval(
        secs => least(:base_seconds * power(2, greatest(attempts - 1, 0)), :max_backoff_seconds)),
    parked_at = CASE WHEN attempts >= :max_attempts THEN now() END
WHERE tenant_id = :tenant_id AND memory_id = ANY(CAST(:ids AS uuid[])) AND lease_owner = :owner
RETURNING parked_at IS NOT NULL AS parked

-- name: park_abandoned_cluster_queue
UPDATE cluster_queue
SET parked_at = now(), lease_owner = NULL, lease_expires_at = NULL,
    last_error = coalesce(last_error || E'\n', '')
        || format('lease expired %s times: the worker died or hung while working on it', attempts)
WHERE parked_at IS NULL AND attempts >= :max_attempts
  AND (lease_expires_at IS NULL OR lease_expires_at < now())
  AND (CAST(:tenant_id AS uuid) IS NULL OR tenant_id = CAST(:tenant_id AS uuid))
RETURNING memory_id

-- name: heartbeat_cluster_queue
UPDATE cluster_queue SET lease_expires_at = now() + make_interval(secs => :lease_seconds)
WHERE (memory_id, tenant_id) IN (
    SELECT memory_id, tenant_id FROM cluster_queue WHERE lease_owner = :owner FOR UPDATE SKIP LOCKED
)

-- name: release_cluster_queue
UPDATE cluster_queue
SET lease_owner = NULL, lease_expires_at = NULL, attempts = greatest(attempts - 1, 0)
WHERE lease_owner = :owner

-- name: queue_depths
-- ready: can be leased now; waiting: backing off; leased: held by a live lease; parked: given up on.
SELECT q.queue, q.tenant_id,
       count(*) FILTER (WHERE q.parked_at IS NULL AND (q.lease_expires_at IS NULL OR q.lease_expires_at < now())
                          AND q.next_attempt_at <= now()) AS ready,
       count(*) FILTER (WHERE q.parked_at IS NULL AND (q.lease_expires_at IS NULL OR q.lease_expires_at < now())
                          AND q.next_attempt_at > now()) AS waiting,
       count(*) FILTER (WHERE q.parked_at IS NULL AND q.lease_expires_at >= now()) AS leased,
       count(*) FILTER (WHERE q.parked_at IS NOT NULL) AS parked
FROM (
    SELECT 'segment' AS queue, tenant_id, parked_at, lease_expires_at, next_attempt_at
    FROM sessions WHERE needs_segmentation
    UNION ALL
    SELECT stage, tenant_id, parked_at, lease_expires_at, next_attempt_at
    FROM task_segments WHERE stage IN ('score', 'extract')
    UNION ALL
    SELECT 'cluster', tenant_id, parked_at, lease_expires_at, next_attempt_at FROM cluster_queue
) q
WHERE CAST(:tenant_id AS uuid) IS NULL OR q.tenant_id = CAST(:tenant_id AS uuid)
GROUP BY q.queue, q.tenant_id
ORDER BY q.queue, q.tenant_id

-- name: parked_items
SELECT p.* FROM (
    SELECT 'segment' AS queue, id::text AS id, tenant_id, attempts, last_error, parked_at
    FROM sessions WHERE needs_segmentation AND parked_at IS NOT NULL
    UNION ALL
    SELECT stage, id::text, tenant_id, attempts, last_error, parked_at
    FROM task_segments WHERE stage IN ('score', 'extract') AND parked_at IS NOT NULL
    UNION ALL
    SELECT 'cluster', memory_id::text, tenant_id, attempts, last_error, parked_at
    FROM cluster_queue WHERE parked_at IS NOT NULL
) p
WHERE CAST(:tenant_id AS uuid) IS NULL OR p.tenant_id = CAST(:tenant_id AS uuid)
ORDER BY p.parked_at DESC
LIMIT :limit

-- name: rebalance_tiers
-- One tenant's tiers in one statement. Active memories are ranked by their uses weighted by arousal,
-- (hit_count + 1) x (1 + :arousal_weight x arousal) DESC -- an intense memory stays warmer than a calm one
-- used as often -- then hit_count DESC, last_hit_at DESC (never-hit last), id (so ties are decided the
-- same way every time). Of n memories the first
-- ceil(n x hot%) are HOT, the next ceil(n x warm%) WARM, the rest COLD -- the seed's rounding, so any
-- non-empty share holds at least one memory. COLD memories unused (last hit, else creation) for longer
-- than ttl_days are archived -- personal ones (:personal_types: what a companion knows about its person)
-- only after personal_ttl_days --, pinned ones never (a TTL of 0: never); a memory's TTL is stretched by
-- its arousal, x (1 + :arousal_ttl x arousal). Only rows whose tier or status
-- changes are written.
-- Shape, for a million rows: one scan and one sort feed the ranking, which streams (n comes from its
-- own count, not a whole-partition window); only the changed rows (a few % per cycle) are kept, and
-- they are updated through the primary key (= ANY of their ids), never by hashing the whole table.
WITH counted AS (
    SELECT count(*) AS n FROM memories WHERE tenant_id = :tenant_id AND status = 'active'
), shares AS (
    SELECT c.n,
           ceil(c.n * CAST(:hot_pct AS numeric) / 100) AS hot_n,
           ceil(c.n * CAST(:warm_pct AS numeric) / 100) AS warm_n
    FROM counted c
), ranked AS (
    SELECT m.id, m.tier, m.pinned, coalesce(m.last_hit_at, m.created_at) AS last_used,
           CASE WHEN m.memory_type = ANY(CAST(:personal_types AS text[])) THEN :personal_ttl_days
                ELSE :ttl_days END
             * (1 + CAST(:arousal_ttl AS float8) * coalesce(m.arousal, 0)) AS ttl,
           row_number() OVER (
               ORDER BY (m.hit_count + 1) * (1 + CAST(:arousal_weight AS float8) * coalesce(m.arousal, 0)) DESC,
                        m.hit_count DESC, m.last_hit_at DESC NULLS LAST, m.id
           ) AS rn
    FROM memories m
    WHERE m.tenant_id = :tenant_id AND m.status = 'active'
), decided AS (
    SELECT r.id, r.tier AS old_tier, r.pinned, r.last_used, r.ttl,
           CASE WHEN r.rn <= s.hot_n THEN 'hot'
                WHEN r.rn <= s.hot_n + s.warm_n THEN 'warm'
                ELSE 'cold'
           END AS new_tier
    FROM ranked r CROSS JOIN shares s
), todo AS MATERIALIZED (
    SELECT d.id, d.old_tier, d.new_tier,
           (d.new_tier = 'cold' AND NOT d.pinned AND d.ttl > 0
            AND d.last_used < now() - d.ttl * interval '1 day') AS expire
    FROM decided d
    WHERE d.new_tier <> d.old_tier
       OR (d.new_tier = 'cold' AND NOT d.pinned AND d.ttl > 0
           AND d.last_used < now() - d.ttl * interval '1 day')
), changed AS (
    UPDATE memories m
    SET tier = f.new_tier,
        status = CASE WHEN f.expire THEN 'archived' ELSE m.status END,
        archived_at = CASE WHEN f.expire THEN now() ELSE m.archived_at END,
        archived_reason = CASE WHEN f.expire THEN 'cold_ttl' ELSE m.archived_reason END
    FROM todo f
    WHERE m.id = f.id AND m.tenant_id = :tenant_id
      AND m.id = ANY (ARRAY(SELECT id FROM todo))
    RETURNING f.old_tier, f.new_tier, f.expire
)
SELECT s.n AS ranked,
       least(s.n, s.hot_n) AS hot,
       least(s.n - least(s.n, s.hot_n), s.warm_n) AS warm,
       s.n - least(s.n, s.hot_n) - least(s.n - least(s.n, s.hot_n), s.warm_n) AS cold,
       (SELECT count(*) FROM changed WHERE old_tier <> new_tier) AS moved,
       (SELECT count(*) FROM changed WHERE new_tier = 'hot' AND old_tier <> 'hot') AS newly_hot,
       (SELECT count(*) FROM changed WHERE expire) AS archived
FROM shares s

-- name: consolidation_candidates
-- One keyset page of active memories, each with its nearest active neighbour of the same type and
-- visibility through the HNSW index (a LATERAL k=1 search per memory, never a pairwise matrix; a memory
-- the worker has not indexed yet is met as a neighbour at the next pass: migration 0020);
-- b_id is NULL for a memory with no neighbour, so the page's last id is always returned.
SELECT m.id AS a_id, n.id AS b_id, n.similarity
FROM (
    SELECT id, memory_type, scope, agent_id, group_name, embedding
    FROM memories
    WHERE tenant_id = :tenant_id AND status = 'active' AND embedding IS NOT NULL AND id > :after
    ORDER BY id
    LIMIT :batch
) m
LEFT JOIN LATERAL (
    SELECT o.id, 1 - (o.embedding <=> m.embedding) AS similarity
    FROM memories o
    WHERE o.tenant_id = :tenant_id AND o.status = 'active' AND o.indexed AND o.memory_type = m.memory_type
      AND o.scope = m.scope AND o.id <> m.id
      AND (m.scope <> 'private' OR o.agent_id = m.agent_id)
      AND (m.scope <> 'group' OR o.group_name = m.group_name)
    ORDER BY o.embedding <=> m.embedding
    LIMIT 1
) n ON true
ORDER BY m.id

-- name: split_apart
-- Whether a split separated the two memories, either way round (memory_service.split logs the memory it
-- left with the new one's id): consolidation never merges them back.
SELECT EXISTS (
    SELECT 1 FROM activity_events
    WHERE tenant_id = :tenant_id AND kind = 'split'
      AND ((memory_id = :a_id AND detail ->> 'into' = CAST(:b_id AS text))
        OR (memory_id = :b_id AND detail ->> 'into' = CAST(:a_id AS text)))
)

-- name: recent_runs
SELECT id, cycle_id, worker_id, step, status, started_at, finished_at, counts, errors
FROM worker_runs
ORDER BY started_at DESC, id DESC
LIMIT :limit

-- name: prune_runs
DELETE FROM worker_runs WHERE started_at < now() - make_interval(days => :keep_days)

-- name: seconds_since_full_cycle
-- How long ago (by the database's clock) the last full cycle's rebalance finished well, by any worker;
-- NULL when none is recorded. A (re)started worker waits out the rest of its period from there, so how
-- often the hub restarts never changes a memory's tier.
SELECT extract(epoch FROM now() - max(started_at)) AS seconds
FROM worker_runs
WHERE step = 'rebalance' AND status = 'ok'
