-- Scheduler (SQLite 0002): durable schedules, runner leases, run history.
-- schedule_runs.rowid is an identity column standing in for SQLite's implicit rowid,
-- the tie-breaker of runs started at the same time (insertion order).

CREATE TABLE schedules (
    schedule_id          text COLLATE "C" PRIMARY KEY,
    user_id              text COLLATE "C" NOT NULL,
    name                 text COLLATE "C",
    goal                 text COLLATE "C" NOT NULL,
    cadence_json         text COLLATE "C" NOT NULL,
    notification_policy  text COLLATE "C" NOT NULL DEFAULT 'always'
                         CHECK (notification_policy IN ('always', 'on_failure', 'never')),
    status               text COLLATE "C" NOT NULL DEFAULT 'active'
                         CHECK (status IN ('active', 'paused', 'completed')),
    created_at           text COLLATE "C" NOT NULL,
    updated_at           text COLLATE "C" NOT NULL,
    next_run_at          text COLLATE "C",
    last_run_at          text COLLATE "C",
    last_run_status      text COLLATE "C",
    consecutive_failures integer NOT NULL DEFAULT 0,
    channel_id           text COLLATE "C",
    channel_context_id   text COLLATE "C",
    claim_token          text COLLATE "C",
    claimed_by           text COLLATE "C",
    claim_expires_at     text COLLATE "C"
);
CREATE INDEX idx_schedules_user ON schedules (user_id);
CREATE INDEX idx_schedules_due ON schedules (next_run_at) WHERE status = 'active';
CREATE INDEX idx_schedules_user_status ON schedules (user_id, status);
CREATE INDEX idx_schedules_user_name ON schedules (user_id, name);

CREATE TABLE schedule_runs (
    rowid          bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    run_id         text COLLATE "C" PRIMARY KEY,
    schedule_id    text COLLATE "C" NOT NULL REFERENCES schedules (schedule_id) ON DELETE CASCADE,
    scheduled_for  text COLLATE "C",
    started_at     text COLLATE "C" NOT NULL,
    finished_at    text COLLATE "C" NOT NULL,
    status         text COLLATE "C" NOT NULL CHECK (status IN ('succeeded', 'failed')),
    output_summary text COLLATE "C",
    output         text COLLATE "C",
    turn_count     integer NOT NULL DEFAULT 0,
    cost           double precision NOT NULL DEFAULT 0.0,
    notified       integer NOT NULL DEFAULT 0,
    UNIQUE (schedule_id, scheduled_for)
);
CREATE INDEX idx_schedule_runs_schedule_started
    ON schedule_runs (schedule_id, started_at DESC);
