//! PostgreSQL adapter of QueueBox (sqlx): migrations, schema guard and every statement.
