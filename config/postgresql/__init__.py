"""Django's PostgreSQL backend, reading timestamps with psycopg's C loader (see base.py)."""
