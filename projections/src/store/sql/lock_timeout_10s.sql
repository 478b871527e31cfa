SET LOCAL lock_timeout = '10s'
