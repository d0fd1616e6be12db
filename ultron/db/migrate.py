"""Alembic, driven from code so an installed package migrates without a checkout."""

from __future__ import annotations

from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Engine

from alembic import command
from ultron.db.resources import resource_dir

# Two processes starting at once must not both run the migrations.
_MIGRATION_LOCK = 0x756C7472


def alembic_config(engine: Engine | None = None) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(resource_dir("alembic")))
    if engine is not None:
        cfg.attributes["engine"] = engine
    return cfg


def head_revision() -> str | None:
    return ScriptDirectory.from_config(alembic_config()).get_current_head()


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def upgrade_to_head(engine: Engine, revision: str = "head") -> None:
    with engine.begin() as conn:
        conn.exec_driver_sql(f"SELECT pg_advisory_lock({_MIGRATION_LOCK})")
        try:
            cfg = alembic_config()
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, revision)
        finally:
            conn.exec_driver_sql(f"SELECT pg_advisory_unlock({_MIGRATION_LOCK})")


def downgrade(engine: Engine, revision: str) -> None:
    with engine.begin() as conn:
        cfg = alembic_config()
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, revision)


def is_at_head(engine: Engine) -> bool:
    return current_revision(engine) == head_revision()
