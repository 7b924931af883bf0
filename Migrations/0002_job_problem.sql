-- Courier 0002: validation that reports instead of raising, for the bulk loader.
--
-- `courier enqueue --jsonl` stages many jobs at once and must name every bad line, not stop at
-- the first. This wraps courier.validate_job (the one definition of a valid job, shared with
-- courier.enqueue) and returns its message instead of raising it.

CREATE FUNCTION courier.job_problem(
    url text, method text, headers jsonb, queue text, body_size integer, max_attempts integer,
    priority integer, retry_schedule interval[], idempotency_key text, run_at timestamptz
) RETURNS text
LANGUAGE plpgsql STABLE PARALLEL SAFE AS $$
BEGIN
    PERFORM courier.validate_job(url, method, headers, queue, body_size, max_attempts, priority,
                                 retry_schedule, idempotency_key, run_at);
    RETURN NULL;
EXCEPTION WHEN invalid_parameter_value THEN
    RETURN SQLERRM;
END;
$$;
COMMENT ON FUNCTION courier.job_problem(text, text, jsonb, text, integer, integer, integer, interval[], text, timestamptz) IS
    'NULL when courier.validate_job accepts the job, else its error message; used by the bulk loader.';
