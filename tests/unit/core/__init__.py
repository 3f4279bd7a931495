"""Unit tests of pushserver/core/."""
