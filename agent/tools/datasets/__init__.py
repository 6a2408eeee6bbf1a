"""Datasets: CSV/JSON/Parquet/SQL sources loaded into an in-memory, read-only SQLite per session."""
