-- The function that raises a failed assumption (`ASSUMPTION_FUNCTION`), for a check sent as a statement.
-- A template for Python's str.format (`adapters.backends.postgres.append`): {schema} and {name} are
-- filled in. These comment lines are not sent.
CREATE OR REPLACE FUNCTION {schema}.{name}() RETURNS integer LANGUAGE plpgsql AS $fn$
BEGIN
  RAISE EXCEPTION USING ERRCODE = 'RC001', MESSAGE = 'chatrecord: the index is not as the command assumed';
END
$fn$;
