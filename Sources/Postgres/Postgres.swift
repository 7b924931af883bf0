// Postgres
