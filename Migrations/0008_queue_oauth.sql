-- Courier 0008: OAuth2 client credentials per queue, and attempt rows for in-process retries.
--
--   1. A queue may carry OAuth2 client credentials (RFC 6749 §4.4): a token URL, a client id, a
--      client secret and optionally a scope and an audience. Workers then obtain a bearer token
--      from the token URL (one per token URL, client id, scope and audience, shared by every
--      delivery of the worker process, fetched again shortly before it expires or after a 401)
--      and send it as `Authorization: Bearer ...` with each request of the queue. The secret is
--      protected like `signing_secret`: the producer role cannot read courier.queues at all,
--      the CLI never prints it, and it is set only from a file or stdin.
--   2. courier.attempts.in_process marks a request the worker repeated inside one attempt (a
--      refused or reset connection retried after 0.1 s, a 401 retried with a fresh token), so
--      every request that reached the wire has its row and the history tells the receiver's
--      story; such a row keeps the attempt number of the attempt it belongs to.
--
-- Both are new columns without a volatile default: no table rewrite, instant on any size.

-- OAuth2 client credentials --------------------------------------------------------------------

ALTER TABLE courier.queues
    ADD COLUMN oauth_token_url text,
    ADD COLUMN oauth_client_id text,
    ADD COLUMN oauth_client_secret text,
    ADD COLUMN oauth_scope text,
    ADD COLUMN oauth_audience text,
    ADD CONSTRAINT queues_oauth_complete CHECK (
        (oauth_token_url IS NULL) = (oauth_client_id IS NULL)
        AND (oauth_token_url IS NULL) = (oauth_client_secret IS NULL)
        AND (oauth_token_url IS NOT NULL OR (oauth_scope IS NULL AND oauth_audience IS NULL))),
    ADD CONSTRAINT queues_oauth_valid CHECK (
        (oauth_token_url IS NULL OR (oauth_token_url ~ '^[Hh][Tt][Tt][Pp][Ss]?://[!-~]+$'
                                     AND octet_length(oauth_token_url) <= 2048))
        AND (oauth_client_id IS NULL OR (oauth_client_id ~ '^[ -~]+$' AND octet_length(oauth_client_id) <= 256))
        AND (oauth_client_secret IS NULL
             OR (oauth_client_secret ~ '^[ -~]+$' AND octet_length(oauth_client_secret) <= 1024))
        AND (oauth_scope IS NULL OR (oauth_scope ~ '^[ -~]+$' AND octet_length(oauth_scope) <= 1024))
        AND (oauth_audience IS NULL OR (oauth_audience ~ '^[ -~]+$' AND octet_length(oauth_audience) <= 1024)));
COMMENT ON CONSTRAINT queues_oauth_complete ON courier.queues IS
    'Token URL, client id and client secret are set together; scope and audience only with them.';
COMMENT ON CONSTRAINT queues_oauth_valid ON courier.queues IS
    'An http(s) token URL of printable ASCII; id, secret, scope and audience printable ASCII, bounded.';
COMMENT ON COLUMN courier.queues.oauth_token_url IS
    'OAuth2 token endpoint; requests of this queue carry a bearer token from it (client credentials).';
COMMENT ON COLUMN courier.queues.oauth_client_id IS 'OAuth2 client id, sent to the token endpoint.';
COMMENT ON COLUMN courier.queues.oauth_client_secret IS
    'OAuth2 client secret, sent to the token endpoint with HTTP Basic. Never shown.';
COMMENT ON COLUMN courier.queues.oauth_scope IS 'OAuth2 scope asked for (space-separated); NULL: the server default.';
COMMENT ON COLUMN courier.queues.oauth_audience IS 'Audience asked for (audience=), for servers that want one.';

-- In-process retries are attempts too -----------------------------------------------------------

ALTER TABLE courier.attempts ADD COLUMN in_process boolean NOT NULL DEFAULT false;
COMMENT ON COLUMN courier.attempts.in_process IS
    'True for a request the worker repeated within one attempt (refused or reset connection, 401 with a '
    'fresh token): it reached the wire but did not decide the job; the row of the same attempt with '
    'in_process false did.';
