"""The device mesh, logical-axis sharding rules and multi-host helpers."""
