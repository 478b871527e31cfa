DELETE FROM participant_link_secrets
WHERE study_id = $1
