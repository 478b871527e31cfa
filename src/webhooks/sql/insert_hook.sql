INSERT INTO webhooks (hook_id, study_id, url, events, secret, created_by, created_micros,
                      delivered_through, next_attempt_micros)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $7)
