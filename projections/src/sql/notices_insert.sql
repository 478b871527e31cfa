INSERT INTO study_notices (study_id, position, kind, session_id, sequence, at_micros)
VALUES ($1, $2, $3, $4, $5, $6)
