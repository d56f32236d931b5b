"""Alembic's environment: run the migrations on the connection `e2e.service.store.migrate` hands it."""

from alembic import context

from e2e.service.schema import metadata

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
