//! stategraph's run-queue migrations, indexed by version and recorded in
//! `stategraph_run_migrations` (LangGraph has no such tables; nothing of Python's is touched).
//! Each runs as one implicit transaction (several statements in one simple query), and each
//! can run again on a schema it already changed (a setup that stopped before recording it).

/// The migrations, in order; a queue needs all of them ([`LATEST`]).
pub(super) const MIGRATIONS: [&str; 7] = [
    // v0: the runs, the one-running-run-per-thread guarantee, the queue's indexes, the events.
    "CREATE TABLE IF NOT EXISTS stategraph_runs (
    run_id text PRIMARY KEY,
    thread_id text NOT NULL,
    status text NOT NULL,
    payload jsonb NOT NULL,
    seq bigserial NOT NULL,
    attempt integer NOT NULL DEFAULT 0,
    max_attempts integer NOT NULL,
    worker text,
    lease_until timestamptz,
    cancel text CHECK (cancel IN ('interrupt', 'rollback')),
    events bigint NOT NULL DEFAULT 0,
    error jsonb,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    CHECK (status IN ('pending', 'running', 'success', 'error', 'timeout', 'interrupted'))
);
CREATE UNIQUE INDEX IF NOT EXISTS stategraph_runs_one_running
    ON stategraph_runs (thread_id) WHERE status = 'running';
CREATE INDEX IF NOT EXISTS stategraph_runs_pending
    ON stategraph_runs (seq) WHERE status = 'pending';
CREATE INDEX IF NOT EXISTS stategraph_runs_thread ON stategraph_runs (thread_id, seq);
CREATE INDEX IF NOT EXISTS stategraph_runs_lease
    ON stategraph_runs (lease_until) WHERE status = 'running';
CREATE TABLE IF NOT EXISTS stategraph_run_events (
    run_id text NOT NULL REFERENCES stategraph_runs (run_id) ON DELETE CASCADE,
    seq bigint NOT NULL,
    event text NOT NULL,
    data jsonb NOT NULL,
    PRIMARY KEY (run_id, seq)
)",
    // v1: keys taken once across processes (`claim_once`: a cron's due ticks).
    "CREATE TABLE IF NOT EXISTS stategraph_run_claims (
    key text PRIMARY KEY,
    claimed_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS stategraph_run_claims_at ON stategraph_run_claims (claimed_at)",
    // v2: finished runs by when they ended (replaced in v5).
    "CREATE INDEX IF NOT EXISTS stategraph_runs_finished
    ON stategraph_runs (updated_at) WHERE status NOT IN ('pending', 'running')",
    // v3: why a run was asked to stop, for its worker in whichever process.
    "ALTER TABLE stategraph_runs ADD COLUMN IF NOT EXISTS cancel_reason text",
    // v4: the run's record in typed columns instead of an opaque payload (kept, nullable, for
    // the rows of earlier versions): `json`, not `jsonb`, for what carries user text, which
    // may hold U+0000. Rows of earlier versions (payload `{"body": …, "run": {record}}`) take
    // their record's assistant, metadata, arguments, strategy and `temporary` flag.
    "ALTER TABLE stategraph_runs
    ADD COLUMN IF NOT EXISTS assistant_id text NOT NULL DEFAULT '',
    ADD COLUMN IF NOT EXISTS metadata json NOT NULL DEFAULT '{}',
    ADD COLUMN IF NOT EXISTS kwargs json NOT NULL DEFAULT '{}',
    ADD COLUMN IF NOT EXISTS multitask text NOT NULL DEFAULT 'enqueue',
    ADD COLUMN IF NOT EXISTS temporary boolean NOT NULL DEFAULT false,
    ADD COLUMN IF NOT EXISTS output json,
    ALTER COLUMN payload DROP NOT NULL;
ALTER TABLE stategraph_runs DROP CONSTRAINT IF EXISTS stategraph_runs_multitask_check;
ALTER TABLE stategraph_runs ADD CONSTRAINT stategraph_runs_multitask_check
    CHECK (multitask IN ('reject', 'enqueue', 'interrupt', 'rollback'));
UPDATE stategraph_runs SET
    assistant_id = COALESCE(payload #>> '{run,assistant_id}', ''),
    metadata = CASE WHEN jsonb_typeof(payload #> '{run,metadata}') = 'object'
        THEN (payload #> '{run,metadata}')::json ELSE '{}' END,
    kwargs = CASE WHEN jsonb_typeof(payload #> '{run,kwargs}') = 'object'
        THEN (payload #> '{run,kwargs}')::json ELSE '{}' END,
    multitask = CASE WHEN payload #>> '{run,multitask_strategy}'
            IN ('reject', 'enqueue', 'interrupt', 'rollback')
        THEN payload #>> '{run,multitask_strategy}' ELSE 'enqueue' END,
    temporary = COALESCE(payload #> '{run,kwargs,temporary}' = 'true'::jsonb, false)
WHERE jsonb_typeof(payload -> 'run') = 'object'",
    // v5: errors and events as `json` (they carry user text too); the events of ended runs
    // purged while the runs stay, marked so, and the index a purge walks.
    "ALTER TABLE stategraph_runs
    ALTER COLUMN error TYPE json USING error::json,
    ADD COLUMN IF NOT EXISTS events_purged boolean NOT NULL DEFAULT false;
ALTER TABLE stategraph_run_events ALTER COLUMN data TYPE json USING data::json;
DROP INDEX IF EXISTS stategraph_runs_finished;
CREATE INDEX IF NOT EXISTS stategraph_runs_ended ON stategraph_runs (updated_at)
    WHERE status NOT IN ('pending', 'running') AND NOT events_purged",
    // v6: what each thread's last run (or state update) left it with.
    "CREATE TABLE IF NOT EXISTS stategraph_run_threads (
    thread_id text PRIMARY KEY,
    status text NOT NULL CHECK (status IN ('idle', 'busy', 'interrupted', 'error')),
    \"values\" json,
    interrupts json,
    error json,
    updated_at timestamptz NOT NULL DEFAULT now()
)",
];

/// The version a queue needs: the last of [`MIGRATIONS`].
pub(super) const LATEST: i32 = MIGRATIONS.len() as i32 - 1;
