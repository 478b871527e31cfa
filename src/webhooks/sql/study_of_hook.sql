SELECT study_id
FROM webhooks
WHERE hook_id = $1
