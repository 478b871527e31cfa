UPDATE webhooks
SET lease_holder = NULL, lease_until_micros = NULL
WHERE lease_holder IS NOT NULL
