DELETE FROM webhooks
WHERE study_id = $1
  AND hook_id = $2
