SELECT h.hook_id, h.study_id, h.url, h.events, h.secret, h.created_by, h.created_micros,
       h.delivered_through, h.attempts, h.retrying_since, h.next_attempt_micros, h.failing,
       h.last_error,
       COALESCE((SELECT s.head FROM study_notice_heads s WHERE s.study_id = h.study_id), 0)
           AS head,
       -- Positions run without a gap: the first notice not delivered is the one after the cursor.
       (SELECT n.at_micros FROM study_notices n
        WHERE n.study_id = h.study_id AND n.position = h.delivered_through + 1)
           AS oldest_undelivered
FROM webhooks h
WHERE h.study_id = $1
  AND ($2 IS NULL OR h.hook_id = $2)
ORDER BY h.created_micros, h.hook_id
