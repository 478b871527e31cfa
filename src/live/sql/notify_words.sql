SELECT pg_notify($1, payload)
FROM unnest($2::text[]) AS payload
