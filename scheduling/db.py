"""Database helpers PostgreSQL has and SQLite (embedded mode) does not.

The exclusion constraint that makes double booking impossible needs ``btree_gist`` (enabled by
``tenancy.0002_btree_gist``). SQLite cannot express it; there, ``BEGIN IMMEDIATE`` serialises
writers and the reservation service re-checks overlaps under that lock, so the invariant holds
by construction rather than by constraint.
"""

from __future__ import annotations

from django.contrib.postgres.fields import RangeBoundary, RangeOperators
from django.db import migrations, models
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.state import ProjectState


class TsTzRange(models.Func):
    """``tstzrange(start, end, '[)')``: the half-open window of an allocation."""

    function = "TSTZRANGE"
    output_field = models.DateTimeField()

    def __init__(self, start: str, end: str) -> None:
        super().__init__(models.F(start), models.F(end), RangeBoundary())


OVERLAPS = RangeOperators.OVERLAPS
EQUAL = RangeOperators.EQUAL


class AddConstraintOnPostgres(migrations.AddConstraint):
    """``AddConstraint`` that touches the database only on PostgreSQL.

    The migration state always carries the constraint (so ``makemigrations --check`` agrees with
    the model); SQLite just never gets the DDL it cannot parse.
    """

    def database_forwards(
        self, app_label: str, schema_editor: BaseDatabaseSchemaEditor, from_state: ProjectState, to_state: ProjectState
    ) -> None:
        if schema_editor.connection.vendor == "postgresql":
            super().database_forwards(app_label, schema_editor, from_state, to_state)

    def database_backwards(
        self, app_label: str, schema_editor: BaseDatabaseSchemaEditor, from_state: ProjectState, to_state: ProjectState
    ) -> None:
        if schema_editor.connection.vendor == "postgresql":
            super().database_backwards(app_label, schema_editor, from_state, to_state)
