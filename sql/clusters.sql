-- Knowledge clusters (ultron/clusters/service.py).

-- name: nearest_clusters
-- The assignment's probe alone (assign_cluster's `indexed` and `unindexed`; for `ultron bench-clusters`):
-- the :limit closest non-empty centroids of the tenant, through the HNSW index on
-- knowledge_clusters.centroid (refreshed only when it drifts; the filters are checked during the walk,
-- hnsw.iterative_scan on, so the index serves them), and every cluster of the tenant the worker has not
-- indexed yet (centroid NULL, through the partial index ix_knowledge_clusters_unindexed), each with the
-- EXACT average cosine of the unit vector :v to the cluster's members: the inner product with their mean
-- (unindexed, not normalized); the :limit best of those. Assignment re-ranks on it and decides the join on
-- it. The score is computed after the walk's LIMIT, for its :limit rows only: where the planner scans
-- instead of walking the index (a small table, a tenant with few clusters), a score in the inner select
-- list is evaluated for every scanned row, below the sort. The walk selects the row's ctid alone and the
-- means of its :limit rows are read after it by that ctid (a Tid Scan: the same row versions, the same
-- snapshot): where the planner scans (1k clusters), carrying each row's 1 KB mean through the sort cost
-- ~15 % of the query (measured: 8.9 ms against 7.6 ms under load); re-reading by id (`c.id IN (...)`) cost
-- a hash aggregate and four primary-key descents, ~0.09 ms of a 2.3 ms assignment at 10k (stop 18).
SELECT n.id, -(n.mean <#> CAST(:v AS vector)) AS similarity
FROM (
    SELECT c.id, c.mean
    FROM knowledge_clusters c
    WHERE c.tenant_id = :tenant_id AND c.ctid = ANY(ARRAY(
        SELECT w.ctid
        FROM knowledge_clusters w
        WHERE w.tenant_id = :tenant_id AND w.member_count > 0 AND w.centroid IS NOT NULL
          AND w.mean IS NOT NULL
        ORDER BY w.centroid <=> CAST(:v AS vector)
        LIMIT :limit
    ))
    UNION ALL
    SELECT c.id, c.mean
    FROM knowledge_clusters c
    WHERE c.tenant_id = :tenant_id AND c.centroid IS NULL AND c.mean IS NOT NULL AND c.member_count > 0
) n
ORDER BY n.mean <#> CAST(:v AS vector), n.id
LIMIT :limit

-- name: assign_cluster
-- ClusterService.assign in one statement (one round trip; :limit is written in as a literal by the service,
-- so the prepared statement keeps a generic plan: clusters.service.raw_statement). `best`: nearest_clusters'
-- probe -- `indexed`, the HNSW walk on the indexed centroid (LIMIT :limit; the rows' ctids, their means
-- read back by ctid as in nearest_clusters), and `unindexed`, an exact pass
-- over the tenant's clusters the worker has not indexed yet (centroid NULL; at most about :unindexed_max of
-- them), scored in the pass (it keeps each one's id and score, not its 1 KB mean) -- the candidate with the
-- highest exact average cosine to the members (`join_score`: the unit vector :v . the mean) if it reaches
-- :floor. `moved` re-reads that cluster under
-- its row lock: in READ COMMITTED a row updated since this statement's snapshot is waited for and its
-- newest version re-checked against the WHERE (EvalPlanQual), so a join is decided on the mean as it is
-- now; a cluster emptied, deleted or moved away since the probe yields no row, and :v starts a cluster.
-- On that locked row (EvalPlanQual computes its select list again on the newest version) `moved` computes
-- the running mean (mean * n + v) / (n + 1) -- pgvector has no vector-by-scalar product: each factor is a
-- vector of equal components -- its length and the count. (Until stop 18 a `locked` CTE read the row and
-- `moved` computed from it: one CTE more cost ~0.14 ms per assignment at 10k, client clock, both paths.)
-- The indexed centroid is rewritten
-- only when its cosine to the new mean falls below :drift (`refreshed`; an unindexed cluster, centroid NULL,
-- stays unindexed: the worker indexes it, ClusterService.index_pending); else `kept` leaves the column
-- out of its SET, so no indexed column changes and the update is HOT (no HNSW insert). An expression
-- that yields the old value is not enough: with SET centroid = CASE ... ELSE centroid END no join was
-- HOT (measured with pg_stat_get_xact_tuples_hot_updated; a 256-d row is past the TOAST threshold and
-- Postgres took the expression's value for a changed one), while SET centroid = centroid was; stop 18
-- measured ELSE c.centroid, ELSE the locked row's centroid and COALESCE alike: no join HOT. The two
-- UPDATEs find their row by scalar subqueries on `moved` (InitPlans), not by a join with it: the row is
-- already locked (`moved`), so they cannot miss it, and the plan has no nested loop, CTE scan and index
-- scan per UPDATE to build (~0.08 ms less per assignment at 10k clusters, stop 18).
-- `created`: a new cluster with mean = :v when none was joined, NOT in the HNSW index (centroid NULL: an
-- HNSW insertion costs as much as the walk; the worker indexes it) unless the tenant already has
-- :unindexed_max unindexed clusters, then indexed at once (centroid = :v), so the exact pass stays bounded
-- when no worker runs (two concurrent new clusters may both see one below the bound). The member row takes
-- the cluster either way; its RETURNING is the cluster's id. :v is a unit vector.
WITH indexed AS (
    SELECT c.ctid
    FROM knowledge_clusters c
    WHERE c.tenant_id = :tenant_id AND c.member_count > 0 AND c.centroid IS NOT NULL AND c.mean IS NOT NULL
    ORDER BY c.centroid <=> CAST(:v AS vector)
    LIMIT :limit
),
unindexed AS MATERIALIZED (
    SELECT c.id, c.mean <#> CAST(:v AS vector) AS distance
    FROM knowledge_clusters c
    WHERE c.tenant_id = :tenant_id AND c.centroid IS NULL AND c.mean IS NOT NULL AND c.member_count > 0
),
best AS (
    SELECT n.id
    FROM (
        SELECT c.id, c.mean <#> CAST(:v AS vector) AS distance FROM knowledge_clusters c
        WHERE c.ctid = ANY(ARRAY(SELECT ctid FROM indexed)) AND c.tenant_id = :tenant_id
        UNION ALL
        SELECT id, distance FROM unindexed
    ) n
    WHERE -n.distance >= :floor
    ORDER BY n.distance, n.id
    LIMIT 1
),
moved AS (
    SELECT c.id, c.member_count + 1 AS member_count, n.mean, vector_norm(n.mean) AS norm,
           c.centroid IS NOT NULL AND 1 - (c.centroid <=> n.mean) < :drift AS drifted
    FROM knowledge_clusters c
    CROSS JOIN LATERAL (
        SELECT c.mean * CAST(array_fill(CAST(c.member_count AS real) / (c.member_count + 1),
                                        ARRAY[vector_dims(c.mean)]) AS vector)
               + CAST(:v AS vector) * CAST(array_fill(CAST(1 AS real) / (c.member_count + 1),
                                                      ARRAY[vector_dims(c.mean)]) AS vector) AS mean
    ) n
    WHERE c.id = (SELECT id FROM best) AND c.tenant_id = :tenant_id
      AND c.member_count > 0 AND c.mean IS NOT NULL AND -(c.mean <#> CAST(:v AS vector)) >= :floor
    FOR UPDATE OF c
),
kept AS (
    UPDATE knowledge_clusters c
    SET (mean, member_count, centroid_norm, updated_at) =
        (SELECT m.mean, m.member_count, m.norm, now() FROM moved m)
    WHERE c.id = (SELECT m.id FROM moved m WHERE NOT m.drifted) AND c.tenant_id = :tenant_id
    RETURNING c.id
),
refreshed AS (
    UPDATE knowledge_clusters c
    SET (mean, member_count, centroid_norm, updated_at, centroid) =
        (SELECT m.mean, m.member_count, m.norm, now(), l2_normalize(m.mean) FROM moved m)
    WHERE c.id = (SELECT m.id FROM moved m WHERE m.drifted) AND c.tenant_id = :tenant_id
    RETURNING c.id
),
joined AS (
    SELECT id FROM kept UNION ALL SELECT id FROM refreshed
),
created AS (
    INSERT INTO knowledge_clusters (tenant_id, centroid, mean, centroid_norm, member_count)
    SELECT :tenant_id,
           CASE WHEN (SELECT count(*) FROM unindexed) >= :unindexed_max THEN CAST(:v AS vector) END,
           CAST(:v AS vector), vector_norm(CAST(:v AS vector)), 1
    WHERE NOT EXISTS (SELECT 1 FROM joined)
    RETURNING id
)
INSERT INTO cluster_members (memory_id, cluster_id, tenant_id, embedding)
SELECT :memory_id, x.id, :tenant_id, CAST(:v AS vector)
FROM (SELECT id FROM joined UNION ALL SELECT id FROM created) x
RETURNING cluster_id

-- name: index_pending_clusters
-- The worker's pass (ClusterService.index_pending): up to :limit of the tenant's unindexed clusters (a new
-- cluster starts with centroid NULL) get their indexed centroid, the mean's direction, and so enter the
-- HNSW index. A cluster an assignment holds locked is skipped (the next pass takes it). Only clusters with
-- members and a mean: an emptied one (mean NULL) stays out, as does one whose vectors a re-embed cleared
-- (ultron reembed recomputes those).
WITH pending AS (
    SELECT c.id
    FROM knowledge_clusters c
    WHERE c.tenant_id = :tenant_id AND c.centroid IS NULL AND c.mean IS NOT NULL AND c.member_count > 0
    ORDER BY c.id
    LIMIT :limit
    FOR UPDATE SKIP LOCKED
)
UPDATE knowledge_clusters c
SET centroid = l2_normalize(c.mean)
FROM pending p
WHERE c.id = p.id AND c.tenant_id = :tenant_id
RETURNING c.id

-- name: nearest_centroids_bare
-- The baseline of `ultron bench-clusters`: pgvector's nearest-centroid query and nothing more (no tenant
-- or emptiness filter, no exact-mean score), through the same HNSW index.
SELECT c.id
FROM knowledge_clusters c
ORDER BY c.centroid <=> CAST(:v AS vector)
LIMIT :limit

-- name: nearest_clusters_exact
-- The reference implementation, for `ultron bench-clusters` only: the exact mean of every cluster of the
-- tenant compared with the vector (a sequential pass; the bench turns index scans off).
SELECT c.id, -(c.mean <#> CAST(:v AS vector)) AS similarity
FROM knowledge_clusters c
WHERE c.tenant_id = :tenant_id AND c.member_count > 0 AND c.mean IS NOT NULL
ORDER BY c.mean <#> CAST(:v AS vector)
LIMIT 1

-- name: clusters_ready_to_crystallize
-- Enough members, no skill yet, not backing off after a failed attempt.
SELECT c.id
FROM knowledge_clusters c
WHERE c.tenant_id = :tenant_id AND c.skill_slug IS NULL AND c.member_count >= :threshold
  AND (c.next_attempt_at IS NULL OR c.next_attempt_at <= now())
ORDER BY c.member_count DESC, c.id
LIMIT :limit

-- name: clusters_ready_to_recrystallize
-- A skill exists and at least :delta members joined after its latest version was written.
SELECT c.id, n.added
FROM knowledge_clusters c
CROSS JOIN LATERAL (
    SELECT max(s.created_at) AS at FROM skills s
    WHERE s.tenant_id = c.tenant_id AND s.slug = c.skill_slug
) v
CROSS JOIN LATERAL (
    SELECT count(*) AS added FROM cluster_members cm
    WHERE cm.cluster_id = c.id AND cm.joined_at > coalesce(v.at, '-infinity')
) n
WHERE c.tenant_id = :tenant_id AND c.skill_slug IS NOT NULL
  AND (c.next_attempt_at IS NULL OR c.next_attempt_at <= now())
  AND n.added >= :delta
ORDER BY n.added DESC, c.id
LIMIT :limit

-- name: cluster_memories
-- A bounded, representative sample: the members closest to the centroid first (the exact mean's
-- direction: the cosine distance ignores its length). `cohesion`: the member's average cosine to the
-- OTHER members, from the exact mean of unit vectors ((n * mean . e - 1) / (n - 1)); NULL when the
-- vectors were cleared by a re-embed.
SELECT m.id, m.memory_type, m.content, m.context, m.resolution, m.summary_l0, m.tags,
       CASE WHEN c.member_count > 1
            THEN (c.member_count * -(c.mean <#> cm.embedding) - 1) / (c.member_count - 1)
            ELSE 1 END AS cohesion
FROM cluster_members cm
JOIN knowledge_clusters c ON c.id = cm.cluster_id
JOIN memories m ON m.id = cm.memory_id AND m.tenant_id = cm.tenant_id
WHERE cm.cluster_id = :cluster_id AND cm.tenant_id = :tenant_id AND m.status = 'active'
  AND m.scope = 'shared'  -- skills are tenant-wide: a private or group memory never feeds one
ORDER BY cm.embedding <=> c.mean, m.id
LIMIT :limit

-- name: cluster_leavers
-- Members whose memory was archived (consolidation, TTL, re-ingest), is no longer shared, or was
-- re-embedded by a merge (those re-join).
SELECT cm.memory_id, (m.status = 'active' AND m.scope = 'shared') AS still_active
FROM cluster_members cm
JOIN memories m ON m.id = cm.memory_id AND m.tenant_id = cm.tenant_id
WHERE cm.tenant_id = :tenant_id
  AND (m.status <> 'active' OR m.scope <> 'shared' OR m.embedding IS DISTINCT FROM cm.embedding)
LIMIT :limit

-- name: unclustered_memories
-- Keyset page of active memories that belong to no cluster (initial clustering, after imports and re-embeds),
-- outside the cluster queue.
SELECT m.id, m.embedding
FROM memories m
WHERE m.tenant_id = :tenant_id AND m.status = 'active' AND m.scope = 'shared' AND m.embedding IS NOT NULL
  AND m.id > CAST(:after AS uuid)
  AND NOT EXISTS (SELECT 1 FROM cluster_members cm WHERE cm.memory_id = m.id AND cm.tenant_id = m.tenant_id)
  -- a queued memory is the cluster step's (or the catch-up's, in upload order); a parked one is retried here
  AND NOT EXISTS (SELECT 1 FROM cluster_queue k
                  WHERE k.memory_id = m.id AND k.tenant_id = m.tenant_id AND k.parked_at IS NULL)
ORDER BY m.id
LIMIT :limit

-- name: clusters_with_readiness
-- Non-empty clusters (or the one :cluster_id), largest first, with what the next evolution cycle would do
-- with each (the same conditions as clusters_ready_to_crystallize / clusters_ready_to_recrystallize).
SELECT c.id, c.topic, c.member_count, c.skill_slug, c.superseded_slugs, c.members_at_last_version,
       c.created_at, c.updated_at,
       CASE
           WHEN c.next_attempt_at IS NOT NULL AND c.next_attempt_at > now() THEN NULL
           WHEN c.skill_slug IS NULL AND c.member_count >= :threshold THEN 'crystallize'
           WHEN c.skill_slug IS NOT NULL AND (
               SELECT count(*) FROM cluster_members cm
               WHERE cm.cluster_id = c.id
                 AND cm.joined_at > coalesce(
                     (SELECT max(s.created_at) FROM skills s
                      WHERE s.tenant_id = c.tenant_id AND s.slug = c.skill_slug), '-infinity')
           ) >= :delta THEN 'recrystallize'
       END AS readiness
FROM knowledge_clusters c
WHERE c.tenant_id = :tenant_id
  AND (CAST(:cluster_id AS uuid) IS NULL AND c.member_count > 0 OR c.id = CAST(:cluster_id AS uuid))
ORDER BY c.member_count DESC, c.id
LIMIT :limit OFFSET :offset

-- name: cluster_member_sample
-- The members, closest to the cluster's mean first (clusters hold shared memories only: any agent of the
-- tenant may see them; the scope test keeps it so even for a member whose scope changed since the last sync).
SELECT m.id, m.summary_l0 AS summary, m.memory_type, 1 - (cm.embedding <=> c.mean) AS similarity
FROM cluster_members cm
JOIN knowledge_clusters c ON c.id = cm.cluster_id
JOIN memories m ON m.id = cm.memory_id AND m.tenant_id = cm.tenant_id
WHERE cm.cluster_id = :cluster_id AND cm.tenant_id = :tenant_id AND m.status = 'active'
  AND m.scope = 'shared'
ORDER BY cm.embedding <=> c.mean, m.id
LIMIT :limit

-- name: cluster_memories_for_revision
-- The sample a recrystallization sees: members that joined after the current version first, then the
-- members the current version cites (8-hex id prefixes), then the rest closest to the centroid.
-- `cohesion` as in cluster_memories.
SELECT m.id, m.memory_type, m.content, m.context, m.resolution, m.summary_l0, m.tags,
       cm.joined_at > :since AS is_new,
       CASE WHEN c.member_count > 1
            THEN (c.member_count * -(c.mean <#> cm.embedding) - 1) / (c.member_count - 1)
            ELSE 1 END AS cohesion
FROM cluster_members cm
JOIN knowledge_clusters c ON c.id = cm.cluster_id
JOIN memories m ON m.id = cm.memory_id AND m.tenant_id = cm.tenant_id
WHERE cm.cluster_id = :cluster_id AND cm.tenant_id = :tenant_id AND m.status = 'active'
  AND m.scope = 'shared'  -- skills are tenant-wide: a private or group memory never feeds one
ORDER BY cm.joined_at > :since DESC,
         left(replace(m.id::text, '-', ''), 8) = ANY(CAST(:cited AS text[])) DESC,
         cm.embedding <=> c.mean, m.id
LIMIT :limit

-- name: reembed_cluster_members
-- `ultron reembed`, after every memory has its new vector: each member takes its memory's vector, so
-- clusters keep their members (and their skill) across a model change.
UPDATE cluster_members cm SET embedding = m.embedding
FROM memories m
WHERE m.id = cm.memory_id

-- name: cluster_means
-- Keyset page of clusters with the mean of their members' vectors (pgvector's avg), for `ultron reembed`.
SELECT c.id, avg(cm.embedding) AS mean, count(cm.memory_id) AS members
FROM knowledge_clusters c
LEFT JOIN cluster_members cm ON cm.cluster_id = c.id
WHERE c.id > CAST(:after AS uuid)
GROUP BY c.id
ORDER BY c.id
LIMIT :limit

-- name: leave_cluster
-- ClusterService.leave in one statement. `gone`: the member row, deleted (a second leave of the same
-- memory waits on it, then finds nothing and changes nothing). `locked`: its cluster under the row lock
-- (the newest version, as in assign_cluster). `moved`: the exact running mean without the member,
-- (mean * n - e) / (n - 1), and what the leave does: `drain` when the vectors were cleared by a re-embed
-- (ultron/db/vectors.py: only the count goes down), `empty` when no member (or a zero mean) is left
-- (centroid and mean cleared: the cluster drops out of the probe), `refresh` when the indexed centroid
-- drifted past :drift from the new mean, else `keep` (no indexed column in the SET: a HOT update; an
-- unindexed cluster, centroid NULL, is kept so: the worker indexes it).
-- Returns the cluster's id, or no row when the memory had no cluster.
WITH gone AS (
    DELETE FROM cluster_members cm
    WHERE cm.memory_id = :memory_id AND cm.tenant_id = :tenant_id
    RETURNING cm.cluster_id, cm.embedding
),
locked AS (
    SELECT c.id, c.mean, c.member_count, c.centroid
    FROM knowledge_clusters c
    WHERE c.id = (SELECT cluster_id FROM gone) AND c.tenant_id = :tenant_id
    FOR UPDATE
),
moved AS (
    SELECT n.id, n.member_count, n.mean, vector_norm(n.mean) AS norm,
           CASE WHEN n.drain THEN 'drain'
                WHEN n.mean IS NULL OR vector_norm(n.mean) = 0 THEN 'empty'
                WHEN n.centroid IS NOT NULL AND 1 - (n.centroid <=> n.mean) < :drift THEN 'refresh'
                ELSE 'keep' END AS kind
    FROM (
        SELECT l.id, l.centroid, greatest(l.member_count - 1, 0) AS member_count,
               l.mean IS NULL OR g.embedding IS NULL AS drain,
               CASE WHEN l.member_count > 1 AND l.mean IS NOT NULL AND g.embedding IS NOT NULL
                    THEN l.mean * CAST(array_fill(CAST(l.member_count AS real) / (l.member_count - 1),
                                                  ARRAY[vector_dims(l.mean)]) AS vector)
                         - g.embedding * CAST(array_fill(CAST(1 AS real) / (l.member_count - 1),
                                                         ARRAY[vector_dims(l.mean)]) AS vector)
               END AS mean
        FROM locked l CROSS JOIN gone g
    ) n
),
drained AS (
    UPDATE knowledge_clusters c SET member_count = m.member_count
    FROM moved m
    WHERE c.id = m.id AND c.tenant_id = :tenant_id AND m.kind = 'drain'
    RETURNING c.id
),
emptied AS (
    UPDATE knowledge_clusters c
    SET centroid = NULL, mean = NULL, centroid_norm = 0, member_count = 0, updated_at = now()
    FROM moved m
    WHERE c.id = m.id AND c.tenant_id = :tenant_id AND m.kind = 'empty'
    RETURNING c.id
),
kept AS (
    UPDATE knowledge_clusters c
    SET mean = m.mean, member_count = m.member_count, centroid_norm = m.norm, updated_at = now()
    FROM moved m
    WHERE c.id = m.id AND c.tenant_id = :tenant_id AND m.kind = 'keep'
    RETURNING c.id
),
refreshed AS (
    UPDATE knowledge_clusters c
    SET mean = m.mean, member_count = m.member_count, centroid_norm = m.norm, updated_at = now(),
        centroid = l2_normalize(m.mean)
    FROM moved m
    WHERE c.id = m.id AND c.tenant_id = :tenant_id AND m.kind = 'refresh'
    RETURNING c.id
)
SELECT id FROM drained
UNION ALL SELECT id FROM emptied
UNION ALL SELECT id FROM kept
UNION ALL SELECT id FROM refreshed

-- name: assign_clusters_probe
-- ClusterService.assign_many's probe: for each of a batch's unit vectors (`vs`, `ord` its 1-based place)
-- assign_cluster's `indexed` walk (the same filters and order, on the HNSW index), with more candidates
-- than the single probe's (`limit`, written in as a literal) so that the batch can re-rank them after its
-- own earlier joins moved some centroids. `rank`: the row's place in the walk's output.
SELECT p.ord, w.id, w.distance, w.rank
FROM unnest(CAST(:vs AS vector[])) WITH ORDINALITY AS p(v, ord)
CROSS JOIN LATERAL (
    SELECT c.id, c.centroid <=> p.v AS distance, row_number() OVER () AS rank
    FROM (
        SELECT c.id, c.centroid
        FROM knowledge_clusters c
        WHERE c.tenant_id = :tenant_id AND c.member_count > 0 AND c.centroid IS NOT NULL
          AND c.mean IS NOT NULL
        ORDER BY c.centroid <=> p.v
        LIMIT :limit
    ) c
) w
ORDER BY p.ord, w.rank

-- name: assign_clusters_state
-- The clusters a batch's assignment may touch, under their row locks (taken in id order, so two batches
-- never wait on each other in a cycle): the probe's candidates (`ids`) and every non-empty cluster of the
-- tenant the worker has not indexed yet (assign_cluster's `unindexed`), with their exact means.
SELECT c.id, c.mean, c.member_count, c.centroid
FROM knowledge_clusters c
WHERE c.tenant_id = :tenant_id AND c.member_count > 0 AND c.mean IS NOT NULL
  AND (c.id = ANY(CAST(:ids AS uuid[])) OR c.centroid IS NULL)
ORDER BY c.id
FOR UPDATE

-- name: assign_clusters_exact_scores
-- The server's own arithmetic for a choice a batch's numpy replay finds too close to call (within float
-- rounding of the threshold or of a tie): assign_cluster's ordering key (mean <#> v) of each
-- (`means[i]`, `vs[i]`).
SELECT u.ord, u.m <#> u.v AS score
FROM unnest(CAST(:means AS vector[]), CAST(:vs AS vector[])) WITH ORDINALITY AS u(m, v, ord)
ORDER BY u.ord

-- name: assign_clusters_exact_drift
-- The same for assign_cluster's drift test of a centroid against a cluster's new mean.
SELECT 1 - (CAST(:centroid AS vector) <=> CAST(:mean AS vector)) < :drift

-- name: assign_clusters_create
-- A batch's new clusters as assign_cluster's `created` leaves them after the batch's later joins: the mean
-- after them; the centroid NULL (unindexed), or `v` when it was indexed at once, or the direction of the mean
-- at its last refresh (l2_normalize of `refresh`).
INSERT INTO knowledge_clusters (id, tenant_id, centroid, mean, centroid_norm, member_count)
SELECT u.id, :tenant_id, coalesce(l2_normalize(u.refresh), u.raw), u.mean, vector_norm(u.mean), u.n
FROM unnest(CAST(:ids AS uuid[]), CAST(:raws AS vector[]), CAST(:refreshes AS vector[]),
            CAST(:means AS vector[]), CAST(:counts AS integer[])) AS u(id, raw, refresh, mean, n)

-- name: assign_clusters_keep
-- A batch's joins into existing clusters whose indexed centroid stays (assign_cluster's `kept`: no indexed
-- column in the SET, a HOT update).
UPDATE knowledge_clusters c
SET mean = u.mean, member_count = u.n, centroid_norm = vector_norm(u.mean), updated_at = now()
FROM unnest(CAST(:ids AS uuid[]), CAST(:means AS vector[]), CAST(:counts AS integer[])) AS u(id, mean, n)
WHERE c.id = u.id AND c.tenant_id = :tenant_id

-- name: assign_clusters_refresh
-- A batch's joins into existing clusters whose centroid a join refreshed (assign_cluster's `refreshed`):
-- the direction of the mean as of the last refresh.
UPDATE knowledge_clusters c
SET mean = u.mean, member_count = u.n, centroid_norm = vector_norm(u.mean), updated_at = now(),
    centroid = l2_normalize(u.refresh)
FROM unnest(CAST(:ids AS uuid[]), CAST(:means AS vector[]), CAST(:refreshes AS vector[]),
            CAST(:counts AS integer[])) AS u(id, mean, refresh, n)
WHERE c.id = u.id AND c.tenant_id = :tenant_id

-- name: assign_clusters_members
-- A batch's member rows (assign_cluster's last INSERT), in the batch's order.
INSERT INTO cluster_members (memory_id, cluster_id, tenant_id, embedding)
SELECT u.memory_id, u.cluster_id, :tenant_id, u.v
FROM unnest(CAST(:memory_ids AS uuid[]), CAST(:cluster_ids AS uuid[]), CAST(:vs AS vector[]))
     WITH ORDINALITY AS u(memory_id, cluster_id, v, ord)
ORDER BY u.ord

-- name: cluster_tenant_share
-- A tenant's share of the clusters by the planner's statistics (its frequency among the most common
-- tenant_id values at the last ANALYZE; NULL when the table has no statistics or the tenant is not among
-- them): whether its probes walk the HNSW index (ClusterService.walks_index).
SELECT s.most_common_freqs[array_position(CAST(CAST(s.most_common_vals AS text) AS text[]), :tenant_id)]
FROM pg_stats s
WHERE s.schemaname = current_schema() AND s.tablename = 'knowledge_clusters' AND s.attname = 'tenant_id'

-- name: queued_memories
-- The memories of a batch of the cluster queue (cluster_queue, ids :ids) that still need a cluster, in
-- upload order: active, shared, with a vector, and no cluster yet (the evolution cycle's initial clustering
-- may have assigned one; a merge may have archived it). The others' rows just go.
SELECT m.id, m.embedding
FROM cluster_queue k
JOIN memories m ON m.id = k.memory_id AND m.tenant_id = k.tenant_id
WHERE k.tenant_id = :tenant_id AND k.memory_id = ANY(CAST(:ids AS uuid[]))
  AND m.status = 'active' AND m.scope = 'shared' AND m.embedding IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM cluster_members cm WHERE cm.memory_id = m.id AND cm.tenant_id = m.tenant_id)
ORDER BY k.seq

-- name: unleased_cluster_queue
-- The evolution cycle's catch-up (ClusterService.run_initial_clustering, with no worker step run since the
-- uploads): a page of the tenant's queue rows no live lease holds, in upload order, locked (a worker's
-- claim of one then finds it gone: lost).
SELECT memory_id
FROM cluster_queue
WHERE tenant_id = :tenant_id AND parked_at IS NULL AND (lease_expires_at IS NULL OR lease_expires_at < now())
ORDER BY seq
LIMIT :limit
FOR UPDATE SKIP LOCKED

-- name: drop_cluster_queue
DELETE FROM cluster_queue WHERE tenant_id = :tenant_id AND memory_id = ANY(CAST(:ids AS uuid[]))
