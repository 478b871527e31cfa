SELECT seq, hash
FROM access_log
ORDER BY seq DESC
LIMIT 1
