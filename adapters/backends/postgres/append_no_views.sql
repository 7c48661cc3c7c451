-- The {views} part of the append function of no views' generation (`APPEND_FUNCTION`).
-- A template for Python's str.format (`adapters.backends.postgres.append`): {schema}, {name} and the
-- like are filled in, and doubled braces stand for one. These comment lines are not sent.
  IF v IS NOT NULL THEN
    RAISE EXCEPTION 'chatrecord: view rows for the function of no generation';
  END IF;
