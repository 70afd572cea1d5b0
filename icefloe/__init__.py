"""icefloe."""
