SELECT h.hook_id, h.study_id
FROM webhooks h
WHERE h.failing = FALSE
  AND h.next_attempt_micros <= $1
  AND (h.lease_holder IS NULL OR h.lease_holder = $2 OR h.lease_until_micros < $1
       OR NOT EXISTS (SELECT 1 FROM runtime_processes p
                      WHERE p.process_id = h.lease_holder AND p.heartbeat_at >= $3))
  AND EXISTS (SELECT 1 FROM study_notice_heads s
              WHERE s.study_id = h.study_id AND s.head > h.delivered_through)
ORDER BY h.next_attempt_micros
LIMIT 200
