SELECT name, n
FROM study_overview
WHERE study_id = $1
  AND n > 0
