SELECT COALESCE(MIN(position), (SELECT COALESCE(MAX(head), 0) + 1 FROM study_notice_heads WHERE study_id = $1))
FROM study_notices
WHERE study_id = $1
  AND at_micros >= $2
