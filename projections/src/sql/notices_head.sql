SELECT COALESCE((SELECT head FROM study_notice_heads WHERE study_id = $1), 0)
