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
-- psql, a TRUNCATE), so that a POST checks --todo-max-items in O(1): it
-- locks this row (SELECT ... FOR UPDATE) and inserts only while n is
-- below the limit. The lock is held until the insert's commit, so POSTs
-- and DELETEs take it in turn, across every process on the database.
CREATE TABLE todo_count (
    one boolean PRIMARY KEY DEFAULT true CHECK (one),
    n bigint NOT NULL CHECK (n >= 0)
);
INSERT INTO todo_count (n) VALUES (0);

CREATE FUNCTION todo_count_rows() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        UPDATE todo_count SET n = n + 1;
    ELSIF TG_OP = 'DELETE' THEN
        UPDATE todo_count SET n = n - 1;
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
