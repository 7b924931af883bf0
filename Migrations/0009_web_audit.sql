-- Courier 0009: the audit log of the web console (`courier web`).
--
-- Every action taken in the console (pause or resume a queue, requeue one dead job or all that
-- match a filter, enable or disable a destination) writes one row here, in the transaction of
-- the change where the change is one statement, so a change is never without its row. The
-- console reads nothing from this table; operators read it with SQL:
--   SELECT at, who, client, action, target, jobs FROM courier.web_audit ORDER BY id DESC LIMIT 50;
-- Number 0007 belongs to another change; the migrator applies files in order and allows gaps.

CREATE TABLE courier.web_audit (
    id      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at      timestamptz NOT NULL DEFAULT now(),
    who     text NOT NULL,
    client  text NOT NULL,
    action  text NOT NULL,
    target  text NOT NULL,
    jobs    bigint NOT NULL DEFAULT 0,
    CONSTRAINT web_audit_who_bounded CHECK (octet_length(who) BETWEEN 1 AND 200),
    CONSTRAINT web_audit_client_bounded CHECK (octet_length(client) <= 200),
    CONSTRAINT web_audit_action_bounded CHECK (octet_length(action) BETWEEN 1 AND 100),
    CONSTRAINT web_audit_target_bounded CHECK (octet_length(target) <= 2000),
    CONSTRAINT web_audit_jobs_not_negative CHECK (jobs >= 0)
);
COMMENT ON TABLE courier.web_audit IS 'One row per action taken in the web console (courier web).';
COMMENT ON COLUMN courier.web_audit.id IS 'Order of the actions.';
COMMENT ON COLUMN courier.web_audit.at IS 'When the action was taken.';
COMMENT ON COLUMN courier.web_audit.who IS 'The name the operator gave when logging in.';
COMMENT ON COLUMN courier.web_audit.client IS 'The peer address of the request (a proxy''s, behind one).';
COMMENT ON COLUMN courier.web_audit.action IS
    'queue.pause, queue.resume, job.requeue, dead.requeue_all, destination.enable or destination.disable.';
COMMENT ON COLUMN courier.web_audit.target IS 'The queue, job id, destination or filter acted on.';
COMMENT ON COLUMN courier.web_audit.jobs IS 'How many jobs the action changed.';

CREATE INDEX web_audit_at_idx ON courier.web_audit (at);
COMMENT ON INDEX courier.web_audit_at_idx IS 'Finds the actions of a time range.';

-- The console connects as a member of courier_operator where the roles exist (0004): it may
-- add audit rows and read them, never change or delete them.
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'courier_operator') THEN
        GRANT SELECT, INSERT ON courier.web_audit TO courier_operator;
    END IF;
END;
$$;
