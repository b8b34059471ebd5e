"""Node power states as people read them: a glyph and a word for each (never colour alone), the
same on the occupancy map, the node power page and their legends."""

from __future__ import annotations

from django import template

register = template.Library()

#: state → (glyph, label); the glyph stands on a map cell, the label in legends and titles.
WORDS: dict[str, tuple[str, str]] = {
    "on": ("", "on"),
    "powering-on": ("↑", "booting"),
    "off": ("○", "powered off"),
    "powering-off": ("↓", "powering off"),
    "failed": ("✕", "power failed"),
}


@register.filter
def power_glyph(state: str) -> str:
    """``"off"`` → ``"○"``; ``on`` (and an unknown state) has none."""
    return WORDS.get(state, ("", state))[0]


@register.filter
def power_label(state: str) -> str:
    """``"powering-on"`` → ``"booting"``."""
    return WORDS.get(state, ("", state))[1]


@register.simple_tag
def power_legend(counts: dict[str, int] | None = None) -> list[dict[str, object]]:
    """Every power state with its glyph, label and (given ``counts``) how many nodes are in it."""
    counts = counts or {}
    return [
        {"state": state, "glyph": glyph, "label": label, "count": counts.get(state, 0)}
        for state, (glyph, label) in WORDS.items()
    ]
