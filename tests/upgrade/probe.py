"""What a console answers about its data, as JSON on stdout: run with the code of one release
(``python probe.py`` from that release's checkout, its settings and database in the environment)
so the upgrade test can compare a release's answers with the next one's on the same data.

Only the standard API is used (every release has it): each list endpoint as the demo's operator,
every page, and a row count of each table. Self-contained on purpose: it imports nothing of the
tests, which an older release's checkout may not have.
"""

import json
import os
import sys

sys.path.insert(0, os.getcwd())
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")

import django

django.setup()

from django.contrib.auth import get_user_model  # noqa: E402
from django.db import connection  # noqa: E402
from rest_framework.test import APIClient  # noqa: E402

ENDPOINTS = [
    "tenants",
    "members",
    "audit",
    "fabrics",
    "sites",
    "site-links",
    "pools",
    "quotas",
    "reservations",
    "datasets",
    "designs",
    "telemetry/events",
]


def pages(client, path):
    items, url = [], f"/api/{path}/?page_size=500"
    while url:
        reply = client.get(url)
        assert reply.status_code == 200, (path, reply.status_code, reply.content[:300])
        body = reply.json()
        if isinstance(body, list):
            return body
        items += body["results"]
        url = body.get("next")
    return items


client = APIClient()
client.force_authenticate(get_user_model().objects.get(username="operator"))
answers = {path: pages(client, path) for path in ENDPOINTS}
with connection.cursor() as cursor:
    cursor.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename")
    tables = [row[0] for row in cursor.fetchall()]
    counts = {}
    for table in tables:
        cursor.execute(f'SELECT count(*) FROM "{table}"')  # noqa: S608 (names from the catalog)
        counts[table] = cursor.fetchone()[0]
json.dump({"answers": answers, "counts": counts}, sys.stdout, sort_keys=True, default=str)
