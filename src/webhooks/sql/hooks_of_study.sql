SELECT h.hook_id, h.study_id, h.url, h.events, h.secret, h.created_by, h.created_micros,
       h.delivered_through, h.attempts, h.retrying_since, h.next_attempt_micros, h.failing,
       h.last_error,
       (SELECT COALESCE(MAX(n.position), 0) FROM study_notices n WHERE n.study_id = h.study_id),
       (SELECT MIN(n.at_micros) FROM study_notices n
        WHERE n.study_id = h.study_id AND n.position > h.delivered_through)
FROM webhooks h
WHERE h.study_id = $1
  AND ($2 IS NULL OR h.hook_id = $2)
ORDER BY h.created_micros, h.hook_id
