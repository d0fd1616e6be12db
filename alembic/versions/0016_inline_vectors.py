"""memories keeps a row of up to 4 KB whole on its heap page (`toast_tuple_target = 4080`): the embedding
is no longer moved out of line into TOAST.

A memory row with its search vector and summaries is ~1.2 KB before its embedding; a 256-d vector adds 1 KB,
e5-small's 384-d 1.5 KB, so the row passes the 2 KB threshold at which Postgres starts to TOAST it, and
`vector` is a column Postgres moves out of line first (storage EXTERNAL). Every search then read each of its
80 candidates' vectors back through the TOAST index and heap (a b-tree descent and one or more pages per
row, ~10 µs each), and every upload wrote a TOAST chunk and a TOAST index entry. With the target at 4080
bytes a row up to that size stays whole: nothing is compressed or moved out below it, above it Postgres
toasts as before. Measured on one 100k store rewritten both ways (docs/benchmarks.md, stop 19): search p50
8.96 -> 8.15 ms and p95 11.95 -> 10.46 ms; the heap grows (each page holds two or three rows instead of five
or six) and the TOAST table is empty.

Only rows written from now on are stored this way: existing rows keep their out-of-line vectors until they
are next rewritten (`ultron reembed`, or `VACUUM FULL memories` in a maintenance window; docs/operations.md).
No row changes. Downgrade resets the option (rows stay as they are; new ones are toasted again).

Revision ID: 0016_inline_vectors
Revises: 0015_member_tenant_fk
Create Date: 2026-12-02
"""

from alembic import op

revision = "0016_inline_vectors"
down_revision = "0015_member_tenant_fk"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE memories SET (toast_tuple_target = 4080)")


def downgrade() -> None:
    op.execute("ALTER TABLE memories RESET (toast_tuple_target)")
