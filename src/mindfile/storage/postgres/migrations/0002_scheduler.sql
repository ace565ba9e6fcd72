-- Scheduler (SQLite 0002): durable schedules, runner leases, run history.
-- schedule_runs.rowid is an identity column standing in for SQLite's implicit rowid,
-- the tie-breaker of runs started at the same time (insertion order).

CREATE TABLE schedules (
    schedule_id          text PRIMARY KEY,
    user_id              text NOT NULL,
    name                 text,
    goal                 text NOT NULL,
    cadence_json         text NOT NULL,
    notification_policy  text NOT NULL DEFAULT 'always'
                         CHECK (notification_policy IN ('always', 'on_failure', 'never')),
    status               text NOT NULL DEFAULT 'active'
                         CHECK (status IN ('active', 'paused', 'completed')),
    created_at           text NOT NULL,
    updated_at           text NOT NULL,
    next_run_at          text,
    last_run_at          text,
    last_run_status      text,
    consecutive_failures integer NOT NULL DEFAULT 0,
    channel_id           text,
    channel_context_id   text,
    claim_token          text,
    claimed_by           text,
    claim_expires_at     text
);
CREATE INDEX idx_schedules_user ON schedules (user_id);
CREATE INDEX idx_schedules_due ON schedules (next_run_at) WHERE status = 'active';
CREATE INDEX idx_schedules_user_status ON schedules (user_id, status);
CREATE INDEX idx_schedules_user_name ON schedules (user_id, name);

CREATE TABLE schedule_runs (
    rowid          bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    run_id         text PRIMARY KEY,
    schedule_id    text NOT NULL REFERENCES schedules (schedule_id) ON DELETE CASCADE,
    scheduled_for  text,
    started_at     text NOT NULL,
    finished_at    text NOT NULL,
    status         text NOT NULL CHECK (status IN ('succeeded', 'failed')),
    output_summary text,
    output         text,
    turn_count     integer NOT NULL DEFAULT 0,
    cost           double precision NOT NULL DEFAULT 0.0,
    notified       integer NOT NULL DEFAULT 0,
    UNIQUE (schedule_id, scheduled_for)
);
CREATE INDEX idx_schedule_runs_schedule_started
    ON schedule_runs (schedule_id, started_at DESC);
