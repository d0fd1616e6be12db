"""Knowledge clusters: an unindexed exact running mean, the indexed centroid refreshed only on drift.

Until now every join rewrote the HNSW-indexed `centroid`, so every upload inserted a new graph element
(the old one dead until VACUUM). `mean` holds the members' exact mean vector (not normalized, no index):
joins and leaves update it, and `centroid` (normalized, indexed) is rewritten only when it has drifted
from the mean's direction (ultron/clusters/service.py, CENTROID_DRIFT_COSINE).

Such an update touches no indexed column, so it can be HOT: `member_count` leaves the tenant index (an
index on a column that changes at every join makes every update a non-HOT one, with an entry in every
index), and fillfactor 80 keeps room on each page for the new row version.

Revision ID: 0007_cluster_means
Revises: 0006_skill_files
Create Date: 2026-12-03
"""

from alembic import op

revision = "0007_cluster_means"
down_revision = "0006_skill_files"
branch_labels = None
depends_on = None

# The column takes the profile's dimension (ultron/db/vectors.py): copy centroid's type if it has one.
UPGRADE = """
DO $$
DECLARE typ text;
BEGIN
    SELECT format_type(atttypid, atttypmod) INTO typ FROM pg_attribute
    WHERE attrelid = 'knowledge_clusters'::regclass AND attname = 'centroid';
    EXECUTE format('ALTER TABLE knowledge_clusters ADD COLUMN mean %s', typ);
END $$;
UPDATE knowledge_clusters SET mean = (
    SELECT CAST(array_agg(x * centroid_norm ORDER BY i) AS vector)
    FROM unnest(CAST(centroid AS real[])) WITH ORDINALITY AS u(x, i)
) WHERE centroid IS NOT NULL;
ALTER TABLE knowledge_clusters SET (fillfactor = 80);
DROP INDEX ix_knowledge_clusters_tenant_count;
CREATE INDEX ix_knowledge_clusters_tenant ON knowledge_clusters (tenant_id);
"""

DOWNGRADE = """
DROP INDEX ix_knowledge_clusters_tenant;
CREATE INDEX ix_knowledge_clusters_tenant_count ON knowledge_clusters (tenant_id, member_count);
ALTER TABLE knowledge_clusters RESET (fillfactor);
UPDATE knowledge_clusters SET centroid = l2_normalize(mean) WHERE mean IS NOT NULL;
ALTER TABLE knowledge_clusters DROP COLUMN mean;
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
