-- CEPs the ViaCEP upstream said do not exist, shared by every thread of
-- every coring host on this database (apps/cep's negative cache), each
-- until expires_at (--cep-negative-ttl after the answer). Written on the
-- primary (an upsert: asking again after expiry moves expires_at), read
-- with the addresses, on the read replica when there is one. A row past
-- expires_at is dead: it is overwritten when the CEP is asked again. The
-- table holds at most one row per distinct unknown CEP ever asked; an
-- operator may trim it with DELETE FROM cep_unknown WHERE expires_at < now().
CREATE TABLE cep_unknown (
    cep char(8) PRIMARY KEY CHECK (cep ~ '^[0-9]{8}$'),
    expires_at timestamptz NOT NULL
);
