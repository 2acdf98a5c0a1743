-- The users of apps/users. Ids come from an identity column; emails are
-- unique without regard to case. Lengths are checked by the app as well.
CREATE TABLE users (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name text NOT NULL CHECK (length(name) BETWEEN 1 AND 100),
    email text NOT NULL CHECK (length(email) BETWEEN 3 AND 254 AND position('@' in email) > 1),
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX users_email_key ON users (lower(email));
