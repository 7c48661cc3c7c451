-- The {views} part of a views' generation's append function: the view rows into its tables.
-- A template for Python's str.format (`adapters.backends.postgres.append`): {schema}, {name} and the
-- like are filled in, and doubled braces stand for one; each {insert_…} is the insert of a section's
-- rows, built from the tables' description (`adapters.backends.sql.views_statements.json_insert`)
-- as the Python writes are. These comment lines are not sent.
  IF v IS NULL OR (v->>'g')::bigint <> {generation} THEN
    RAISE EXCEPTION 'chatrecord: no view rows of generation {generation}';
  END IF;
  PERFORM pg_advisory_xact_lock_shared((v->>'lock')::bigint);
  IF (v->>'drop_aside')::boolean THEN
    DELETE FROM {entries} WHERE cid = k || ':turn';
  END IF;
  IF jsonb_array_length(v->'aside') > 0 THEN
    FOR j IN SELECT jsonb_array_elements(v->'aside') LOOP
      UPDATE {entries} SET cid = k || ':turn' WHERE cid = k AND seq = (j #>> '{{}}')::bigint;
    END LOOP;
  END IF;
  IF jsonb_array_length(v->'aside_rows') > 0 THEN
    {insert_aside_rows};
  END IF;
  IF jsonb_array_length(v->'delete_entries') > 0 THEN
    FOR j IN SELECT jsonb_array_elements(v->'delete_entries') LOOP
      DELETE FROM {entries} WHERE cid = k AND seq = (j #>> '{{}}')::bigint;
    END LOOP;
  END IF;
  IF jsonb_array_length(v->'entries') > 0 THEN
    {insert_entries};
  END IF;
  IF jsonb_typeof(v->'drop_outcomes') = 'object' THEN
    FOR j IN SELECT jsonb_array_elements(v->'drop_outcomes'->'cards') LOOP
      DELETE FROM {outcomes} WHERE cid = k AND card = j #>> '{{}}';
    END LOOP;
    d := (v->'drop_outcomes'->>'after')::bigint;  -- a variable: the outcomes table has a column v
    DELETE FROM {outcomes} WHERE cid = k AND card IS NULL AND after >= d;
  END IF;
  IF jsonb_array_length(v->'outcomes') > 0 THEN
    {insert_outcomes};
  END IF;
  IF jsonb_typeof(v->'cut') = 'number' THEN
    DELETE FROM {messages} WHERE cid = k AND idx >= (v->>'cut')::bigint;
  END IF;
  IF jsonb_array_length(v->'messages') > 0 THEN
    {insert_messages};
  END IF;
  IF jsonb_array_length(v->'ended') > 0 THEN
    {insert_ended};
  END IF;
  IF jsonb_array_length(v->'ends') > 0 THEN
    FOR j IN SELECT jsonb_array_elements(v->'ends') LOOP
      UPDATE {messages} SET block_end = (j->>1)::bigint WHERE cid = k AND idx = (j->>0)::bigint;
    END LOOP;
  END IF;
  IF jsonb_typeof(v->'drop_pages') = 'number' THEN
    DELETE FROM {pages} WHERE cid = k AND message > (v->>'drop_pages')::bigint;
  END IF;
  IF jsonb_array_length(v->'pages') > 0 THEN
    {insert_pages};
  END IF;
  IF jsonb_array_length(v->'turns') > 0 THEN
    {insert_turns};
  END IF;
  IF jsonb_array_length(v->'usage') > 0 THEN  -- empty for a generation without the table: never planned then
    {insert_usage};
  END IF;
  IF jsonb_typeof(v->'head') = 'array' THEN
    INSERT INTO {heads} (cid, version, body) VALUES (k, (v->'head'->>0)::bigint, v->'head'->>1) ON CONFLICT (cid) DO UPDATE SET version = excluded.version, body = excluded.body;
  END IF;
  IF jsonb_typeof(v->'listing') = 'array' THEN  -- absent for a generation without the table: never planned then
    {insert_listing};
  END IF;
