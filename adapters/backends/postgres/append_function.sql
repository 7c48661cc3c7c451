-- The append function: one JSON document (`AppendDocument`) in, the events' notification ids out.
-- A template for Python's str.format (`adapters.backends.postgres.append`): {schema}, {name} and the
-- like are filled in ({channel}: the library's channel, which its subscription LISTENs on), and
-- doubled braces stand for one. These comment lines are not sent.
CREATE OR REPLACE FUNCTION {schema}.{name}(doc jsonb) RETURNS SETOF bigint LANGUAGE plpgsql SET enable_seqscan = off AS $fn$
DECLARE
  k text := doc->>'cid';
  a jsonb := doc->'assumed';
  x jsonb := doc->'index';
  v jsonb := doc->'views';
  j jsonb;
  d bigint;
BEGIN
  IF a IS NOT NULL THEN
    -- one statement: each row it looks for is found by its whole key, in a subquery run per
    -- key (a scalar subquery is never made a join): a plan kept from when the tables were small
    -- must not read a conversation's every row (an ANY over the digests did, 5,000 rows at 2,500 segments)
    IF NOT EXISTS (SELECT 1 FROM {schema}.chatrecord_index WHERE cid = k AND version = (a->>'version')::bigint
                   AND outcomes = (a->>'count')::bigint)
       OR (a->>'tip' IS NOT NULL AND NOT EXISTS (SELECT 1 FROM {schema}.chatrecord_chain WHERE originator_id = k::uuid
                   AND originator_version = (a->>'version')::bigint AND hash = decode(a->>'tip', 'base64')))
       OR EXISTS (SELECT 1 FROM jsonb_array_elements_text(a->'digests') d(item)
                  WHERE (SELECT true FROM {schema}.chatrecord_sources WHERE cid = k AND digest = d.item))
       OR EXISTS (SELECT 1 FROM jsonb_array_elements_text(a->'segments') g(item)
                  WHERE (SELECT true FROM {schema}.chatrecord_segments WHERE cid = k AND segment = g.item))
       OR EXISTS (SELECT 1 FROM jsonb_array_elements_text(a->'runs') r(item)
                  WHERE (SELECT true FROM {schema}.chatrecord_segments WHERE cid = k AND run = r.item AND cut = 1 LIMIT 1))
       OR EXISTS (SELECT 1 FROM jsonb_array_elements(COALESCE(a->'records', '[]')) r(item)
                  WHERE (SELECT true FROM {schema}.chatrecord_segments WHERE cid = k AND segment = r.item->>0
                         AND body = r.item->>1) IS NULL)
       OR EXISTS (SELECT 1 FROM jsonb_array_elements(COALESCE(a->'live', '[]')) m(item)
                  WHERE (SELECT true FROM {schema}.chatrecord_messages WHERE cid = k AND number = (m.item->>0)::bigint
                         AND live = (m.item->>1)::int) IS NULL)
       -- the live segments from a message, the live messages after a number: as many as the
       -- writer knew (each of them checked above, exactly so); counted in the (cid, message) and
       -- (cid, number) indexes, over the few rows a recent edit's cut covers
       OR EXISTS (SELECT 1 FROM jsonb_array_elements(COALESCE(a->'from', '[]')) f(item)
                  WHERE (SELECT count(*) FROM {schema}.chatrecord_segments WHERE cid = k
                         AND message >= (f.item->>0)::bigint AND cut = 0) <> (f.item->>1)::bigint)
       OR EXISTS (SELECT 1 FROM jsonb_array_elements(COALESCE(a->'after', '[]')) n(item)
                  WHERE (SELECT count(*) FROM {schema}.chatrecord_messages WHERE cid = k
                         AND number > (n.item->>0)::bigint AND live = 1) <> (n.item->>1)::bigint) THEN
      RAISE EXCEPTION USING ERRCODE = 'RC001', MESSAGE = 'chatrecord: the index is not as the command assumed';
    END IF;
  END IF;
  IF x IS NOT NULL THEN
    IF jsonb_array_length(x->'sources') > 0 THEN
      INSERT INTO {schema}.chatrecord_sources (cid, digest, first, last)
        SELECT k, e->>0, (e->>1)::bigint, (e->>2)::bigint FROM jsonb_array_elements(x->'sources') e
        ON CONFLICT (cid, digest) DO UPDATE SET last = excluded.last;
    END IF;
    IF jsonb_array_length(x->'segments') > 0 THEN
      INSERT INTO {schema}.chatrecord_segments (cid, segment, run, message, version, cut, body)
        SELECT k, e->>0, e->>1, (e->>2)::bigint, (e->>3)::bigint, (e->>4)::int, e->>5 FROM jsonb_array_elements(x->'segments') e
        ON CONFLICT (cid, segment) DO UPDATE SET cut = excluded.cut, body = excluded.body;
    END IF;
    IF jsonb_array_length(x->'messages') > 0 THEN
      INSERT INTO {schema}.chatrecord_messages (cid, number, live)
        SELECT k, (e->>0)::bigint, (e->>1)::int FROM jsonb_array_elements(x->'messages') e
        ON CONFLICT (cid, number) DO UPDATE SET live = excluded.live;
    END IF;
    INSERT INTO {schema}.chatrecord_index (cid, version, outcomes) VALUES (k, (x->>'version')::bigint, (x->>'added')::bigint)
      ON CONFLICT (cid) DO UPDATE SET version = excluded.version,
      outcomes = {schema}.chatrecord_index.outcomes + excluded.outcomes;
  END IF;
{views}  LOCK TABLE {events} IN EXCLUSIVE MODE;
  NOTIFY {channel};
  -- each first link of the document (linked to GENESIS, at version 0 or 1) is the chain's start:
  -- the conversation has no link at the other of the two; else the append is sent as statements,
  -- which link version 1 to version 0 or refuse version 0 (`ChainedRecorder._chain_start`)
  IF doc ? 'starts' AND EXISTS (SELECT 1 FROM jsonb_array_elements(doc->'starts') s(item)
     WHERE (SELECT true FROM {schema}.chatrecord_chain WHERE originator_id = (s.item->>0)::uuid
            AND originator_version = 1 - (s.item->>1)::bigint)) THEN
    RAISE EXCEPTION USING ERRCODE = 'RC002', MESSAGE = 'chatrecord: the chain does not start here';
  END IF;
  RETURN QUERY INSERT INTO {events} (originator_id, originator_version, topic, state)
    SELECT (e->>0)::uuid, (e->>1)::bigint, e->>2, decode(e->>3, 'base64') FROM jsonb_array_elements(doc->'events') e
    RETURNING notification_id;
  INSERT INTO {schema}.chatrecord_chain (originator_id, originator_version, hash)
    SELECT (e->>0)::uuid, (e->>1)::bigint, decode(e->>2, 'base64') FROM jsonb_array_elements(doc->'chain') e;
END
$fn$;
