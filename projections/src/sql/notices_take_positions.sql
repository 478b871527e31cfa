INSERT INTO study_notice_heads (study_id, head)
VALUES ($1, $2)
ON CONFLICT (study_id) DO UPDATE SET head = study_notice_heads.head + excluded.head
RETURNING head
