"""Power API bodies. The BMC password is write-only: no serializer here ever outputs it."""

from __future__ import annotations

from rest_framework import serializers

from console.power.models import Bmc, PowerEvent
from console.power.services import ACTIONS


class BmcSerializer(serializers.ModelSerializer[Bmc]):
    """A node's BMC as shown: everything but the password (``has_password`` says whether one is set)."""

    has_password = serializers.SerializerMethodField()

    class Meta:
        model = Bmc
        fields = ["driver", "address", "username", "system_id", "verify_tls", "has_password", "updated_at"]
        read_only_fields = fields

    def get_has_password(self, bmc: Bmc) -> bool:
        return bool(bmc.password_encrypted)


class BmcInputSerializer(serializers.Serializer[dict]):
    """``PUT /api/nodes/<id>/bmc/``: the password is write-only and stored encrypted; leave it
    out to keep the stored one (not when the address or driver changes: 400 ``password_required``).
    The address is checked by ``services.check_address`` (no ``user:password@``)."""

    driver = serializers.ChoiceField(choices=Bmc.Driver.choices)
    address = serializers.CharField(max_length=255)
    username = serializers.CharField(max_length=64, required=False, allow_blank=True, default="")
    password = serializers.CharField(max_length=256, required=False, allow_blank=True, write_only=True)
    system_id = serializers.CharField(max_length=255, required=False, allow_blank=True, default="")
    verify_tls = serializers.BooleanField(required=False, default=True)


class PowerEventSerializer(serializers.ModelSerializer[PowerEvent]):
    class Meta:
        model = PowerEvent
        fields = ["from_state", "to_state", "at", "intended", "actor", "reason"]
        read_only_fields = fields


class NodePowerSerializer(serializers.Serializer[dict]):
    """A node's power: the state, since when, its BMC (no password) and recent history."""

    node = serializers.IntegerField()
    name = serializers.CharField()
    power_state = serializers.CharField()
    changed_at = serializers.DateTimeField(allow_null=True)
    boot_s = serializers.IntegerField()
    bmc = BmcSerializer(allow_null=True)
    history = PowerEventSerializer(many=True)


class PowerActionSerializer(serializers.Serializer[dict]):
    """``POST /api/nodes/<id>/power/``."""

    action = serializers.ChoiceField(choices=ACTIONS)
    reason = serializers.CharField(max_length=300, required=False, allow_blank=True, default="")
