"""GPU pools, tenant quotas, reservations and topology-aware scheduling."""
