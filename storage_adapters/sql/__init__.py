"""The SQL adapters (PostgreSQL and SQLite): one storage class over SQLAlchemy Core, a module
per family of the contract, and PostgreSQL's transactional release."""
