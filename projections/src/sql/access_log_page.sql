SELECT seq, at_micros, researcher, researcher_id, method, route, study_id, session_id, detail,
       status, address, request_id, prev_hash, hash
FROM access_log
WHERE ($1 IS NULL OR study_id = $1)
  AND ($2 IS NULL OR researcher = $2)
  AND at_micros >= $3
  AND at_micros < $4
  AND seq > $5
ORDER BY seq
LIMIT $6
