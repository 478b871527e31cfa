SELECT study_id, name, n
FROM study_overview
