-- The Idempotency-Key of every POST that created something (apps/users,
-- apps/todo on --todo-store postgres), shared by every coring host on this
-- database: a retry with the same key, from any host and across a
-- failover, gets the first answer back instead of creating a second row
-- (apps/idempotency.c; docs/users.md, "Idempotency-Key"). A row is written
-- by the same statement that inserts the resource, so the two commit
-- together or not at all. fingerprint is sha256 of the request's fields as
-- the app canonicalises them; status, location and body are the answer
-- sent, replayed byte for byte. Kept at least 24 hours (created_at): each
-- keyed POST deletes up to 4 of the oldest rows past that, so the table
-- holds about a day of keyed POSTs; an operator may trim it with DELETE
-- FROM idempotency_keys WHERE created_at < now() - interval '24 hours'.
CREATE TABLE idempotency_keys (
    scope text NOT NULL,
    key text NOT NULL CHECK (octet_length(key) BETWEEN 1 AND 255),
    fingerprint bytea NOT NULL,
    status int NOT NULL,
    location text,
    body text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (scope, key)
);
CREATE INDEX idempotency_keys_created_at ON idempotency_keys (created_at);
