"""SNIA PTS Enterprise on a twin or a real device (docs/pts.md)."""
