"""Raw SQL pieces of the reserve path's one write (:func:`.snapshots.write_allocations`): a new
row's INSERT compiled as ``save`` would, and integer arrays as one text parameter."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db import connection
from django.db.models import Model
from django.db.models.sql import InsertQuery


def insert_of(row: Model) -> tuple[str, list[Any]]:
    """The INSERT statement of a new model row (its primary key given: no RETURNING), compiled as
    ``save`` would (``auto_now`` fields set on ``row``), for :func:`.snapshots.write_allocations`."""
    fields = [f for f in row._meta.concrete_fields if not (f.primary_key and row.pk is None)]
    query = InsertQuery(type(row))
    query.insert_values(fields, [row])
    ((sql, params),) = query.get_compiler(connection=connection).as_sql()
    return sql, list(params)


def int_array(values: Iterable[int]) -> str:
    """A PostgreSQL array literal of integers (``{1,2,3}``; the statement casts it): one text
    parameter instead of a list psycopg adapts element by element (a grant's 128 GPUs)."""
    return "{" + ",".join(str(int(v)) for v in values) + "}"
