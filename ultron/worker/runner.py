"""The worker: runs the cycle every `decay_interval_hours`, drains the queues when ingest NOTIFYs.

Loop (procrastinate's shape): run, then wait for whichever comes first -- a NOTIFY on `ultron_work`, the
queue poll interval, the next full cycle, or a stop request. A NOTIFY or a poll drains the per-item
queues (segment, score, extract); the full cycle adds the singleton steps (rebalance, skill evolution,
consolidation), each under a Postgres advisory lock so that any number of workers run them once.

The LISTEN connection is a plain psycopg connection used only by this thread through its notifies
generator; nothing here touches an event loop. `stop()` (SIGTERM/SIGINT, or the server shutting down)
lets the current item finish, gives back leases not yet started and returns.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol
from uuid import UUID

import psycopg
from sqlalchemy import func, text, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session

from ultron.clusters import pending
from ultron.config import Settings
from ultron.db.engine import Database
from ultron.db.models import WorkerProcess, WorkerRun
from ultron.db.queries import q
from ultron.memory import indexing
from ultron.memory.service import MemoryService
from ultron.observability.metrics import record_worker_step
from ultron.settings_store import RuntimeSettings
from ultron.skills.service import SkillService
from ultron.worker import queues
from ultron.worker.consolidate import ConsolidationCounts, Consolidator
from ultron.worker.evolution import run_evolution_cycle
from ultron.worker.queues import EXTRACT, SCORE, SEGMENT, Handler, Leased, LeasePolicy, Queue
from ultron.worker.rebalance import add_counts, rebalance_tenant, tenant_ids
from ultron.worker.status import ALIVE_LEASES, mark_abandoned_runs

log = logging.getLogger(__name__)

NOTIFY_CHANNEL = "ultron_work"
# Advisory-lock namespace of the singleton steps (first key of pg_try_advisory_lock(int, int)).
SINGLETON_LOCK_NAMESPACE = 0x554C0004
SINGLETON_KEYS = {"rebalance": 1, "evolution": 2, "consolidate": 3}
# `index`: new uploads' vectors into the HNSW graph (ultron/memory/indexing.py), before their clusters.
ITEM_STEPS = ("segment", "score", "extract", "index", "cluster")
# Queue rows of the cluster step leased per statement (one tenant's share of them assigned per transaction).
CLUSTER_BATCH = 500
CYCLE_STEPS = (*ITEM_STEPS, "rebalance", "evolution", "consolidate")
# Longest single wait on the LISTEN socket: how quickly a stop request is noticed while idle.
WAIT_SLICE_SECONDS = 0.25
# Seconds before a failed LISTEN connection is opened again.
RELISTEN_SECONDS = 5.0
# worker_runs older than this are deleted at the end of each full cycle.
RUN_RETENTION_DAYS = 30


def default_worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


def _libpq_url(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def _error_text(exc: BaseException) -> str:
    return "".join(traceback.format_exception_only(type(exc), exc)).strip()


@dataclass
class StepOutcome:
    step: str
    status: str
    counts: dict[str, Any] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    started_at: datetime = field(default_factory=lambda: datetime.now(UTC))


class ItemSteps(Protocol):
    """The per-item steps the queues run (ultron/trajectory/pipeline.py's Steps), each inside the item's
    transaction."""

    def segment_session(self, session: Session, session_id: UUID) -> int: ...

    def score_segment(self, session: Session, segment_id: UUID) -> float: ...

    def extract_segment(self, session: Session, segment_id: UUID) -> list[UUID]: ...


class Worker:
    """Built by the composition root (ultron/hub.py: build_worker) with the collaborators each step uses."""

    def __init__(
        self,
        db: Database,
        settings: Settings,
        *,
        steps: ItemSteps,
        memory: MemoryService,
        runtime: RuntimeSettings,
        skills: SkillService,
        worker_id: str | None = None,
    ):
        self.db = db
        self.settings = settings
        self.steps = steps
        self.runtime = runtime
        self.skills = skills
        self.clusters = skills.clusters
        self.id = worker_id or default_worker_id()
        self.policy = LeasePolicy.from_settings(settings)
        self.consolidator = Consolidator(db, memory, settings.consolidate_max_merges)
        self._stop = threading.Event()
        self._listener: psycopg.Connection | None = None
        self._current_step: str | None = None
        self.wakeups = 0

    # --- control -------------------------------------------------------------------------------

    def stop(self) -> None:
        """Ask the worker to finish its current item and return (safe from a signal handler)."""
        self._stop.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    # --- the cycle -----------------------------------------------------------------------------

    def run_once(self) -> list[StepOutcome]:
        """One full cycle (`ultron worker --once`)."""
        with self._presence():
            return self.run_cycle(CYCLE_STEPS)

    def run_cycle(self, steps: tuple[str, ...] = CYCLE_STEPS, *, quiet: bool = False) -> list[StepOutcome]:
        """Run `steps` in order; `quiet` records a step only when it did or failed something."""
        cycle_id = uuid.uuid4()
        outcomes = []
        for step in steps:
            if self.stopping:
                break
            outcomes.append(self._run_step(cycle_id, step, quiet=quiet))
        if not quiet and not self.stopping:
            with self.db.session() as session:
                session.execute(q("prune_runs"), {"keep_days": RUN_RETENTION_DAYS})
        return outcomes

    def _run_step(self, cycle_id: uuid.UUID, step: str, *, quiet: bool) -> StepOutcome:
        run_id = None if quiet else self._record_start(cycle_id, step)
        self._current_step = step
        outcome = StepOutcome(step, "ok")
        started = time.perf_counter()
        try:
            if step in SINGLETON_KEYS:
                with self._singleton(step) as held:
                    if held:
                        outcome.counts = self._step_fn(step)(outcome)
                    else:
                        outcome.status, outcome.counts = "skipped", {"reason": "another worker runs it"}
            else:
                outcome.counts = self._step_fn(step)(outcome)
        except Exception as exc:  # noqa: BLE001 - one failing step must not stop the cycle
            log.exception("worker step %s failed", step)
            outcome.status = "failed"
            outcome.errors.append(_error_text(exc))
        finally:
            self._current_step = None
        if outcome.status == "ok" and self.stopping:
            outcome.status = "interrupted"
        if run_id is not None or outcome.errors or _did_work(outcome.counts):
            self._record_finish(run_id, cycle_id, outcome)
            failed = outcome.status == "failed" or bool(outcome.errors)
            record_worker_step(step, time.perf_counter() - started, failed=failed)
        return outcome

    def _step_fn(self, step: str) -> Callable[[StepOutcome], dict[str, Any]]:
        return {
            "segment": lambda o: self.drain(SEGMENT, o),
            "score": lambda o: self.drain(SCORE, o),
            "extract": lambda o: self.drain(EXTRACT, o),
            "index": self.index_memories,
            "cluster": self.assign_clusters,
            "rebalance": self.rebalance,
            "evolution": self.evolve,
            "consolidate": self.consolidate,
        }[step]

    # --- per-item steps ------------------------------------------------------------------------

    def _handler(self, queue: Queue) -> Handler:
        return {
            SEGMENT: self.steps.segment_session,
            SCORE: self.steps.score_segment,
            EXTRACT: self.steps.extract_segment,
        }[queue]

    def drain(
        self,
        queue: Queue,
        outcome: StepOutcome,
        *,
        tenant_id: UUID | None = None,
        limit: int | None = None,
        results: list[Any] | None = None,
    ) -> dict[str, Any]:
        """Lease and process items one at a time until the queue has none ready (or we are stopping, or
        `limit` items were leased). `tenant_id` narrows it to one tenant's items; `results` collects what
        the step returned for each item done."""
        handler = self._handler(queue)
        counts = {"done": 0, "failed": 0, "parked": 0, "lost": 0}
        with self.db.session() as session:
            counts["parked"] += (
                queues.park_abandoned(session, self.policy, tenant_id) if queue is SEGMENT else 0
            )
        failed: set[UUID] = set()  # not retried within this drain, whatever their backoff
        taken = 0
        while not self.stopping and (limit is None or taken < limit):
            with self.db.session() as session:
                leased = queues.lease(
                    session, queue, self.id, self.policy, exclude=failed, tenant_id=tenant_id
                )
            if not leased:
                break
            taken += len(leased)
            for item in leased:
                result, value = self.process(queue, handler, item, outcome)
                counts[result] += 1
                if result in ("failed", "parked"):
                    failed.add(item.id)
                elif result == "done" and results is not None:
                    results.append(value)
        return counts

    def process(self, queue: Queue, handler: Handler, item: Leased, outcome: StepOutcome) -> tuple[str, Any]:
        """One item in its own transaction; a failure is recorded in a separate short one. Returns done,
        failed, parked or lost, and what the step returned."""
        try:
            with self.db.session() as session:
                if not queues.claim(session, queue, item.id, self.id):
                    return "lost", None  # our lease expired and another worker has it
                value = handler(session, item.id)
                queues.finish(session, queue, item.id, self.id)
            return "done", value
        except Exception as exc:  # noqa: BLE001 - the item's error is kept on the item
            error = _error_text(exc)
            log.warning("%s %s failed (attempt %d): %s", queue.name, item.id, item.attempts, error)
            with self.db.session() as session:
                parked = queues.fail(session, queue, item.id, self.id, error, self.policy)
            if parked:
                outcome.errors.append(
                    f"{queue.name} {item.id} parked after {item.attempts} attempts: {error}"
                )
            return ("parked" if parked else "failed"), None

    def process_due(self, tenant_id: UUID | None = None, limit: int = 100) -> dict[str, int]:
        """For a caller that waits on its work (POST /trajectory/process, the SDK's local client, the
        demo): drain the three queues through the same lease protocol as the loop, up to `limit` items
        each, only `tenant_id`'s when given; returns what each step did."""
        outcome = StepOutcome("process", "ok")
        new_segments: list[int] = []
        memories: list[list[UUID]] = []
        sessions = self.drain(SEGMENT, outcome, tenant_id=tenant_id, limit=limit, results=new_segments)
        scored = self.drain(SCORE, outcome, tenant_id=tenant_id, limit=limit)
        extracted = self.drain(EXTRACT, outcome, tenant_id=tenant_id, limit=limit, results=memories)
        self.assign_clusters(outcome, tenant_id=tenant_id)
        return {
            "sessions": sessions["done"],
            "new_segments": sum(new_segments),
            "scored": scored["done"],
            "extracted": extracted["done"],
            "memories": sum(len(ids) for ids in memories),
            "failed": sum(c["failed"] + c["parked"] for c in (sessions, scored, extracted)),
        }

    def index_memories(self, outcome: StepOutcome) -> dict[str, Any]:
        """The index step: the memories uploads stored outside the HNSW graph go into it, the oldest first,
        INDEX_BATCH per transaction, until none waits (ultron/memory/indexing.py)."""
        return {"indexed": indexing.index_all(self.db, lambda: self.stopping)}

    def assign_clusters(self, outcome: StepOutcome, *, tenant_id: UUID | None = None) -> dict[str, Any]:
        """The cluster step: lease the cluster queue CLUSTER_BATCH rows at a time until none is ready, and
        assign each tenant's share in its own transaction (claim, `pending.assign_queued`, the new clusters
        indexed, finish); a failure backs that share off in a separate short one."""
        counts = {"done": 0, "assigned": 0, "failed": 0, "parked": 0, "lost": 0}
        with self.db.session() as session:
            counts["parked"] += queues.park_abandoned_clusters(session, self.policy, tenant_id)
        while not self.stopping:
            with self.db.session() as session:
                batches = queues.lease_cluster_batches(
                    session, self.id, self.policy, CLUSTER_BATCH, tenant_id
                )
            if not batches:
                break
            for batch in batches:
                result, assigned = self._assign_batch(batch, outcome)
                counts[result] += len(batch.ids)
                counts["assigned"] += assigned
        return counts

    def _assign_batch(self, batch: queues.LeasedBatch, outcome: StepOutcome) -> tuple[str, int]:
        try:
            with self.db.session() as session:
                ids = queues.claim_cluster_batch(session, batch, self.id)
                if not ids:
                    return "lost", 0  # our lease expired and another worker (or the catch-up) has them
                assigned = pending.assign_queued(session, self.clusters, batch.tenant_id, ids)
                # New clusters enter the HNSW index now rather than at the next evolution cycle: the
                # assignment's exact pass over the unindexed ones stays short.
                self.clusters.index_pending(session, batch.tenant_id)
                queues.finish_cluster_batch(session, batch.tenant_id, ids, self.id)
            return "done", assigned
        except Exception as exc:  # noqa: BLE001 - the error is kept on the rows
            error = _error_text(exc)
            log.warning("cluster batch of %d failed (attempt %d): %s", len(batch.ids), batch.attempts, error)
            with self.db.session() as session:
                parked = queues.fail_cluster_batch(session, batch, self.id, error, self.policy)
            if parked:
                outcome.errors.append(f"cluster batch of {len(batch.ids)} parked: {error}")
            return ("parked" if parked else "failed"), 0

    # --- singleton steps -----------------------------------------------------------------------

    def rebalance(self, outcome: StepOutcome) -> dict[str, Any]:
        with self.db.session() as session:
            tenants = tenant_ids(session)
        total: dict[str, int] = {"tenants": 0}
        for tenant_id in tenants:
            try:
                with self.db.session() as session:
                    settings = self.runtime.for_tenant(session, tenant_id)  # an admin's changes apply
                    total = add_counts(total, rebalance_tenant(session, settings, tenant_id))
                total["tenants"] += 1
            except Exception as exc:  # noqa: BLE001 - one tenant's failure must not block the others
                outcome.errors.append(f"tenant {tenant_id}: {_error_text(exc)}")
        return total

    def evolve(self, outcome: StepOutcome) -> dict[str, Any]:
        """Skill evolution: every tenant's ready clusters (ultron/worker/evolution.py)."""
        return dict(run_evolution_cycle(self.db, self.skills, should_stop=lambda: self.stopping))

    def consolidate(self, outcome: StepOutcome) -> dict[str, Any]:
        if not self.settings.consolidate_enabled:
            return {"skipped": "consolidate_enabled is false"}
        with self.db.session() as session:
            tenants = tenant_ids(session)
        counts = ConsolidationCounts()
        for tenant_id in tenants:
            self.consolidator.run_tenant(tenant_id, counts, lambda: self.stopping)
        return counts.as_dict()

    @contextmanager
    def _singleton(self, step: str) -> Iterator[bool]:
        """A session-level advisory lock on its own connection; released if this process dies."""
        key = {"ns": SINGLETON_LOCK_NAMESPACE, "key": SINGLETON_KEYS[step]}
        with self.db.engine.connect() as conn:
            held = bool(conn.execute(text("SELECT pg_try_advisory_lock(:ns, :key)"), key).scalar())
            conn.commit()
            try:
                yield held
            finally:
                if held:
                    conn.execute(text("SELECT pg_advisory_unlock(:ns, :key)"), key)
                    conn.commit()

    # --- run records ---------------------------------------------------------------------------

    def _record_start(self, cycle_id: uuid.UUID, step: str) -> int:
        with self.db.session() as session:
            run = WorkerRun(cycle_id=cycle_id, worker_id=self.id, step=step, status="running")
            session.add(run)
            session.flush()
            return run.id

    def _record_finish(self, run_id: int | None, cycle_id: uuid.UUID, outcome: StepOutcome) -> None:
        """Both ends of a run on one clock: a row written only now takes the step's own start and this
        process's time (the row's default, the server's transaction time, came after the finish); a row
        written at the start was stamped by the server, so the server stamps its finish too."""
        values: dict[str, Any] = {
            "status": outcome.status,
            "counts": outcome.counts,
            "errors": outcome.errors,
        }
        with self.db.session() as session:
            if run_id is None:
                values |= {"started_at": outcome.started_at, "finished_at": datetime.now(UTC)}
                session.add(WorkerRun(cycle_id=cycle_id, worker_id=self.id, step=outcome.step, **values))
            else:
                values["finished_at"] = func.greatest(func.now(), WorkerRun.started_at)
                session.execute(update(WorkerRun).where(WorkerRun.id == run_id).values(**values))

    # --- presence and heartbeat ----------------------------------------------------------------

    def _register(self) -> None:
        host, _, _ = self.id.partition(":")
        with self.db.session() as session:
            stmt = insert(WorkerProcess).values(id=self.id, hostname=host, pid=os.getpid())
            session.execute(stmt.on_conflict_do_update(index_elements=["id"], set_={"stopped_at": None}))
            mark_abandoned_runs(session, self.policy.lease_seconds * ALIVE_LEASES, keep=self.id)

    def _unregister(self) -> None:
        with self.db.session() as session:
            queues.release(session, self.id)
            session.execute(
                update(WorkerProcess)
                .where(WorkerProcess.id == self.id)
                .values(stopped_at=datetime.now(UTC), current_step=None)
            )

    def heartbeat(self) -> None:
        """Say we are alive and extend the leases we hold but are not working on."""
        with self.db.session() as session:
            session.execute(
                update(WorkerProcess)
                .where(WorkerProcess.id == self.id)
                .values(heartbeat_at=datetime.now(UTC), current_step=self._current_step)
            )
            queues.heartbeat(session, self.id, self.policy.lease_seconds)
            mark_abandoned_runs(session, self.policy.lease_seconds * ALIVE_LEASES, keep=self.id)

    def _heartbeat_loop(self, done: threading.Event) -> None:
        interval = max(self.policy.lease_seconds / 3.0, 0.5)
        while not done.wait(interval):
            try:
                self.heartbeat()
            except Exception:  # noqa: BLE001 - a missed heartbeat is retried; leases are long
                log.exception("worker heartbeat failed")

    # --- the loop ------------------------------------------------------------------------------

    @contextmanager
    def _presence(self) -> Iterator[None]:
        """Registered and heartbeating while inside; leases given back and marked stopped on exit."""
        self._register()
        done = threading.Event()
        beat = threading.Thread(
            target=self._heartbeat_loop, args=(done,), name="ultron-worker-beat", daemon=True
        )
        beat.start()
        try:
            yield
        finally:
            done.set()
            beat.join(timeout=5)
            self._unregister()

    def run_forever(self) -> None:
        """Until stop(): a full cycle every decay_interval_hours, queue drains on NOTIFY or poll."""
        period = self.settings.decay_interval_hours * 3600.0
        poll, cluster_poll = self.settings.worker_poll_seconds, self.settings.worker_cluster_poll_seconds
        next_cycle = time.monotonic() + self._until_cycle_due(period)
        with self._presence():
            try:
                self._ensure_listener()
                woke, next_poll = True, 0.0
                while not self.stopping:
                    now = time.monotonic()
                    if now >= next_cycle:
                        next_cycle, next_poll = now + period, now + poll
                        self.run_cycle(CYCLE_STEPS)
                    elif woke or now >= next_poll:
                        next_poll = now + poll
                        self.run_cycle(ITEM_STEPS, quiet=True)
                    else:  # new memories wait seconds for their graph entry and cluster, not a whole poll
                        self.run_cycle(("index", "cluster"), quiet=True)
                    now = time.monotonic()
                    woke = self.wait_for_work(min(next_poll, next_cycle, now + cluster_poll) - now)
                    if woke:
                        self.wakeups += 1
            finally:
                self._close_listener()

    def _until_cycle_due(self, period: float) -> float:
        """Seconds until the full cycle is due by its period, counted from the last one recorded (any
        worker's, before a restart too): a restart alone never re-tiers memories."""
        with self.db.session() as session:
            since = session.execute(q("seconds_since_full_cycle")).scalar()
        return 0.0 if since is None else max(0.0, period - float(since))

    def wait_for_work(self, seconds: float) -> bool:
        """Sleep up to `seconds`; True as soon as a NOTIFY arrives, False on timeout or stop."""
        deadline = time.monotonic() + max(seconds, 0.0)
        while not self.stopping:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            listener = self._ensure_listener()
            if listener is None:
                self._stop.wait(min(left, RELISTEN_SECONDS))
                continue
            try:
                for _ in listener.notifies(timeout=min(left, WAIT_SLICE_SECONDS), stop_after=1):
                    return True
            except psycopg.OperationalError:
                log.warning("LISTEN connection lost; reconnecting")
                self._close_listener()
        return False

    def _ensure_listener(self) -> psycopg.Connection | None:
        if self._listener is not None and not self._listener.closed:
            return self._listener
        try:
            conn = psycopg.connect(_libpq_url(self.db.url), autocommit=True)
            conn.execute(f"LISTEN {NOTIFY_CHANNEL}")
        except psycopg.Error:
            log.exception(
                "cannot LISTEN on %s; polling every %ss", NOTIFY_CHANNEL, self.settings.worker_poll_seconds
            )
            return None
        self._listener = conn
        return conn

    def _close_listener(self) -> None:
        if self._listener is not None:
            try:
                self._listener.close()
            finally:
                self._listener = None


def _did_work(counts: dict[str, Any]) -> bool:
    return any(isinstance(v, int) and v > 0 for v in counts.values())


class BackgroundWorker:
    """`ultron serve --with-worker`: the worker on its own thread (never the event loop)."""

    def __init__(self, worker: Worker):
        self.worker = worker
        self.thread = threading.Thread(target=self.worker.run_forever, name="ultron-worker", daemon=True)
        self.thread.start()

    def close(self, timeout: float = 60.0) -> None:
        """Stop after the current item and wait for the thread (at server shutdown)."""
        self.worker.stop()
        self.thread.join(timeout=timeout)
