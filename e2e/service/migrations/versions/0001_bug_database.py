"""The bug database: runs, pairs, results, bugs and their bundles, events, flaky pairs.

Revision ID: 0001
Revises:
Create Date: 2026-12-07
"""

from alembic import op

from e2e.service.schema import metadata

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

# The tables as this revision made them. A later revision changes them with `op.*` calls of
# its own and leaves this one as it is.
TABLES = ("runs", "pairs", "signatures", "blobs", "bugs", "bundles", "results", "bug_runs", "events", "flaky")


def upgrade() -> None:
    bind = op.get_bind()
    metadata.create_all(bind, tables=[metadata.tables[name] for name in TABLES])


def downgrade() -> None:
    bind = op.get_bind()
    metadata.drop_all(bind, tables=[metadata.tables[name] for name in reversed(TABLES)])
