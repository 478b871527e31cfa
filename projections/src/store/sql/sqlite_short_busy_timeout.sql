PRAGMA busy_timeout = 50
