SELECT version
FROM view_format
WHERE singleton = 1
