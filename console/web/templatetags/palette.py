"""Tenant colours as classes: the Content-Security-Policy forbids style attributes, so a colour of
``scheduling.read_models.PALETTE`` is rendered as ``tenant-c<index>`` (frontend/src/styles.css)."""

from django import template

from scheduling.read_models import PALETTE

register = template.Library()


@register.filter
def palette_class(colour: str) -> str:
    """``"#1e88e5"`` → ``"tenant-c0"``; an unknown or empty colour → ``""``."""
    try:
        return f"tenant-c{PALETTE.index(colour)}"
    except ValueError:
        return ""
