-- The Skill Hub (ultron/skills/service.py).

-- name: search_skills
-- The latest active version of each skill, nearest first (HNSW on skills.embedding); superseded
-- slugs and older versions never appear.
SELECT s.id, s.slug, s.version_major, s.version_minor, s.version_patch, s.name, s.description,
       s.categories, s.score, s.source_cluster_id, s.created_at,
       1 - (s.embedding <=> CAST(:v AS vector)) AS similarity
FROM skills s
WHERE s.tenant_id = :tenant_id AND s.status = 'active'
  AND NOT EXISTS (
      SELECT 1 FROM skills n
      WHERE n.tenant_id = s.tenant_id AND n.slug = s.slug
        AND (n.version_major, n.version_minor, n.version_patch)
            > (s.version_major, s.version_minor, s.version_patch)
  )
ORDER BY s.embedding <=> CAST(:v AS vector)
LIMIT :limit

-- name: list_skills
-- The latest version of each slug (whatever its status), kept when its status matches, newest first.
SELECT l.*
FROM (
    SELECT DISTINCT ON (s.slug)
           s.id, s.slug, s.version_major, s.version_minor, s.version_patch, s.name, s.description,
           s.categories, s.score, s.status, s.source_cluster_id, s.created_at
    FROM skills s
    WHERE s.tenant_id = :tenant_id
    ORDER BY s.slug, s.version_major DESC, s.version_minor DESC, s.version_patch DESC
) l
WHERE CAST(:status AS text) = 'all' OR l.status = CAST(:status AS text)
ORDER BY l.created_at DESC, l.slug
LIMIT :limit OFFSET :offset

-- name: skill_history
-- What happened to a skill: the records naming its slug (uploads, publications) and every attempt on
-- the clusters its versions came from, newest first.
SELECT r.id, r.cluster_id, r.skill_slug, r.trigger, r.status, r.old_version, r.new_version, r.old_score,
       r.new_score, r.detail, r.memory_ids, r.started_at, r.finished_at
FROM evolution_records r
WHERE r.tenant_id = :tenant_id
  AND (r.skill_slug = :slug
       OR r.cluster_id IN (
           SELECT s.source_cluster_id FROM skills s
           WHERE s.tenant_id = :tenant_id AND s.slug = :slug AND s.source_cluster_id IS NOT NULL))
ORDER BY r.started_at DESC, r.id DESC
LIMIT :limit

-- name: lock_skill_slug
-- Uploads of one slug take turns (transaction-scoped), so each gets the next version.
SELECT pg_advisory_xact_lock(:ns, hashtext(CAST(:tenant_id AS text) || '/' || :slug))
