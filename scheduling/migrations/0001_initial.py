"""Inventory, pools, quotas, reservations and their allocations (no double booking)."""

import django.contrib.postgres.constraints
import django.db.models.deletion
import scheduling.db
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('fabric', '0002_change_pipeline'),
        ('tenancy', '0002_btree_gist'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='Node',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('name', models.CharField(max_length=64)),
                ('node_type', models.CharField(blank=True, max_length=40)),
                ('su', models.IntegerField(default=-1, help_text='scalable unit (-1: none)')),
                ('rack', models.CharField(blank=True, max_length=32)),
                ('state', models.CharField(choices=[('available', 'Available'), ('draining', 'Draining'), ('down', 'Down'), ('off', 'powered off')], default='available', max_length=10)),
                ('gpu_model', models.CharField(blank=True, max_length=40)),
                ('gpus', models.PositiveSmallIntegerField(default=0)),
                ('fabric', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='nodes', to='fabric.fabric')),
            ],
            options={
                'ordering': ['fabric', 'name'],
            },
        ),
        migrations.CreateModel(
            name='HCA',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('index', models.PositiveSmallIntegerField(help_text='0-based node port (HCA) number')),
                ('rail', models.SmallIntegerField(default=-1)),
                ('port_guid', models.CharField(help_text='0x-prefixed, 16 hex digits', max_length=18)),
                ('leaf', models.CharField(blank=True, max_length=64)),
                ('leaf_port', models.PositiveSmallIntegerField(blank=True, null=True)),
                ('node', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='hcas', to='scheduling.node')),
            ],
            options={
                'ordering': ['node', 'index'],
            },
        ),
        migrations.CreateModel(
            name='GPU',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('index', models.PositiveSmallIntegerField()),
                ('model', models.CharField(blank=True, max_length=40)),
                ('memory_gb', models.PositiveIntegerField(default=0)),
                ('health', models.CharField(choices=[('ok', 'Ok'), ('degraded', 'Degraded'), ('failed', 'Failed')], default='ok', max_length=10)),
                ('node', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='gpu_set', to='scheduling.node')),
            ],
            options={
                'ordering': ['node', 'index'],
            },
        ),
        migrations.CreateModel(
            name='Pool',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('name', models.CharField(max_length=64)),
                ('kind', models.CharField(choices=[('by_model', 'by GPU model'), ('by_su', 'by scalable unit'), ('manual', 'Manual')], default='manual', max_length=10)),
                ('description', models.TextField(blank=True)),
                ('version', models.PositiveIntegerField(default=1)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('fabric', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='pools', to='fabric.fabric')),
                ('nodes', models.ManyToManyField(blank=True, related_name='pools', to='scheduling.node')),
            ],
            options={
                'ordering': ['fabric', 'name'],
            },
        ),
        migrations.CreateModel(
            name='Quota',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('guaranteed_gpus', models.PositiveIntegerField(default=0)),
                ('borrow_limit_gpus', models.PositiveIntegerField(default=0)),
                ('guaranteed_leaf_groups', models.PositiveSmallIntegerField(blank=True, null=True)),
                ('updated_at', models.DateTimeField(auto_now=True)),
                ('pool', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='quotas', to='scheduling.pool')),
                ('tenant', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to='tenancy.tenant')),
            ],
            options={
                'ordering': ['pool', 'tenant'],
            },
        ),
        migrations.CreateModel(
            name='Reservation',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('name', models.CharField(blank=True, max_length=100)),
                ('status', models.CharField(choices=[('requested', 'Requested'), ('placed', 'Placed'), ('provisioning', 'Provisioning'), ('ready', 'Ready'), ('ending', 'Ending'), ('released', 'Released'), ('rejected', 'Rejected'), ('preempted', 'Preempted'), ('cancelled', 'Cancelled')], default='requested', max_length=12)),
                ('priority_class', models.CharField(choices=[('training', 'Training'), ('inference', 'Inference'), ('best-effort', 'Best Effort')], default='training', max_length=12)),
                ('requested_gpus', models.PositiveIntegerField(blank=True, null=True)),
                ('requested_nodes', models.PositiveIntegerField(blank=True, null=True)),
                ('gpu_model', models.CharField(blank=True, max_length=40)),
                ('same_leaf', models.BooleanField(default=False)),
                ('max_switch_hops', models.PositiveSmallIntegerField(blank=True, null=True)),
                ('rail_aligned', models.BooleanField(default=False)),
                ('start', models.DateTimeField()),
                ('end', models.DateTimeField()),
                ('gpus', models.PositiveIntegerField(default=0)),
                ('borrowed', models.BooleanField(default=False)),
                ('pkey', models.PositiveIntegerField(blank=True, null=True)),
                ('pkey_live', models.BooleanField(default=False)),
                ('sl', models.PositiveSmallIntegerField(default=0)),
                ('placement', models.JSONField(blank=True, default=dict)),
                ('reason', models.TextField(blank=True)),
                ('explanation', models.JSONField(blank=True, default=dict)),
                ('fabric_error', models.TextField(blank=True)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('updated_at', models.DateTimeField(auto_now=True)),
                ('ready_at', models.DateTimeField(blank=True, null=True)),
                ('ended_at', models.DateTimeField(blank=True, null=True)),
                ('created_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('fabric', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to='fabric.fabric')),
                ('pool', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='reservations', to='scheduling.pool')),
                ('tenant', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to='tenancy.tenant')),
            ],
            options={
                'ordering': ['-created_at', '-id'],
            },
        ),
        migrations.CreateModel(
            name='ReservationAllocation',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('start', models.DateTimeField()),
                ('end', models.DateTimeField()),
                ('gpu', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to='scheduling.gpu')),
                ('node', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to='scheduling.node')),
                ('reservation', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='allocations', to='scheduling.reservation')),
            ],
            options={
                'ordering': ['reservation', 'node', 'gpu'],
            },
        ),
        migrations.CreateModel(
            name='ServiceLevels',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('training', models.PositiveSmallIntegerField(default=1)),
                ('inference', models.PositiveSmallIntegerField(default=2)),
                ('best_effort', models.PositiveSmallIntegerField(default=0)),
                ('fabric', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='service_levels', to='fabric.fabric')),
            ],
            options={
                'verbose_name_plural': 'service levels',
            },
        ),
        migrations.AddConstraint(
            model_name='node',
            constraint=models.UniqueConstraint(fields=('fabric', 'name'), name='node_name_unique'),
        ),
        migrations.AddConstraint(
            model_name='hca',
            constraint=models.UniqueConstraint(fields=('node', 'index'), name='hca_index_unique'),
        ),
        migrations.AddConstraint(
            model_name='gpu',
            constraint=models.UniqueConstraint(fields=('node', 'index'), name='gpu_index_unique'),
        ),
        migrations.AddConstraint(
            model_name='pool',
            constraint=models.UniqueConstraint(fields=('fabric', 'name'), name='pool_name_unique'),
        ),
        migrations.AddConstraint(
            model_name='quota',
            constraint=models.UniqueConstraint(fields=('tenant', 'pool'), name='quota_tenant_pool_unique'),
        ),
        migrations.AddIndex(
            model_name='reservation',
            index=models.Index(fields=['fabric', 'status'], name='scheduling__fabric__0d482a_idx'),
        ),
        migrations.AddIndex(
            model_name='reservation',
            index=models.Index(fields=['pool', 'tenant', 'status'], name='scheduling__pool_id_0cc931_idx'),
        ),
        migrations.AddConstraint(
            model_name='reservation',
            constraint=models.UniqueConstraint(condition=models.Q(('pkey_live', True)), fields=('fabric', 'pkey'), name='reservation_pkey_live_unique'),
        ),
        migrations.AddConstraint(
            model_name='reservation',
            constraint=models.CheckConstraint(condition=models.Q(('end__gt', models.F('start'))), name='reservation_window_valid'),
        ),
        migrations.AddConstraint(
            model_name='reservation',
            constraint=models.CheckConstraint(condition=models.Q(('pkey__isnull', True), models.Q(('pkey__gte', 1), ('pkey__lte', 32766)), _connector='OR'), name='reservation_pkey_range'),
        ),
        migrations.AddIndex(
            model_name='reservationallocation',
            index=models.Index(fields=['node', 'end'], name='scheduling__node_id_33c339_idx'),
        ),
        migrations.AddConstraint(
            model_name='reservationallocation',
            constraint=models.CheckConstraint(condition=models.Q(('end__gt', models.F('start'))), name='allocation_window_valid'),
        ),
        # PostgreSQL only (btree_gist from tenancy.0002); SQLite serialises writers instead.
        scheduling.db.AddConstraintOnPostgres(
            model_name='reservationallocation',
            constraint=django.contrib.postgres.constraints.ExclusionConstraint(expressions=[('gpu', '='), (scheduling.db.TsTzRange('start', 'end'), '&&')], name='allocation_no_double_booking'),
        ),
        migrations.AddConstraint(
            model_name='servicelevels',
            constraint=models.CheckConstraint(condition=models.Q(('best_effort__lte', 15), ('inference__lte', 15), ('training__lte', 15)), name='sl_range'),
        ),
    ]
