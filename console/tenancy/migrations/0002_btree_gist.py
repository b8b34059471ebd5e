"""Enable btree_gist on PostgreSQL: exclusion constraints over (GPU, time range) need it.

A no-op on SQLite (embedded mode), where writers are serialised instead.
"""

from django.contrib.postgres.operations import BtreeGistExtension
from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("tenancy", "0001_initial")]
    operations = [BtreeGistExtension()]
