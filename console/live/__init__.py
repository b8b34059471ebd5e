"""Channels: WebSocket authentication, consumers, routing and send-on-commit helpers."""
