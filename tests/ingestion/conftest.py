from __future__ import annotations

from pathlib import Path

import pytest

from ultron.ingestion.schemas import IngestFile
from ultron.tenancy import local_actor

SESSIONS = Path(__file__).resolve().parents[1] / "data" / "sessions"


def fixture_file(name: str, content: bytes | None = None) -> IngestFile:
    return IngestFile(name, content if content is not None else (SESSIONS / name).read_bytes())


@pytest.fixture
def ingest(hub):  # type: ignore[no-untyped-def]
    """ingest(files) -> IngestResult, in one committed transaction as the local agent."""

    def _ingest(*files: IngestFile):  # type: ignore[no-untyped-def]
        with hub.db.session() as session:
            return hub.ingestion.ingest_files(session, local_actor(session), list(files))

    return _ingest
