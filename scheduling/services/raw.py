"""Raw SQL pieces of the reserve path: a cursor whose statements PostgreSQL keeps planned, a
model's columns and its instance from a row read with them, a new row's INSERT compiled as
``save`` would (for :func:`.snapshots.write_allocations`), and integer arrays as one text
parameter."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

from django.db import connection
from django.db.backends.utils import CursorDebugWrapper, CursorWrapper
from django.db.models import Model
from django.db.models.sql import InsertQuery

M = TypeVar("M", bound=Model)


def prepared_cursor() -> CursorWrapper:
    """A cursor for the hot paths' statements of cached text (the reserve path, the queue pass):
    on PostgreSQL its parameters are bound on the server, so psycopg prepares a statement once it
    has run ``prepare_threshold`` times on the connection (``CONSOLE_DB_PREPARE_THRESHOLD``) and
    PostgreSQL stops parsing and planning it on every run (0.9 ms of the pool read's 1.5). Django's
    own cursors bind on the client and are never prepared, so nothing else changes. Wrapped as
    ``connection.cursor()`` wraps: the same error translation and execute wrappers."""
    if connection.vendor != "postgresql":
        return connection.cursor()
    import psycopg  # only on PostgreSQL

    connection.close_if_health_check_failed()
    connection.ensure_connection()
    connection.validate_thread_sharing()
    raw = psycopg.Cursor(connection.connection)  # what Django's cursor is with server_side_binding
    return _Logged(raw, connection) if connection.queries_logged else CursorWrapper(raw, connection)


class _Logged(CursorDebugWrapper):
    """Django's logging cursor, logging each statement's text as given (with its parameters
    apart): Django reads the statement back from a cursor that binds on the client, and from this
    one it reads nothing."""

    @contextlib.contextmanager
    def debug_sql(
        self, sql: str | None = None, params: Any = None, use_last_executed_query: bool = False, many: bool = False
    ) -> Iterator[None]:
        with super().debug_sql(sql, params, use_last_executed_query=False, many=many):
            yield


def table(model: type[Model]) -> str:
    """The model's table, quoted."""
    return connection.ops.quote_name(model._meta.db_table)


def columns(model: type[Model], alias: str) -> str:
    """The model's concrete columns, in field order, of the table aliased ``alias``."""
    return ", ".join(f"{alias}.{connection.ops.quote_name(f.column)}" for f in model._meta.concrete_fields)


def row_instance(model: type[M], values: list[Any]) -> M:
    """The model instance of the row's first values (read with :func:`columns`; taken off
    ``values``), each value through its field's converters as the ORM's select would (a JSON
    field's text decoded)."""
    converters = _converters(model)
    taken = values[: len(converters)]
    del values[: len(converters)]
    for i, (column, functions) in enumerate(converters):
        for convert in functions:
            taken[i] = convert(taken[i], column, connection)
    return model.from_db(connection.alias, [f.attname for f in model._meta.concrete_fields], taken)


@functools.cache
def _converters(model: type[Model]) -> list[tuple[Any, list[Any]]]:
    out = []
    for field in model._meta.concrete_fields:
        column = field.get_col(model._meta.db_table)
        own = field.get_db_converters(connection)  # type: ignore[attr-defined]  # Field's, not in the stubs
        out.append((column, connection.ops.get_db_converters(column) + own))
    return out


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
