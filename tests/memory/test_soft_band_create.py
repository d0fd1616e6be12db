"""A single upload near a memory in the soft band is written by its probe's own statement (one round trip)
under a savepoint; when the judge then finds the two the same, the write is rolled back and the upload
merges, leaving no trace of it (ultron/memory/service.py, `_upload`)."""

from __future__ import annotations

from sqlalchemy import text

from ultron.memory.schemas import UploadRequest
from ultron.tenancy import local_actor

BACKUP = "The nightly backup job didn't finish because the disk on the db server was full."
BACKUP_AGAIN = "The nightly backup job did not finish, because the disk on the db server was full"
OTHER = "The nightly backup job finished late because the network to the db server was slow."


def _counts(hub) -> dict[str, int]:  # type: ignore[no-untyped-def]
    with hub.db.session() as s:
        return {
            table: int(s.execute(text(f"SELECT count(*) FROM {table}")).scalar_one())
            for table in ("memories", "memory_contributions", "activity_events", "cluster_queue")
        }


def _soft_band_hub(make_hub):  # type: ignore[no-untyped-def]
    # every pair below the hard threshold: the judge decides each
    return make_hub(dedup_similarity_threshold=0.999, dedup_soft_threshold=0.3)


def test_a_judged_merge_in_the_soft_band_leaves_no_trace_of_the_write(make_hub, monkeypatch):  # type: ignore[no-untyped-def]
    hub = _soft_band_hub(make_hub)
    with hub.db.session() as s:
        actor = local_actor(s)
    undone = []
    undo = hub.memory._undo_speculative
    monkeypatch.setattr(hub.memory, "_undo_speculative", lambda *a: (undone.append(a), undo(*a)))
    with hub.db.session() as s:
        first = hub.memory.upload(s, actor, UploadRequest(content=BACKUP))
    before = _counts(hub)
    with hub.db.session() as s:
        second = hub.memory.upload(s, actor, UploadRequest(content=BACKUP_AGAIN))
        # the probe's settings are back after the rollback to the savepoint
        assert s.execute(text("SHOW enable_sort")).scalar_one() == "on"
        assert s.execute(text("SHOW plan_cache_mode")).scalar_one() == "auto"
    assert second.decision == "merged_judge" and second.record.id == first.record.id
    assert len(undone) == 1  # the probe's statement had written it, and the merge rolled that back
    after = _counts(hub)
    assert after["memories"] == before["memories"]  # the speculative memory is gone
    assert after["cluster_queue"] == before["cluster_queue"]
    assert after["memory_contributions"] == before["memory_contributions"] + 1  # the merge's own
    with hub.db.session() as s:
        kinds = s.execute(text("SELECT kind FROM activity_events ORDER BY created_at")).scalars().all()
    assert kinds.count("upload") == 1  # the first upload's; the rolled-back one wrote none that stayed


def test_a_kept_pair_in_the_soft_band_is_written_by_the_probe_alone(make_hub, monkeypatch):  # type: ignore[no-untyped-def]
    hub = _soft_band_hub(make_hub)
    with hub.db.session() as s:
        actor = local_actor(s)
    with hub.db.session() as s:
        hub.memory.upload(s, actor, UploadRequest(content=BACKUP))

    def second_statement(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise AssertionError("the soft band's create took a second statement")

    monkeypatch.setattr(hub.memory, "_create", second_statement)
    with hub.db.session() as s:
        kept = hub.memory.upload(s, actor, UploadRequest(content=OTHER))
    assert kept.decision == "created"
    assert _counts(hub)["memories"] == 2
