"""Agents on the subnet-manager hosts: their credentials and state (services), the wire format
of what the console asks them (wire), the calls from a worker to an agent (rpc) and the agent
process itself (runtime). docs/architecture.md, "Agents", says why a WebSocket."""
