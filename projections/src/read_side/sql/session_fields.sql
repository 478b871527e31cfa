SELECT field_id, value
FROM session_fields
WHERE session_id = $1
