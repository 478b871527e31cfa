INSERT INTO access_log (seq, at_micros, researcher, researcher_id, method, route, study_id,
                        session_id, detail, status, address, request_id, prev_hash, hash)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
