INSERT INTO view_format (singleton, version)
VALUES (1, $1)
ON CONFLICT (singleton) DO UPDATE SET version = excluded.version
