-- Scheduler: durable schedules and their run history (the seed's tables), plus:
--  * a runner lease on schedules (claim_token, claimed_by, claim_expires_at): a runner
--    takes a due occurrence with one conditional UPDATE, so two runners on this file
--    never fire the same occurrence; an expired lease (a crashed runner) can be retaken.
--  * schedule_runs.scheduled_for: the occurrence a run fired for (NULL for manual runs),
--    UNIQUE per schedule so the same occurrence can never be recorded twice.
--  * CHECK constraints on the enumerated text columns.
-- Timestamps are ISO-8601 UTC text with microseconds, so text order is time order.

CREATE TABLE schedules (
    schedule_id          TEXT PRIMARY KEY,
    user_id              TEXT NOT NULL,
    name                 TEXT,
    goal                 TEXT NOT NULL,
    cadence_json         TEXT NOT NULL,
    notification_policy  TEXT NOT NULL DEFAULT 'always'
                         CHECK (notification_policy IN ('always', 'on_failure', 'never')),
    status               TEXT NOT NULL DEFAULT 'active'
                         CHECK (status IN ('active', 'paused', 'completed')),
    created_at           TEXT NOT NULL,
    updated_at           TEXT NOT NULL,
    next_run_at          TEXT,
    last_run_at          TEXT,
    last_run_status      TEXT,
    consecutive_failures INTEGER NOT NULL DEFAULT 0,
    channel_id           TEXT,
    channel_context_id   TEXT,
    claim_token          TEXT,
    claimed_by           TEXT,
    claim_expires_at     TEXT
);
CREATE INDEX idx_schedules_user ON schedules (user_id);
CREATE INDEX idx_schedules_due ON schedules (next_run_at) WHERE status = 'active';
CREATE INDEX idx_schedules_user_status ON schedules (user_id, status);
CREATE INDEX idx_schedules_user_name ON schedules (user_id, name);

CREATE TABLE schedule_runs (
    run_id         TEXT PRIMARY KEY,
    schedule_id    TEXT NOT NULL,
    scheduled_for  TEXT,
    started_at     TEXT NOT NULL,
    finished_at    TEXT NOT NULL,
    status         TEXT NOT NULL CHECK (status IN ('succeeded', 'failed')),
    output_summary TEXT,
    output         TEXT,
    turn_count     INTEGER NOT NULL DEFAULT 0,
    cost           REAL NOT NULL DEFAULT 0.0,
    notified       INTEGER NOT NULL DEFAULT 0,
    FOREIGN KEY (schedule_id) REFERENCES schedules (schedule_id) ON DELETE CASCADE,
    UNIQUE (schedule_id, scheduled_for)
);
CREATE INDEX idx_schedule_runs_schedule_started ON schedule_runs (schedule_id, started_at DESC);
