SELECT study_id, contribution
FROM session_overview
