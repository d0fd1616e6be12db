"""Alembic environment: the caller passes a live connection (see ultron/db/migrate.py)."""

from __future__ import annotations

from sqlalchemy import create_engine

from alembic import context
from ultron.db.models import Base

config = context.config
target_metadata = Base.metadata


def run() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        context.configure(
            connection=connection, target_metadata=target_metadata, transaction_per_migration=True
        )
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = config.attributes.get("engine") or create_engine(config.get_main_option("sqlalchemy.url"))
    with engine.begin() as conn:
        context.configure(connection=conn, target_metadata=target_metadata)
        with context.begin_transaction():
            context.run_migrations()


run()
