"""The service's jobs, and what retests and release ranges say of a bug.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-07
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "jobs",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("args", sa.Text, nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("worker", sa.Text),
        sa.Column("log", sa.Text),
        sa.Column("result", sa.Text),
        sa.Column("parent_id", sa.Integer, sa.ForeignKey("jobs.id")),
        sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id")),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("started_at", sa.Float),
        sa.Column("finished_at", sa.Float),
    )
    op.create_index("ix_jobs_state", "jobs", ["state", "id"])
    op.create_index("ix_jobs_parent", "jobs", ["parent_id"])
    with op.batch_alter_table("bugs") as bugs:
        bugs.add_column(sa.Column("retest", sa.Text))  # JSON: the last retest's verdict, versions, time
        bugs.add_column(sa.Column("release_range", sa.Text))  # JSON: the releases tried, the range


def downgrade() -> None:
    with op.batch_alter_table("bugs") as bugs:
        bugs.drop_column("release_range")
        bugs.drop_column("retest")
    op.drop_index("ix_jobs_parent", "jobs")
    op.drop_index("ix_jobs_state", "jobs")
    op.drop_table("jobs")
