-- The todos of apps/todo on --todo-store postgres. Ids come from an
-- identity column (a sequence): unique across every process on the
-- database, increasing, not consecutive (a failed insert uses one up).
-- Titles are checked by the app as well (1 to 1,000 bytes of UTF-8).
CREATE TABLE todos (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    title text NOT NULL CHECK (octet_length(title) BETWEEN 1 AND 1000),
    completed boolean NOT NULL DEFAULT false
);

-- How many rows todos holds, kept by triggers whoever writes (the app,
-- psql, a TRUNCATE), so that a POST checks --todo-max-items without
-- counting the table: it inserts only while sum(n) is below the limit.
-- The count is spread over 64 rows (a todo counts in row id % 64) so that
-- concurrent inserts do not queue on one row lock: with a single row,
-- every insert held it until its commit (pgbench, 16 clients, fsync on:
-- 250-360 inserts/s against 1,660-2,040 without a count; 1,170-1,290
-- with 64 rows). The check reads committed counts, so inserts running at
-- the same moment may pass it together: the table can exceed the limit by
-- at most the inserts in flight at once (one per database connection).
CREATE TABLE todo_count (
    slot int PRIMARY KEY CHECK (slot BETWEEN 0 AND 63),
    n bigint NOT NULL
);
INSERT INTO todo_count (slot, n) SELECT s, 0 FROM generate_series(0, 63) s;

CREATE FUNCTION todo_count_rows() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        UPDATE todo_count SET n = n + 1 WHERE slot = NEW.id % 64;
    ELSIF TG_OP = 'DELETE' THEN
        UPDATE todo_count SET n = n - 1 WHERE slot = OLD.id % 64;
    ELSE
        UPDATE todo_count SET n = 0;
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER todos_counted AFTER INSERT OR DELETE ON todos
    FOR EACH ROW EXECUTE FUNCTION todo_count_rows();
CREATE TRIGGER todos_truncated AFTER TRUNCATE ON todos
    FOR EACH STATEMENT EXECUTE FUNCTION todo_count_rows();
