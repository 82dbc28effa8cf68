"""recipe studies: searches of the recipe space (Optuna) and their trials, each linked to a job and a run

Optuna keeps its own tables (``studies``, ``trials``, ...) in the same database, created by
Optuna itself; these two are LatencyLab's view of a study: its definition, status and every
trial's job, run, measured values, feasibility and the estimator's prediction.

Revision ID: 0008_optimize
Revises: 0007_scale
Create Date: 2026-12-01 12:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008_optimize"
down_revision = "0007_scale"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "recipe_studies",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("name", sa.String(length=200), nullable=False, unique=True),
        sa.Column("optuna_name", sa.String(length=200), nullable=False, unique=True),
        sa.Column("definition_json", sa.Text(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("note", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("submitted_by", sa.String(length=200), nullable=True),
        sa.Column("lock_owner", sa.String(length=200), nullable=True),
        sa.Column("lock_until", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_index("ix_recipe_studies_status", "recipe_studies", ["status"])
    op.create_table(
        "recipe_study_trials",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("study_id", sa.Integer(), sa.ForeignKey("recipe_studies.id", ondelete="CASCADE"), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("params_json", sa.Text(), nullable=False),
        sa.Column("fingerprint", sa.String(length=32), nullable=True),
        sa.Column("job_id", sa.Integer(), nullable=True),
        sa.Column("run_id", sa.Integer(), nullable=True),
        sa.Column("reused", sa.Boolean(), nullable=False, server_default=sa.false()),
        sa.Column("attempts", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("values_json", sa.Text(), nullable=True),
        sa.Column("measured_json", sa.Text(), nullable=True),
        sa.Column("constraints_json", sa.Text(), nullable=True),
        sa.Column("feasible", sa.Boolean(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("predicted_json", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("study_id", "number", name="uq_recipe_study_trials_number"),
    )
    op.create_index("ix_recipe_study_trials_study_id", "recipe_study_trials", ["study_id"])
    op.create_index("ix_recipe_study_trials_job_id", "recipe_study_trials", ["job_id"])


def downgrade() -> None:
    op.drop_index("ix_recipe_study_trials_job_id", table_name="recipe_study_trials")
    op.drop_index("ix_recipe_study_trials_study_id", table_name="recipe_study_trials")
    op.drop_table("recipe_study_trials")
    op.drop_index("ix_recipe_studies_status", table_name="recipe_studies")
    op.drop_table("recipe_studies")
