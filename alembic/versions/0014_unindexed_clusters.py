"""New clusters wait for the worker to enter the HNSW index: a partial index finds a tenant's unindexed ones.

A new cluster is stored with `centroid` NULL (pgvector's HNSW does not index NULLs) and the assignment's
probe finds it by an exact pass over the tenant's clusters without a centroid, next to the HNSW candidates
(ultron/clusters/service.py). This index makes that pass read only those rows. Its predicate holds
`centroid` alone, a column the HNSW index already holds: a column in an index's predicate blocks HOT
updates as a key column does, and `mean` and `member_count` change at every join (which is meant to be
HOT). Existing clusters keep their centroids, so they stay indexed; no row changes. Downgrade drops the
index; an unindexed cluster then is found by no probe until it is given a centroid, so downgrade first
indexes them all (centroid = the mean's direction, what the worker would have written).

Revision ID: 0014_unindexed_clusters
Revises: 0013_runtime_settings
Create Date: 2026-12-01
"""

from alembic import op

revision = "0014_unindexed_clusters"
down_revision = "0013_runtime_settings"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        "CREATE INDEX ix_knowledge_clusters_unindexed ON knowledge_clusters (tenant_id) "
        "WHERE centroid IS NULL"
    )


def downgrade() -> None:
    op.execute(
        "UPDATE knowledge_clusters SET centroid = l2_normalize(mean) "
        "WHERE centroid IS NULL AND mean IS NOT NULL AND member_count > 0"
    )
    op.execute("DROP INDEX ix_knowledge_clusters_unindexed")
