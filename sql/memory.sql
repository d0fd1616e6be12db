-- Memory service queries. Vectors are bound as pgvector values; every query is scoped by tenant.
-- Visibility: shared memories are seen by the whole tenant, private ones by their agent only, group ones
-- by agents in that group.

-- name: nearest_same_type
-- The nearest active memories of one type and scope: an exact content-hash match first, then HNSW. Each
-- comes with its text (content, context, resolution), which the merge checks of the nearest read: a
-- single upload's decision needs no second statement to load it (ultron/memory/service.py, _decide).
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
    WHERE m.tenant_id = :tenant_id AND m.memory_type = :memory_type AND m.status = 'active' AND m.indexed
      AND m.scope = :scope
      AND (m.scope <> 'private' OR m.agent_id = CAST(:agent_id AS uuid))
      AND (m.scope <> 'group' OR m.group_name = CAST(:group_name AS text))
    ORDER BY m.embedding <=> CAST(:embedding AS vector)
    LIMIT :k
), fresh AS (
    -- the memories not in the HNSW graph yet (new uploads, until the worker indexes them: migration
    -- 0020), read exactly through ix_memories_unindexed
    SELECT m.id, 1 - (m.embedding <=> CAST(:embedding AS vector)) AS similarity
    FROM memories m
    WHERE m.tenant_id = :tenant_id AND m.status = 'active' AND NOT m.indexed
      AND m.memory_type = :memory_type AND m.scope = :scope
      AND (m.scope <> 'private' OR m.agent_id = CAST(:agent_id AS uuid))
      AND (m.scope <> 'group' OR m.group_name = CAST(:group_name AS text))
    ORDER BY m.embedding <=> CAST(:embedding AS vector)
    LIMIT :k
)
, top AS (
    SELECT id, max(similarity) AS similarity
    FROM (SELECT * FROM exact UNION ALL SELECT * FROM ann UNION ALL SELECT * FROM fresh) c
    GROUP BY id
    ORDER BY similarity DESC, id
    LIMIT :k
)
SELECT t.id, t.similarity, m.content, m.context, m.resolution
FROM top t
JOIN memories m ON m.id = t.id AND m.tenant_id = :tenant_id
ORDER BY t.similarity DESC, t.id

-- name: create_memory
-- A new memory with its "created" contribution, its upload activity row and, when shared, its row in the
-- cluster queue: four INSERTs, one statement, one round trip. Returns the columns of the memory's record
-- (ultron/memory/service.py, _create), so the upload answers from the row it wrote instead of reading it
-- back. :search_doc is fulltext.index_text of
-- the fields and tags, indexed as document.tsvector does.
WITH memory AS (
    INSERT INTO memories (id, tenant_id, agent_id, memory_type, content, context, resolution, tags,
                          summary_l0, overview_l1, embedding, content_hash, search_tsv, scope, group_name,
                          redacted_entities, thread, position, occurred_at, indexed)
    VALUES (:id, :tenant_id, :agent_id, :memory_type, :content, :context, :resolution, :tags,
            :summary_l0, :overview_l1, CAST(:embedding AS vector), :content_hash,
            to_tsvector('simple', CAST(:search_doc AS text)), :scope, :group_name,
            :redacted_entities, :thread, :position, :occurred_at,
            -- its vector enters the HNSW graph in the worker (migration 0020), unless the tenant already
            -- has :pending_max memories waiting for it (no worker running): then at once
            (SELECT count(*) FROM (SELECT 1 FROM memories w WHERE w.tenant_id = :tenant_id
                                   AND w.status = 'active' AND NOT w.indexed LIMIT :pending_max) w)
                >= :pending_max)
    RETURNING id, memory_type, content, context, resolution, tags, summary_l0, overview_l1, tier, status,
              scope, group_name, pinned, hit_count, last_hit_at, created_at, updated_at, redacted_entities,
              valence, arousal, thread, position, occurred_at, importance, resolved_at
), contribution AS (
    INSERT INTO memory_contributions (tenant_id, memory_id, agent_id, decision, content, context, resolution,
                                      tags)
    VALUES (:tenant_id, :id, :agent_id, 'created', :content, :context, :resolution, :tags)
), activity AS (
    INSERT INTO activity_events (tenant_id, agent_id, kind, memory_id, detail)
    VALUES (:tenant_id, :agent_id, 'upload', :id, jsonb_build_object('memory_type', CAST(:memory_type AS text)))
), queued AS (
    -- a shared memory waits for the worker to assign its cluster (ultron/clusters/pending.py)
    INSERT INTO cluster_queue (memory_id, tenant_id)
    SELECT :id, :tenant_id WHERE CAST(:scope AS text) = 'shared'
)
SELECT * FROM memory

-- name: create_memories
-- A batch's new memories (ultron/memory/service.py, _create_many): create_memory over many rows, one
-- statement, one round trip, each column an array of the batch's values (a row each, in batch order; tags
-- and redaction counts as jsonb, their rows being of different lengths). The statement's text is the same
-- for every batch: the driver converts it once, where a multi-row VALUES of ~25 parameters a row cost the
-- client ~0.3 ms a memory to convert and send. `indexed`: the first rows wait for the worker's index step
-- while fewer than :pending_max of the tenant's memories wait (as create_memory), the rest are indexed here.
-- The arrays carry create_memory's parameter names (service.py, _create_memories_params).
WITH new AS MATERIALIZED (
    SELECT u.*, ARRAY(SELECT jsonb_array_elements_text(u.tags_json)) AS tags
    FROM unnest(CAST(:id AS uuid[]), CAST(:memory_type AS text[]), CAST(:content AS text[]),
                CAST(:context AS text[]), CAST(:resolution AS text[]), CAST(:tags AS jsonb[]),
                CAST(:summary_l0 AS text[]), CAST(:overview_l1 AS text[]), CAST(:embedding AS vector[]),
                CAST(:content_hash AS text[]), CAST(:search_doc AS text[]), CAST(:scope AS text[]),
                CAST(:group_name AS text[]), CAST(:redacted_entities AS jsonb[]), CAST(:thread AS text[]),
                CAST(:position AS integer[]), CAST(:occurred_at AS timestamptz[]))
         WITH ORDINALITY AS u(id, memory_type, content, context, resolution, tags_json, summary_l0,
                              overview_l1, embedding, content_hash, search_doc, scope, group_name,
                              redacted_entities, thread, position, occurred_at, n)
), waiting AS (
    SELECT count(*) AS n FROM (SELECT 1 FROM memories w WHERE w.tenant_id = :tenant_id
                               AND w.status = 'active' AND NOT w.indexed LIMIT :pending_max) w
), memory AS (
    INSERT INTO memories (id, tenant_id, agent_id, memory_type, content, context, resolution, tags,
                          summary_l0, overview_l1, embedding, content_hash, search_tsv, scope, group_name,
                          redacted_entities, thread, position, occurred_at, indexed)
    SELECT u.id, :tenant_id, :agent_id, u.memory_type, u.content, u.context, u.resolution, u.tags,
           u.summary_l0, u.overview_l1, u.embedding, u.content_hash, to_tsvector('simple', u.search_doc),
           u.scope, u.group_name, u.redacted_entities, u.thread, u.position, u.occurred_at,
           u.n > :pending_max - (SELECT w.n FROM waiting w)
    FROM new u
    ORDER BY u.n
    RETURNING id, memory_type, content, context, resolution, tags, summary_l0, overview_l1, tier, status,
              scope, group_name, pinned, hit_count, last_hit_at, created_at, updated_at, redacted_entities,
              valence, arousal, thread, position, occurred_at, importance, resolved_at
), contribution AS (
    INSERT INTO memory_contributions (tenant_id, memory_id, agent_id, decision, content, context, resolution,
                                      tags)
    SELECT :tenant_id, u.id, :agent_id, 'created', u.content, u.context, u.resolution, u.tags
    FROM new u
    ORDER BY u.n
), activity AS (
    INSERT INTO activity_events (tenant_id, agent_id, kind, memory_id, detail)
    SELECT :tenant_id, :agent_id, 'upload', u.id, jsonb_build_object('memory_type', u.memory_type)
    FROM new u
    ORDER BY u.n
), queued AS (
    -- the shared ones wait for the worker to assign their clusters, in batch order (ultron/clusters/pending.py)
    INSERT INTO cluster_queue (memory_id, tenant_id)
    SELECT u.id, :tenant_id FROM new u WHERE u.scope = 'shared' ORDER BY u.n
)
SELECT * FROM memory

-- name: probe_or_create_memory
-- A single upload's dedup probe and, when it finds nothing to merge, its create_memory, in one statement (one
-- round trip; sent after the dedup lock, in the same pipeline: ultron/memory/service.py, _probe_or_create).
-- `probe`: nearest_same_type, its CTEs (exact, ann, top) written once, there, and put in place of the marker
-- line below by ultron/memory/service.py (_probe_or_create_sql): a single upload and a batch probe alike.
-- `clear`: no memory of the probe at :hard or above (nothing the upload would merge into without a judge:
-- an exact content-hash match scores 1.0) and the tenant's redaction policy still the one the upload was
-- prepared under (:policy). Then the memory, its contribution, activity and queue row are written as
-- create_memory writes them, and the rows returned are the memory's (created true) and the probe's at :soft
-- or above (created false), nearest first: the judge decides on those, and when it merges, the service rolls
-- the write back to the savepoint it set before this statement (_locked_nearest). Else nothing is written and
-- the rows are the probe's, nearest first, for the decision to go on from.
WITH
-- nearest_same_type's CTEs
probe AS MATERIALIZED (
    SELECT t.id, t.similarity, m.content, m.context, m.resolution
    FROM top t
    JOIN memories m ON m.id = t.id AND m.tenant_id = :tenant_id
), clear AS MATERIALIZED (
    SELECT NOT EXISTS (SELECT 1 FROM probe WHERE probe.similarity >= :hard)
           AND (SELECT t.settings -> 'redaction' FROM tenants t WHERE t.id = :tenant_id)
               IS NOT DISTINCT FROM CAST(:policy AS jsonb) AS ok
), memory AS (
    INSERT INTO memories (id, tenant_id, agent_id, memory_type, content, context, resolution, tags,
                          summary_l0, overview_l1, embedding, content_hash, search_tsv, scope, group_name,
                          redacted_entities, thread, position, occurred_at, indexed)
    SELECT :id, :tenant_id, :agent_id, :memory_type, :content, :context, :resolution, :tags,
           :summary_l0, :overview_l1, CAST(:embedding AS vector), :content_hash,
           to_tsvector('simple', CAST(:search_doc AS text)), :scope, :group_name,
           :redacted_entities, :thread, :position, :occurred_at,
           -- as create_memory: the HNSW graph entry is the worker's while few are waiting
           (SELECT count(*) FROM (SELECT 1 FROM memories w WHERE w.tenant_id = :tenant_id
                                  AND w.status = 'active' AND NOT w.indexed LIMIT :pending_max) w)
               >= :pending_max
    WHERE (SELECT ok FROM clear)
    RETURNING id, memory_type, content, context, resolution, tags, summary_l0, overview_l1, tier, status,
              scope, group_name, pinned, hit_count, last_hit_at, created_at, updated_at, redacted_entities,
              valence, arousal, thread, position, occurred_at, importance, resolved_at
), contribution AS (
    INSERT INTO memory_contributions (tenant_id, memory_id, agent_id, decision, content, context, resolution,
                                      tags)
    SELECT :tenant_id, memory.id, :agent_id, 'created', :content, :context, :resolution, :tags FROM memory
), activity AS (
    INSERT INTO activity_events (tenant_id, agent_id, kind, memory_id, detail)
    SELECT :tenant_id, :agent_id, 'upload', memory.id,
           jsonb_build_object('memory_type', CAST(:memory_type AS text))
    FROM memory
), queued AS (
    INSERT INTO cluster_queue (memory_id, tenant_id)
    SELECT memory.id, :tenant_id FROM memory WHERE CAST(:scope AS text) = 'shared'
)
SELECT true AS created, CAST(NULL AS float8) AS similarity, memory.* FROM memory
UNION ALL
SELECT false, p.similarity, p.id, NULL, p.content, p.context, p.resolution, NULL, NULL, NULL, NULL, NULL,
       NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
FROM probe p
WHERE NOT (SELECT ok FROM clear) OR p.similarity >= :soft
ORDER BY created DESC, similarity DESC, id

-- name: search_memories
-- Hybrid search in one read-only statement (docs/ranking.md):
--   dense leg: the :candidates nearest memories by cosine (HNSW);
--   lexical leg: a bounded pool of full-text matches (the query's phrase, all its terms, its rarest terms),
--     scored BM25-like: sum of matched terms' IDF (from term_stats) x length normalisation, plus the IDF of
--     adjacent query word pairs found side by side (phrase credit);
--   fusion: reciprocal rank (RRF) or weighted, by the fusion setting; neighbour credit from the adjacent turn of the
--     same thread; a memory holding the query's words in order (the phrase) gets the phrase boost on top;
--     a boost when occurred_at falls in the dates the query names;
--   score = (fused + neighbour credit + phrase boost) x time boost x tier boost x (1 - w + w x hotness).
-- Each candidate row is read once: its lexical units (terms, pairs, the phrase) are tested in that pass and
-- every scored column comes with it; only the top rows (the limit) are read again for their text.
-- The service runs it as a prepared statement with the LIMITs written in and the lines marked `-- tier`
-- dropped when no tier is asked for (ultron/memory/service.py, _search_sql), so one generic plan serves.
-- The search filters (ultron/memory/filters.py) are the lines marked `-- filter:<field>`, kept only for the
-- fields given: inside every candidate leg (and the reply a question hands to), never after the limit.
-- Search hits are recorded afterwards, off the request path (ultron/memory/hits.py).
WITH vec AS MATERIALIZED (
    -- each leg reads what the ranking needs from the row it visits (the vector read out of TOAST once,
    -- here): the scoring pass reads no memory again
    -- the HNSW walk over the memories in the graph, and an exact pass over those not in it yet (new uploads
    -- until the worker indexes them, migration 0020: ix_memories_unindexed); the :candidates nearest of both
    SELECT * FROM (
      (
        SELECT m.id, m.tier, m.thread, m.position, m.occurred_at,
               coalesce(m.last_hit_at, m.created_at) AS last_use, m.search_tsv,
               1 - (m.embedding <=> CAST(:embedding AS vector)) AS vector_similarity
        FROM memories m
        WHERE m.tenant_id = :tenant_id AND m.status = 'active' AND m.indexed
          AND m.tier = CAST(:tier AS text) -- tier
          AND m.memory_type = ANY(CAST(:f_types AS text[])) -- filter:types
          AND m.tags && CAST(:f_tags AS text[]) -- filter:tags
          AND m.agent_id IN (SELECT g.id FROM agents g WHERE g.tenant_id = :tenant_id AND g.name = ANY(CAST(:f_agents AS text[]))) -- filter:agents
          AND m.scope = ANY(CAST(:f_scopes AS text[])) -- filter:scopes
          AND m.thread = CAST(:f_thread AS text) -- filter:thread
          AND coalesce(m.occurred_at, m.created_at) >= CAST(:f_occurred_after AS timestamptz) -- filter:occurred_after
          AND coalesce(m.occurred_at, m.created_at) < CAST(:f_occurred_before AS timestamptz) -- filter:occurred_before
          AND m.created_at >= CAST(:f_created_after AS timestamptz) -- filter:created_after
          AND m.created_at < CAST(:f_created_before AS timestamptz) -- filter:created_before
          AND (m.scope = 'shared'
               OR (m.scope = 'private' AND m.agent_id = CAST(:agent_id AS uuid))
               OR (m.scope = 'group' AND m.group_name = ANY(CAST(:groups AS text[]))))
        ORDER BY m.embedding <=> CAST(:embedding AS vector)
        LIMIT :candidates
      ) UNION ALL (
        SELECT m.id, m.tier, m.thread, m.position, m.occurred_at,
               coalesce(m.last_hit_at, m.created_at) AS last_use, m.search_tsv,
               1 - (m.embedding <=> CAST(:embedding AS vector)) AS vector_similarity
        FROM memories m
        WHERE m.tenant_id = :tenant_id AND m.status = 'active' AND NOT m.indexed
          AND m.tier = CAST(:tier AS text) -- tier
          AND m.memory_type = ANY(CAST(:f_types AS text[])) -- filter:types
          AND m.tags && CAST(:f_tags AS text[]) -- filter:tags
          AND m.agent_id IN (SELECT g.id FROM agents g WHERE g.tenant_id = :tenant_id AND g.name = ANY(CAST(:f_agents AS text[]))) -- filter:agents
          AND m.scope = ANY(CAST(:f_scopes AS text[])) -- filter:scopes
          AND m.thread = CAST(:f_thread AS text) -- filter:thread
          AND coalesce(m.occurred_at, m.created_at) >= CAST(:f_occurred_after AS timestamptz) -- filter:occurred_after
          AND coalesce(m.occurred_at, m.created_at) < CAST(:f_occurred_before AS timestamptz) -- filter:occurred_before
          AND m.created_at >= CAST(:f_created_after AS timestamptz) -- filter:created_after
          AND m.created_at < CAST(:f_created_before AS timestamptz) -- filter:created_before
          AND (m.scope = 'shared'
               OR (m.scope = 'private' AND m.agent_id = CAST(:agent_id AS uuid))
               OR (m.scope = 'group' AND m.group_name = ANY(CAST(:groups AS text[]))))
        ORDER BY m.embedding <=> CAST(:embedding AS vector)
        LIMIT :candidates
      )
    ) v
    ORDER BY v.vector_similarity DESC
    LIMIT :candidates
), totals AS MATERIALIZED (
    SELECT coalesce(max(t.docs), 0)::float8 AS n, greatest(coalesce(max(t.avg_len), 0), 1)::float8 AS avglen
    FROM term_totals t
    WHERE t.tenant_id = :tenant_id
), lexemes AS MATERIALIZED (
    -- each query token's lexemes as the index holds them (the 'simple' parser may split a token)
    SELECT l.i, x.lx
    FROM unnest(CAST(:lookup AS text[])) WITH ORDINALITY l(tok, i)
    CROSS JOIN LATERAL unnest(tsvector_to_array(to_tsvector('simple', l.tok))) x(lx)
), found AS MATERIALIZED (
    -- their document frequencies, all in one index scan (a scan per token cost ~0.3 ms at five tokens)
    SELECT s.lexeme, s.ndoc
    FROM term_stats s
    WHERE s.tenant_id = :tenant_id AND s.lexeme = ANY(ARRAY(SELECT x.lx FROM lexemes x))
), lex AS MATERIALIZED (
    -- a token's document frequency: the least of its lexemes' (0 when none is known)
    SELECT l.i, d.df, ln(1 + (greatest(tt.n - d.df, 0) + 0.5) / (d.df + 0.5)) AS idf
    FROM unnest(CAST(:lookup AS text[])) WITH ORDINALITY l(tok, i)
    CROSS JOIN totals tt
    CROSS JOIN LATERAL (
        SELECT coalesce(min(f.ndoc), 0)::float8 AS df
        FROM lexemes x
        JOIN found f ON f.lexeme = x.lx
        WHERE x.i = l.i
    ) d
), units AS MATERIALIZED (
    -- 'term' (weight its IDF), 'pair' (two adjacent query words side by side: the mean IDF of the two) and
    -- 'phrase' (the query's words in order; weight 0, it only sets phrase_match)
    -- name: a 'term' that is a name the query mentions (it ranks, but is no evidence of an answer)
    SELECT u.q, u.kind, u.name, to_tsquery('simple', u.q) AS tq, a.df,
           CASE u.kind WHEN 'term' THEN a.idf WHEN 'pair' THEN (a.idf + b.idf) / 2 ELSE 0 END AS w
    FROM unnest(CAST(:unit_q AS text[]), CAST(:unit_kind AS text[]), CAST(:unit_a AS int[]),
                CAST(:unit_b AS int[]), CAST(:unit_name AS boolean[])) u(q, kind, a, b, name)
    JOIN lex a ON a.i = u.a
    JOIN lex b ON b.i = u.b
), rare AS MATERIALIZED (
    -- The rarest terms while their matches together fit the pool (always at least the rarest one). A
    -- term whose matches would overflow the pool is left out: the index would read all of them (a bitmap
    -- is built whole before the LIMIT) to keep an arbitrary :fts_pool of them.
    -- None when even the rarest term is common, in at least half of the tenant's memories (no IDF weight
    -- in classic BM25: ln((N - df + 0.5) / (df + 0.5)) <= 0): a query made only of common words reads
    -- neither this pool nor the all-terms one, whose postings are most of the store; its phrase pool
    -- is still read. A term the statistics do not know yet (df 0) can rank.
    SELECT coalesce(string_agg(r.q, ' | '), '') AS q
    FROM (SELECT u.q, sum(u.df) OVER (ORDER BY u.df, u.q ROWS UNBOUNDED PRECEDING) AS upto,
                 row_number() OVER (ORDER BY u.df, u.q) AS n, min(u.df) OVER () AS rarest
          FROM units u WHERE u.kind = 'term') r
    WHERE (r.n = 1 OR r.upto <= :fts_pool) AND (r.rarest = 0 OR 2 * r.rarest < (SELECT t.n FROM totals t))
), rare_hits AS MATERIALIZED (
    -- The full-text pools, each at most :fts_pool rows. A pool that came back short is whole, and a whole
    -- pool holds the next one's matches: every memory with all the terms has the rarest one (rare_hits),
    -- and one with the phrase has all the terms when phrase_in_all. So the all-terms pool is read only when
    -- rare_hits may have been cut, and the phrase pool only when the all-terms one may have been (or when
    -- the query's terms are all common and neither was read, `rare`): the candidates are the same as
    -- reading all three, at one GIN scan instead of three on most queries.
    SELECT m.id, m.tier, m.thread, m.position, m.occurred_at,
           coalesce(m.last_hit_at, m.created_at) AS last_use, m.search_tsv,
           1 - (m.embedding <=> CAST(:embedding AS vector)) AS vector_similarity
    FROM memories m, rare r
     WHERE r.q <> '' AND m.search_tsv @@ to_tsquery('simple', r.q)
       AND m.tenant_id = :tenant_id AND m.status = 'active'
       AND m.tier = CAST(:tier AS text) -- tier
       AND m.memory_type = ANY(CAST(:f_types AS text[])) -- filter:types
       AND m.tags && CAST(:f_tags AS text[]) -- filter:tags
       AND m.agent_id IN (SELECT g.id FROM agents g WHERE g.tenant_id = :tenant_id AND g.name = ANY(CAST(:f_agents AS text[]))) -- filter:agents
       AND m.scope = ANY(CAST(:f_scopes AS text[])) -- filter:scopes
       AND m.thread = CAST(:f_thread AS text) -- filter:thread
       AND coalesce(m.occurred_at, m.created_at) >= CAST(:f_occurred_after AS timestamptz) -- filter:occurred_after
       AND coalesce(m.occurred_at, m.created_at) < CAST(:f_occurred_before AS timestamptz) -- filter:occurred_before
       AND m.created_at >= CAST(:f_created_after AS timestamptz) -- filter:created_after
       AND m.created_at < CAST(:f_created_before AS timestamptz) -- filter:created_before
       AND (m.scope = 'shared'
            OR (m.scope = 'private' AND m.agent_id = CAST(:agent_id AS uuid))
            OR (m.scope = 'group' AND m.group_name = ANY(CAST(:groups AS text[]))))
     LIMIT :fts_pool
), all_hits AS MATERIALIZED (
    SELECT m.id, m.tier, m.thread, m.position, m.occurred_at,
           coalesce(m.last_hit_at, m.created_at) AS last_use, m.search_tsv,
           1 - (m.embedding <=> CAST(:embedding AS vector)) AS vector_similarity
    FROM memories m
     WHERE CAST(:all_q AS text) <> '' AND (SELECT count(*) FROM rare_hits) >= :fts_pool
       AND m.search_tsv @@ to_tsquery('simple', CAST(:all_q AS text))
       AND m.tenant_id = :tenant_id AND m.status = 'active'
       AND m.tier = CAST(:tier AS text) -- tier
       AND m.memory_type = ANY(CAST(:f_types AS text[])) -- filter:types
       AND m.tags && CAST(:f_tags AS text[]) -- filter:tags
       AND m.agent_id IN (SELECT g.id FROM agents g WHERE g.tenant_id = :tenant_id AND g.name = ANY(CAST(:f_agents AS text[]))) -- filter:agents
       AND m.scope = ANY(CAST(:f_scopes AS text[])) -- filter:scopes
       AND m.thread = CAST(:f_thread AS text) -- filter:thread
       AND coalesce(m.occurred_at, m.created_at) >= CAST(:f_occurred_after AS timestamptz) -- filter:occurred_after
       AND coalesce(m.occurred_at, m.created_at) < CAST(:f_occurred_before AS timestamptz) -- filter:occurred_before
       AND m.created_at >= CAST(:f_created_after AS timestamptz) -- filter:created_after
       AND m.created_at < CAST(:f_created_before AS timestamptz) -- filter:created_before
       AND (m.scope = 'shared'
            OR (m.scope = 'private' AND m.agent_id = CAST(:agent_id AS uuid))
            OR (m.scope = 'group' AND m.group_name = ANY(CAST(:groups AS text[]))))
     LIMIT :fts_pool
), pool AS MATERIALIZED (
    SELECT * FROM rare_hits
    UNION ALL
    SELECT * FROM all_hits a WHERE a.id NOT IN (SELECT id FROM rare_hits)
    UNION ALL
    SELECT * FROM (SELECT m.id, m.tier, m.thread, m.position, m.occurred_at,
                          coalesce(m.last_hit_at, m.created_at) AS last_use, m.search_tsv,
                          1 - (m.embedding <=> CAST(:embedding AS vector)) AS vector_similarity
     FROM memories m
     WHERE CAST(:phrase_q AS text) <> ''
       AND (NOT CAST(:phrase_in_all AS boolean) OR (SELECT r.q FROM rare r) = ''
            OR ((SELECT count(*) FROM rare_hits) >= :fts_pool AND (SELECT count(*) FROM all_hits) >= :fts_pool))
       AND m.search_tsv @@ to_tsquery('simple', CAST(:phrase_q AS text))
       AND m.tenant_id = :tenant_id AND m.status = 'active'
       AND m.tier = CAST(:tier AS text) -- tier
       AND m.memory_type = ANY(CAST(:f_types AS text[])) -- filter:types
       AND m.tags && CAST(:f_tags AS text[]) -- filter:tags
       AND m.agent_id IN (SELECT g.id FROM agents g WHERE g.tenant_id = :tenant_id AND g.name = ANY(CAST(:f_agents AS text[]))) -- filter:agents
       AND m.scope = ANY(CAST(:f_scopes AS text[])) -- filter:scopes
       AND m.thread = CAST(:f_thread AS text) -- filter:thread
       AND coalesce(m.occurred_at, m.created_at) >= CAST(:f_occurred_after AS timestamptz) -- filter:occurred_after
       AND coalesce(m.occurred_at, m.created_at) < CAST(:f_occurred_before AS timestamptz) -- filter:occurred_before
       AND m.created_at >= CAST(:f_created_after AS timestamptz) -- filter:created_after
       AND m.created_at < CAST(:f_created_before AS timestamptz) -- filter:created_before
       AND (m.scope = 'shared'
            OR (m.scope = 'private' AND m.agent_id = CAST(:agent_id AS uuid))
            OR (m.scope = 'group' AND m.group_name = ANY(CAST(:groups AS text[]))))
     LIMIT :fts_pool) ph
    WHERE ph.id NOT IN (SELECT id FROM rare_hits) AND ph.id NOT IN (SELECT id FROM all_hits)
), cand AS (
    -- each candidate once, with the legs that brought it
    SELECT v.*, true AS from_vector, v.id IN (SELECT id FROM pool) AS from_text FROM vec v
    UNION ALL
    SELECT p.*, false, true FROM pool p WHERE p.id NOT IN (SELECT id FROM vec)
), scored AS (
    -- one pass over the candidates: every lexical unit tested on the row the leg read
    SELECT c.id, c.tier, c.thread, c.position, c.occurred_at, c.from_vector, c.from_text,
           coalesce(x.phrase_match, false) AS phrase_match,
           c.vector_similarity,
           coalesce(x.term_idf, 0) * (:k1 + 1)
               / (1 + :k1 * (1 - :b + :b * length(c.search_tsv) / (SELECT avglen FROM totals)))
               + :phrase_weight * coalesce(x.pair_idf, 0) AS text_rank,
           coalesce(x.term_idf, 0) / nullif((SELECT sum(u.w) FROM units u WHERE u.kind = 'term'), 0) AS coverage,
           -- the same share over the query's terms beyond the names it mentions (all terms if only names)
           CASE WHEN EXISTS (SELECT 1 FROM units u WHERE u.kind = 'term' AND NOT u.name)
                THEN coalesce(x.content_idf, 0)
                     / nullif((SELECT sum(u.w) FROM units u WHERE u.kind = 'term' AND NOT u.name), 0)
                ELSE coalesce(x.term_idf, 0) / nullif((SELECT sum(u.w) FROM units u WHERE u.kind = 'term'), 0)
           END AS content_coverage,
           greatest(extract(epoch FROM now() - c.last_use) / 86400.0, 0)
               AS days_since_hit
    FROM cand c
    CROSS JOIN LATERAL (
        SELECT sum(u.w) FILTER (WHERE u.kind = 'term') AS term_idf,
               sum(u.w) FILTER (WHERE u.kind = 'term' AND NOT u.name) AS content_idf,
               sum(u.w) FILTER (WHERE u.kind = 'pair') AS pair_idf,
               bool_or(u.kind = 'phrase') AS phrase_match
        FROM units u
        WHERE c.search_tsv @@ u.tq
    ) x
), ranked AS (
    SELECT s.*,
           avg(s.vector_similarity) FILTER (WHERE s.from_vector) OVER () AS pool_cos_mean,
           stddev_pop(s.vector_similarity) FILTER (WHERE s.from_vector) OVER () AS pool_cos_std,
           rank() OVER (ORDER BY s.vector_similarity DESC) AS vector_rank,
           -- a memory that matches only the names the query mentions ranks below every one matching its
           -- content ("Tom: Night!" is no answer to "Which marathon did Tom run?")
           CASE WHEN s.text_rank > 0
                THEN rank() OVER (ORDER BY coalesce(s.content_coverage, 0) > 0 DESC, s.text_rank DESC) END
                AS text_rank_pos
    FROM scored s
), fused AS (
    SELECT r.*,
           CASE WHEN CAST(:fusion AS text) = 'rrf'
                THEN (:w_dense / (:rrf_k + r.vector_rank)
                      + coalesce(:w_lex / (:rrf_k + r.text_rank_pos), 0)) / ((:w_dense + :w_lex) / (:rrf_k + 1))
                ELSE (:w_dense * r.vector_similarity + :w_lex * r.text_rank / (r.text_rank + :lex_half))
                     / (:w_dense + :w_lex)
           END AS fused
    FROM ranked r
), neighbours AS (
    -- only rows of a thread (conversation turns) can take credit from an adjacent turn
    SELECT f.id, max(g.fused) AS neighbour_fused
    FROM fused f
    -- bigint: a position stored at the int4 limit (before uploads were capped) must not overflow
    JOIN fused g ON g.thread = f.thread
                AND CAST(g.position AS bigint) IN (CAST(f.position AS bigint) - 1, CAST(f.position AS bigint) + 1)
    WHERE :neighbour_weight > 0 AND f.thread IS NOT NULL AND g.thread IS NOT NULL
    GROUP BY f.id
), top AS (
    SELECT c.*,
           c.relevance
               * (CASE WHEN c.time_match THEN 1 + :time_weight ELSE 1 END)
               * c.tier_boost
               * (1 - :decay_weight + :decay_weight * c.hotness) AS score
    FROM (
        SELECT f.*,
               coalesce(n.neighbour_fused, 0) AS neighbour_fused,
               (CAST(:t_from AS timestamptz) IS NOT NULL AND f.occurred_at >= CAST(:t_from AS timestamptz)
                AND f.occurred_at < CAST(:t_to AS timestamptz)) AS time_match,
               f.fused + :neighbour_weight * coalesce(n.neighbour_fused, 0)
                   + CASE WHEN f.phrase_match THEN :phrase_boost ELSE 0 END AS relevance,
               CASE f.tier WHEN 'hot' THEN :boost_hot WHEN 'warm' THEN :boost_warm ELSE :boost_cold END
                   AS tier_boost,
               exp(-:alpha * f.days_since_hit) AS hotness
        FROM fused f
        LEFT JOIN neighbours n ON n.id = f.id
    ) c
    -- ties: the later one first (ultron/memory/ties.py), not a random id; created_at only in the final
    -- order below (the legs do not read it), so a tie at the cut falls to the id
    ORDER BY score DESC, c.occurred_at DESC NULLS LAST, c.position DESC NULLS LAST, c.id
    LIMIT :limit
)
SELECT t.*, m.memory_type, m.content, m.context, m.resolution, m.tags, m.summary_l0, m.overview_l1,
       m.status, m.scope, m.group_name, m.pinned, m.hit_count, m.last_hit_at, m.created_at, m.updated_at,
       m.redacted_entities, m.valence, m.arousal, m.importance, m.resolved_at, m.superseded_by_id,
       a.name AS agent_name,
       (SELECT count(*) FROM memory_contributions c WHERE c.memory_id = m.id AND c.tenant_id = m.tenant_id)
           AS contributions,
       -- the people, places and projects it names (the companion's entity signal; no second round trip)
       ARRAY(SELECT e.name FROM memory_entities e WHERE e.memory_id = m.id AND e.tenant_id = m.tenant_id
             ORDER BY e.name) AS entity_names,
       -- the companion's ripple activation (sum of recent ripples, capped; no second round trip)
       rp.ripple, rp.ripple_count,
       -- a memory that only asks: its content ends with a question mark and it holds no resolution
       -- (service.py, _sink_questions)
       qa.asks,
       -- for a thread turn that only asks: the turn after it, its reply, as a record with the record's
       -- field names (service.py, _hand_to_replies), unless that one only asks too
       rep.reply
FROM top t
-- ids are unique per tenant only (the key is (id, tenant_id)): every join back names the tenant
JOIN memories m ON m.id = t.id AND m.tenant_id = :tenant_id
LEFT JOIN agents a ON a.id = m.agent_id
CROSS JOIN LATERAL (
    SELECT least(CAST(:ripple_cap AS float8), sum(r.weight)) AS ripple, count(*) AS ripple_count
    FROM memory_ripples r
    WHERE r.tenant_id = :tenant_id AND r.memory_id = m.id
      AND r.created_at > now() - make_interval(secs => CAST(:ripple_age AS float8))
) rp
CROSS JOIN LATERAL (
    SELECT m.content ~ '[?？]\s*$' AND m.resolution ~ '^\s*$' AS asks
) qa
LEFT JOIN LATERAL (
    SELECT jsonb_build_object(
               'id', n.id, 'memory_type', n.memory_type, 'content', n.content, 'context', n.context,
               'resolution', n.resolution, 'tags', n.tags, 'summary_l0', n.summary_l0,
               'overview_l1', n.overview_l1, 'tier', n.tier, 'status', n.status, 'scope', n.scope,
               'group', n.group_name, 'pinned', n.pinned, 'hit_count', n.hit_count,
               'last_hit_at', n.last_hit_at, 'created_at', n.created_at, 'updated_at', n.updated_at,
               'agent', na.name, 'redacted_entities', n.redacted_entities,
               'contributions', (SELECT count(*) FROM memory_contributions c
                                 WHERE c.memory_id = n.id AND c.tenant_id = n.tenant_id),
               'valence', n.valence, 'arousal', n.arousal, 'thread', n.thread, 'position', n.position,
               'occurred_at', n.occurred_at, 'importance', n.importance, 'resolved_at', n.resolved_at
           ) AS reply
    FROM memories n
    LEFT JOIN agents na ON na.id = n.agent_id
    WHERE CAST(:reply_weight AS float8) > 0 AND qa.asks AND m.thread IS NOT NULL AND m.position IS NOT NULL
      AND n.tenant_id = :tenant_id AND n.thread = m.thread AND CAST(n.position AS bigint) = CAST(m.position AS bigint) + 1
      AND n.status = 'active'
      AND n.memory_type = ANY(CAST(:f_types AS text[])) -- filter:types
      AND n.tags && CAST(:f_tags AS text[]) -- filter:tags
      AND n.agent_id IN (SELECT g.id FROM agents g WHERE g.tenant_id = :tenant_id AND g.name = ANY(CAST(:f_agents AS text[]))) -- filter:agents
      AND n.scope = ANY(CAST(:f_scopes AS text[])) -- filter:scopes
      AND n.thread = CAST(:f_thread AS text) -- filter:thread
      AND coalesce(n.occurred_at, n.created_at) >= CAST(:f_occurred_after AS timestamptz) -- filter:occurred_after
      AND coalesce(n.occurred_at, n.created_at) < CAST(:f_occurred_before AS timestamptz) -- filter:occurred_before
      AND n.created_at >= CAST(:f_created_after AS timestamptz) -- filter:created_after
      AND n.created_at < CAST(:f_created_before AS timestamptz) -- filter:created_before
      AND (n.scope = 'shared'
           OR (n.scope = 'private' AND n.agent_id = CAST(:agent_id AS uuid))
           OR (n.scope = 'group' AND n.group_name = ANY(CAST(:groups AS text[]))))
      AND NOT (n.content ~ '[?？]\s*$' AND n.resolution ~ '^\s*$')
    ORDER BY n.created_at, n.id
    LIMIT 1
) rep ON true
ORDER BY t.score DESC, t.occurred_at DESC NULLS LAST, t.position DESC NULLS LAST, m.created_at DESC, t.id

-- name: merge_counted
-- A merge that leaves the memory's text as it is (offline, or a pinned memory): the upload's contribution,
-- its words added to the memory's document (`doc`, empty when it adds none), the tags' union, the redaction
-- counts and `updated_at`, and the activity row, in one statement (service.py, `_merge`; its merge hit is
-- the next statement in the same pipeline: two changes of one row cannot share a statement). A document
-- that grows rewrites the row (the GIN index), whose new version's HNSW entry is then the worker's while
-- fewer than :pending_max wait (indexing.defer_while_few); otherwise the UPDATE stays HOT.
WITH contribution AS (
    INSERT INTO memory_contributions (tenant_id, memory_id, agent_id, decision, similarity, content, context,
                                      resolution, tags)
    VALUES (:tenant_id, :memory_id, :agent_id, :decision, :similarity, :content, :context, :resolution,
            :tags)
), activity AS (
    INSERT INTO activity_events (tenant_id, agent_id, kind, memory_id, detail)
    VALUES (:tenant_id, :agent_id, 'merge', :memory_id, CAST(:detail AS jsonb))
)
UPDATE memories m
SET tags = CAST(:memory_tags AS text[]),
    search_tsv = CASE WHEN CAST(:doc AS text) = '' THEN m.search_tsv
                      ELSE m.search_tsv || to_tsvector('simple', CAST(:doc AS text)) END,
    redacted_entities = CAST(:redacted_entities AS jsonb),
    updated_at = :updated_at,
    -- as create_memory: the graph entry is the worker's while few wait
    indexed = CASE WHEN CAST(:doc AS text) = '' OR NOT m.indexed THEN m.indexed
                   ELSE (SELECT count(*) FROM (SELECT 1 FROM memories w WHERE w.tenant_id = :tenant_id
                                               AND w.status = 'active' AND NOT w.indexed
                                               LIMIT :pending_max) w) >= :pending_max END
WHERE m.id = :memory_id AND m.tenant_id = :tenant_id

-- name: record_hits
SELECT id FROM ultron_record_hits(:tenant_id, CAST(:agent_id AS uuid), CAST(:memory_ids AS uuid[]), :signal,
                                  :weight, :window_seconds) AS id

-- name: refresh_term_stats
-- Rebuild one tenant's term statistics (the lexical ranker's IDF) from its active memories.
SELECT ultron_refresh_term_stats(:tenant_id) AS lexemes

-- name: tenant_share
-- A tenant's active memories at its last term-statistics refresh, and the planner's row estimate of the
-- whole table (-1 before its first ANALYZE): whether its searches walk the HNSW index (service.py), and
-- whether the term-statistics keeper analyzes the tables after a bulk load (termstats.py).
SELECT (SELECT t.docs FROM term_totals t WHERE t.tenant_id = :tenant_id) AS docs,
       (SELECT c.reltuples FROM pg_class c WHERE c.oid = CAST('memories' AS regclass)) AS rows

-- name: raw_knn
-- The bare pgvector HNSW k-nearest-neighbour query: the benchmark's baseline.
SELECT m.id
FROM memories m
WHERE m.tenant_id = :tenant_id AND m.status = 'active' AND m.indexed
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
ON CONFLICT (memory_id, segment_id, tenant_id)
DO UPDATE SET contributions = memory_sources.contributions + excluded.contributions

-- name: analyze_probed_tables
-- The planner's statistics of the tables an upload's dedup and cluster probes read (TermStatsKeeper).
ANALYZE memories, knowledge_clusters
