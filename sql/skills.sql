-- The Skill Hub (ultron/skills/service.py).

-- name: search_skills
-- The latest active version of each skill, nearest first (HNSW on skills.embedding); superseded
-- slugs and older versions never appear.
SELECT s.id, s.slug, s.version_major, s.version_minor, s.version_patch, s.name, s.description,
       s.categories, s.source_cluster_id, s.created_at,
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
